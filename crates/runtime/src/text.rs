//! Reading a text file the user names (a configuration, a device
//! description) with a limit on its size.
//!
//! A file's length from `metadata` is no bound: `/dev/zero`, a FIFO or a
//! file that grows while it is read report 0 or less than they give. The
//! read itself stops one byte past the limit, so memory is bounded by the
//! limit whatever the path is.

use std::io::Read;
use std::path::Path;

/// Why a text file was not read.
#[derive(Debug)]
pub enum TextFileError {
    Io(std::io::Error),
    /// More than the limit's bytes.
    TooLarge {
        limit_bytes: u64,
    },
    NotUtf8,
}

impl std::fmt::Display for TextFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TextFileError::Io(e) => write!(f, "{e}"),
            TextFileError::TooLarge { limit_bytes } => {
                write!(f, "larger than the limit of {limit_bytes} bytes")
            }
            TextFileError::NotUtf8 => write!(f, "not UTF-8 text"),
        }
    }
}

impl std::error::Error for TextFileError {}

/// The text of `path`, refused if it holds more than `limit_bytes`.
pub fn read_text_file(path: &Path, limit_bytes: u64) -> Result<String, TextFileError> {
    let file = std::fs::File::open(path).map_err(TextFileError::Io)?;
    let mut bytes = Vec::new();
    file.take(limit_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(TextFileError::Io)?;
    if bytes.len() as u64 > limit_bytes {
        return Err(TextFileError::TooLarge { limit_bytes });
    }
    String::from_utf8(bytes).map_err(|_| TextFileError::NotUtf8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_file_is_refused_at_the_limit() {
        let err = read_text_file(Path::new("/dev/zero"), 4096).unwrap_err();
        assert!(matches!(err, TextFileError::TooLarge { limit_bytes: 4096 }));
    }

    #[test]
    fn a_file_within_the_limit_is_read() {
        let dir = std::env::temp_dir().join(format!("text-{}", std::process::id()));
        std::fs::write(&dir, "a = 1\n").unwrap();
        assert_eq!(read_text_file(&dir, 6).unwrap(), "a = 1\n");
        assert!(read_text_file(&dir, 5).is_err());
        std::fs::remove_file(&dir).unwrap();
    }
}
