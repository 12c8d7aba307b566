//! SIGINT and SIGTERM: stop a run cleanly.
//!
//! [`install`] starts a thread that waits for either signal. When one
//! arrives it removes every path registered with [`remove_on_interrupt`]
//! (a real benchmark's scratch directory or database without `--keep`, a
//! sort's input and outputs), prints one line saying what it removed and
//! what it kept ([`keep_on_interrupt`]: a `--keep` database, which the
//! write-ahead log keeps consistent whatever moment the process stops at,
//! as after a crash), and exits with 128 + the signal number without
//! printing a report: a partial report is never published as complete.
//!
//! Registrations are undone when their guard is dropped, so a run that
//! ends normally cleans up by itself and the handler finds nothing to do.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// What to do with a path when a signal stops the run.
#[derive(Clone, Debug, PartialEq)]
enum Fate {
    Remove,
    Keep,
    /// A child process (its pid), stopped with SIGTERM first.
    Kill(u32),
    /// A results directory: its half-written `.partial-*` files (and its
    /// `units/` directory's) are removed, everything else kept.
    Partials,
}

/// Registered paths, with an id for their guards.
static PATHS: Mutex<Vec<(u64, PathBuf, Fate)>> = Mutex::new(Vec::new());
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Undoes a registration when dropped.
#[must_use = "the registration ends when the guard is dropped"]
pub struct Registered(u64);

impl Drop for Registered {
    fn drop(&mut self) {
        if let Ok(mut paths) = PATHS.lock() {
            paths.retain(|(id, _, _)| *id != self.0);
        }
    }
}

fn register(path: &Path, fate: Fate) -> Registered {
    let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if let Ok(mut paths) = PATHS.lock() {
        paths.push((id, path.to_path_buf(), fate));
    }
    Registered(id)
}

/// Remove `path` (a file or a directory tree) if a signal stops the run.
pub fn remove_on_interrupt(path: &Path) -> Registered {
    register(path, Fate::Remove)
}

/// Name `path` as kept if a signal stops the run.
pub fn keep_on_interrupt(path: &Path) -> Registered {
    register(path, Fate::Keep)
}

/// Remove the half-written `.partial-*` files of results directory `dir`
/// and of its `units/` if a signal stops the run (atomic writes not yet
/// renamed); the finished files stay.
pub fn remove_partials_on_interrupt(dir: &Path) -> Registered {
    register(dir, Fate::Partials)
}

/// The `.partial-*` files directly in `dir` and in `dir/units`.
fn partials(dir: &Path) -> Vec<PathBuf> {
    [dir.to_path_buf(), dir.join("units")]
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(".partial-"))
        })
        .collect()
}

/// Stop child process `pid` (SIGTERM) if a signal stops the run, before
/// any path is removed.
pub fn kill_on_interrupt(pid: u32) -> Registered {
    register(Path::new(""), Fate::Kill(pid))
}

/// Handle SIGINT and SIGTERM for the rest of the process's life.
pub fn install() -> anyhow::Result<()> {
    let mut signals = Signals::new([SIGINT, SIGTERM])?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                stop(signal);
            }
        })?;
    Ok(())
}

/// Held by the one caller that cleans up and exits; a second caller (a
/// signal during a failed write, say) waits here until the process ends.
static STOPPING: Mutex<()> = Mutex::new(());

/// Stop the registered children, remove and name the registered paths:
/// the clean-up every early exit shares. Returns what was removed and
/// what was kept, each as one phrase.
fn clean_up() -> (String, String) {
    let paths = match PATHS.lock() {
        Ok(paths) => paths.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    };
    for (_, _, fate) in &paths {
        if let Fate::Kill(pid) = fate {
            // SAFETY: kill takes plain integers; the pid is our own child's.
            unsafe {
                libc::kill(*pid as libc::pid_t, libc::SIGTERM);
            }
        }
    }
    let mut removed = Vec::new();
    let mut kept = Vec::new();
    for (_, path, fate) in &paths {
        match fate {
            Fate::Kill(_) => {}
            Fate::Partials => {
                for partial in partials(path) {
                    if std::fs::remove_file(&partial).is_ok() {
                        removed.push(partial.display().to_string());
                    }
                }
            }
            Fate::Remove => {
                let gone = if path.is_dir() {
                    std::fs::remove_dir_all(path)
                } else {
                    std::fs::remove_file(path)
                };
                if gone.is_ok() {
                    removed.push(path.display().to_string());
                }
            }
            Fate::Keep => kept.push(path.display().to_string()),
        }
    }
    let list = |v: &[String]| {
        if v.is_empty() {
            "nothing".to_string()
        } else {
            v.join(", ")
        }
    };
    (list(&removed), list(&kept))
}

/// Clean up and exit (on the signal thread).
fn stop(signal: i32) -> ! {
    let _stopping = STOPPING.lock();
    let (removed, kept) = clean_up();
    let name = if signal == SIGINT {
        "SIGINT"
    } else {
        "SIGTERM"
    };
    // Written directly: a failed write here must not start another stop.
    let line = format!("flashlab: interrupted by {name}: removed {removed}; kept {kept}\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    std::process::exit(128 + signal);
}

/// The reader of standard output went away: clean up and die of SIGPIPE,
/// quietly, as `cat` does.
pub fn stop_for_closed_pipe() -> ! {
    let _stopping = STOPPING.lock();
    let _ = clean_up();
    // SAFETY: signal and raise take plain integers; restoring SIGPIPE's
    // default action and raising it ends the process at once.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    std::process::exit(128 + libc::SIGPIPE);
}

/// Output could not be written: clean up, say so in one line, exit 2.
pub fn stop_for_error(problem: &str) -> ! {
    let _stopping = STOPPING.lock();
    let (removed, kept) = clean_up();
    let line = match (removed.as_str(), kept.as_str()) {
        ("nothing", "nothing") => format!("flashlab: error: {problem}\n"),
        _ => format!("flashlab: error: {problem}; removed {removed}; kept {kept}\n"),
    };
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    std::process::exit(2);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A results directory's half-written files are found, in it and in
    /// its units/, and nothing finished is.
    #[test]
    fn partials_are_the_half_written_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let units = dir.path().join("units");
        std::fs::create_dir(&units).unwrap();
        for path in [
            dir.path().join(".partial-results.json"),
            units.join(".partial-devices.json"),
            dir.path().join("index.html"),
            units.join("devices.json"),
        ] {
            std::fs::write(path, "x").unwrap();
        }
        let mut found = partials(dir.path());
        found.sort();
        assert_eq!(
            found,
            vec![
                dir.path().join(".partial-results.json"),
                units.join(".partial-devices.json")
            ]
        );
    }
}
