//! The `flashlab` command line.
//!
//! Every subcommand lives in its own module under `cli/`. Errors are printed
//! as one line (`flashlab: error: ...`) with exit code 2; nothing the user
//! types or any file's contents may cause a panic.

mod cli;

use clap::Parser;

fn main() {
    let args = cli::Cli::parse();
    if let Err(error) = cli::run(args) {
        let message = format!("{error:#}").replace('\n', " ");
        eprintln!("flashlab: error: {message}");
        std::process::exit(2);
    }
}
