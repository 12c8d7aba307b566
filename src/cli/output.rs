//! Everything `flashlab` writes: standard output and error, and output files.
//!
//! **Standard output and error.** The crate's `println!`, `print!` and
//! `eprintln!` (defined in `main.rs`) come here instead of to the standard
//! library's, which panic when a write fails. A reader that went away (a
//! closed pipe: `flashlab devices | head -1`) ends the program quietly, as
//! `cat` and `grep` end: the run stops as a signal would stop it (scratch
//! files removed, a kept database left as after a crash) and the process
//! dies of SIGPIPE. Any other failure of standard output (a full device,
//! an I/O error) is a one-line error and exit 2, after the same clean-up:
//! what a run prints is its result, and a result that cannot be written is
//! not a success. A failed write to standard error other than a closed pipe
//! is ignored: there is nowhere left to say so.
//!
//! **Output files** ([`OutputFile`]). An output path is checked and its
//! temporary file created before the work starts, so a path that cannot be
//! written fails in a moment, not after the measurement. The result is
//! written to the temporary name beside it and renamed over the path only
//! when complete; a path that is not a regular file (a device node, a
//! directory, a link to one) is refused, never replaced.

use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// Write formatted text to standard output; see the module's essay.
pub fn stdout(args: fmt::Arguments<'_>) {
    let mut out = io::stdout().lock();
    if let Err(error) = out.write_fmt(args).and_then(|()| out.flush()) {
        drop(out);
        failed("standard output", error);
    }
}

/// Write formatted text to standard error; see the module's essay.
pub fn stderr(args: fmt::Arguments<'_>) {
    let mut err = io::stderr().lock();
    if let Err(error) = err.write_fmt(args) {
        drop(err);
        if error.kind() == io::ErrorKind::BrokenPipe {
            failed("standard error", error);
        }
    }
}

/// A write to `stream` failed: stop the run.
fn failed(stream: &str, error: io::Error) -> ! {
    if error.kind() == io::ErrorKind::BrokenPipe {
        super::interrupt::stop_for_closed_pipe()
    }
    super::interrupt::stop_for_error(&format!("cannot write {stream}: {error}"))
}

/// An output file being written: a temporary file beside `path`, renamed
/// over it by [`OutputFile::finish`]. Dropped unfinished, the temporary
/// file is removed (a signal removes it too).
pub struct OutputFile {
    flag: &'static str,
    path: PathBuf,
    tmp: PathBuf,
    file: Option<File>,
    _on_signal: super::interrupt::Registered,
}

impl OutputFile {
    /// Check `path` (given as `flag`) and create its temporary file.
    pub fn create(flag: &'static str, path: &Path) -> anyhow::Result<OutputFile> {
        let path = target(flag, path)?;
        let tmp = temporary_name(&path);
        let file = File::create(&tmp)
            .with_context(|| format!("{flag} {}: cannot write beside it", path.display()))?;
        let on_signal = super::interrupt::remove_on_interrupt(&tmp);
        Ok(OutputFile {
            flag,
            path,
            tmp,
            file: Some(file),
            _on_signal: on_signal,
        })
    }

    /// The temporary file's path, for writers that open a path themselves
    /// (it keeps the output's extension, which such writers may read).
    pub fn tmp_path(&self) -> &Path {
        &self.tmp
    }

    /// The open temporary file.
    pub fn file(&mut self) -> &mut File {
        self.file
            .as_mut()
            .expect("an OutputFile is open until finished")
    }

    /// The path the output is renamed to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Write all of `bytes`, then [`OutputFile::finish`].
    pub fn write_all_and_finish(mut self, bytes: &[u8]) -> anyhow::Result<()> {
        let written = self.file().write_all(bytes);
        written.with_context(|| format!("{} {}", self.flag, self.path.display()))?;
        self.finish()
    }

    /// Make the written output durable and rename it over the path.
    pub fn finish(mut self) -> anyhow::Result<()> {
        let context = || format!("{} {}", self.flag, self.path.display());
        if let Some(file) = self.file.take() {
            file.sync_all().with_context(context)?;
        }
        std::fs::rename(&self.tmp, &self.path).with_context(context)?;
        Ok(())
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if self.file.is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// The regular file `path` names (through a symbolic link), or `path`
/// itself when nothing is there; anything else is refused.
fn target(flag: &str, path: &Path) -> anyhow::Result<PathBuf> {
    let shown = path.display();
    if path.file_name().is_none() {
        bail!("{flag} {shown}: not a file name");
    }
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => {
            let real = std::fs::canonicalize(path).with_context(|| format!("{flag} {shown}"))?;
            Ok(real)
        }
        Ok(meta) if meta.is_dir() => bail!("{flag} {shown}: is a directory"),
        Ok(_) => bail!("{flag} {shown}: is not a regular file (a device or a pipe); not replaced"),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if std::fs::symlink_metadata(path).is_ok() {
                bail!("{flag} {shown}: is a link to nothing");
            }
            Ok(path.to_path_buf())
        }
        Err(e) => Err(e).with_context(|| format!("{flag} {shown}")),
    }
}

/// `DIR/.partial-NAME` for `DIR/NAME`: hidden, and with NAME's extension.
fn temporary_name(path: &Path) -> PathBuf {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    path.with_file_name(format!(".partial-{name}"))
}

/// Check that directory `dir` (given as `flag`) can be written, creating
/// it if needed, before a long run writes its results there.
pub fn check_dir(flag: &str, dir: &Path) -> anyhow::Result<()> {
    let shown = dir.display();
    if dir.exists() && !dir.is_dir() {
        bail!("{flag} {shown}: exists and is not a directory");
    }
    std::fs::create_dir_all(dir).with_context(|| format!("{flag} {shown}"))?;
    let probe = dir.join(format!(".flashlab-probe-{}", std::process::id()));
    File::create(&probe).with_context(|| format!("{flag} {shown}: cannot write in it"))?;
    std::fs::remove_file(&probe).with_context(|| format!("{flag} {shown}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_replaces_a_regular_file_only_when_finished() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.json");
        std::fs::write(&path, "old").unwrap();
        let out = OutputFile::create("--out", &path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        out.write_all_and_finish(b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file left");
    }

    #[test]
    fn an_unfinished_output_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.csv");
        drop(OutputFile::create("--out", &path).unwrap());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn devices_directories_and_missing_parents_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        for (path, fragment) in [
            (PathBuf::from("/dev/null"), "not a regular file"),
            (dir.path().to_path_buf(), "is a directory"),
            (dir.path().join("no/such/x"), "cannot write beside it"),
        ] {
            let err = OutputFile::create("--out", &path).err().unwrap();
            assert!(format!("{err:#}").contains(fragment), "{err:#}");
        }
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        assert!(OutputFile::create("--out", &link).is_err());
    }
}
