//! The `flashlab` command line.
//!
//! Every subcommand lives in its own module under `cli/`. Errors are printed
//! as one line (`flashlab: error: ...`) with exit code 2; nothing the user
//! types or any file's contents may cause a panic.

// The standard library's printing macros panic when the write fails (a
// closed pipe, a full disk). These replace them in the whole program, and
// route every failure to `cli::output`, which stops the run cleanly.
macro_rules! println {
    () => { $crate::cli::output::stdout(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::cli::output::stdout(format_args!("{}\n", format_args!($($arg)*))) };
}
macro_rules! print {
    ($($arg:tt)*) => { $crate::cli::output::stdout(format_args!($($arg)*)) };
}
macro_rules! eprintln {
    () => { $crate::cli::output::stderr(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::cli::output::stderr(format_args!("{}\n", format_args!($($arg)*))) };
}

mod cli;

use clap::Parser;

/// The allocator: the engine allocates and frees page-sized buffers and
/// small records at a high rate from many threads, where glibc's malloc
/// spent a fifth of a simulated TPC-B run consolidating and unlinking
/// chunks (docs/PERFORMANCE-HISTORY.md, "The allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (mimalloc.h, v2 and v3: the option
/// before `mi_option_use_numa_nodes`; the Rust binding does not name it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t =
    libmimalloc_sys::mi_option_use_numa_nodes - 1;
/// Freed memory goes back to the OS after this long.
const ALLOCATOR_PURGE_DELAY_MS: std::ffi::c_long = 1000;

/// Set the allocator's purge delay, unless `MIMALLOC_PURGE_DELAY` says
/// otherwise. With mimalloc's default (10 ms), the page buffers a run frees
/// and allocates again went back to the OS and were faulted in again: a
/// fifth of a simulated TPC-B run's CPU in the kernel, zeroing pages.
fn tune_allocator() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: mimalloc's option calls take an option index and a value and
    // may be called at any time from any thread.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, ALLOCATOR_PURGE_DELAY_MS) }
}

/// Longest error line printed: a last guard against an error that echoes
/// too much input (each error cuts its own echoes to about 80 characters).
const MESSAGE_CHARS_MAX: usize = 1000;

fn cut(message: &str) -> String {
    match message.char_indices().nth(MESSAGE_CHARS_MAX) {
        None => message.to_string(),
        Some((end, _)) => format!("{}... (cut)", &message[..end]),
    }
}

/// The error and its causes on one line, each said once: a cause whose
/// text the line already holds (a file error that names its OS error) is
/// left out, and a cause that repeats the context and says more replaces it.
fn one_line(error: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in error.chain() {
        let text = cause.to_string().replace('\n', " ");
        if message.contains(&text) {
            continue;
        }
        if text.contains(&message) {
            // The cause repeats the context and says more: it alone.
            message = text;
            continue;
        }
        if !message.is_empty() {
            message.push_str(": ");
        }
        message.push_str(&text);
    }
    message
}

fn main() {
    tune_allocator();
    let args = cli::Cli::parse();
    let result = cli::interrupt::install().and_then(|()| cli::run(args));
    if let Err(error) = result {
        let message = one_line(&error);
        eprintln!("flashlab: error: {}", cut(&message));
        std::process::exit(2);
    }
}
