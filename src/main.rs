//! The `flashlab` command line.
//!
//! Every subcommand lives in its own module under `cli/`. Errors are printed
//! as one line (`flashlab: error: ...`) with exit code 2; nothing the user
//! types or any file's contents may cause a panic.

mod cli;

use clap::Parser;

/// Longest error line printed: a last guard against an error that echoes
/// too much input (each error cuts its own echoes to about 80 characters).
const MESSAGE_CHARS_MAX: usize = 1000;

fn cut(message: &str) -> String {
    match message.char_indices().nth(MESSAGE_CHARS_MAX) {
        None => message.to_string(),
        Some((end, _)) => format!("{}... (cut)", &message[..end]),
    }
}

fn main() {
    let args = cli::Cli::parse();
    let result = cli::interrupt::install().and_then(|()| cli::run(args));
    if let Err(error) = result {
        let message = format!("{error:#}").replace('\n', " ");
        eprintln!("flashlab: error: {}", cut(&message));
        std::process::exit(2);
    }
}
