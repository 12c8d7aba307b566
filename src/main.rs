//! The `flashlab` command line.
//!
//! Every subcommand lives in its own module under `cli/`. Errors are printed
//! as one line (`flashlab: error: ...`) with exit code 2; nothing the user
//! types or any file's contents may cause a panic.

mod cli;

use clap::Parser;

fn main() {
    let args = cli::Cli::parse();
    let result = cli::interrupt::install().and_then(|()| cli::run(args));
    if let Err(error) = result {
        let message = format!("{error:#}").replace('\n', " ");
        eprintln!("flashlab: error: {message}");
        std::process::exit(2);
    }
}
