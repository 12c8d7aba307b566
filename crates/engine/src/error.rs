//! Engine errors.
//!
//! Every error names what it is about (the space, page, device offset, file
//! or setting) in one line. Retryable errors (a write-write conflict, a
//! transaction killed to prevent deadlock) say so through
//! [`Error::is_retryable`], so a client can simply run the transaction again.

use flashlab_devices::DeviceError;
use thiserror::Error;

/// The engine's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything the engine can fail with.
#[derive(Debug, Error)]
pub enum Error {
    /// A page failed its checksum or carries another page's id.
    #[error(
        "corruption in space '{space}' page {page_no} at device offset {offset_bytes}: {problem}"
    )]
    Corruption {
        /// The data space.
        space: String,
        /// The page's number in its space.
        page_no: u64,
        /// Where the page lies on its device.
        offset_bytes: u64,
        /// What is wrong.
        problem: String,
    },
    /// A device or file has no room left.
    #[error("space full: {0}")]
    SpaceFull(String),
    /// A data space's page allocator found every page below its limit in
    /// use: unlike a store's own [`Error::SpaceFull`], every page is then
    /// accounted for (VERIFY-1 checks it), so a harness may accept it.
    #[error(
        "space full: data space '{space}' is full: all {capacity_pages} pages are in use \
         ({undo_reserve_pages} kept for undo)"
    )]
    PagesInUse {
        /// The data space.
        space: String,
        /// Pages the space can hold.
        capacity_pages: u64,
        /// Pages kept back for undo.
        undo_reserve_pages: u64,
    },
    /// The transaction lost a conflict and must be retried.
    #[error("transaction {txn} chosen as a deadlock victim; retry it")]
    Deadlock {
        /// The victim.
        txn: u64,
    },
    /// Snapshot isolation: another transaction committed a change to a row
    /// this one is changing after this one's snapshot (first updater wins).
    #[error("transaction {txn} could not serialize: {detail}; retry it")]
    Serialization {
        /// The transaction that lost.
        txn: u64,
        /// What it conflicted with.
        detail: String,
    },
    /// A version the read needs is no longer kept (Oracle's ORA-01555).
    #[error("snapshot too old: {0}")]
    SnapshotTooOld(String),
    /// A configuration that cannot work.
    #[error("configuration: {0}")]
    Config(String),
    /// A database that cannot be opened as it is.
    #[error("cannot open database: {0}")]
    Open(String),
    /// The database directory is held by another process (DIR-1).
    #[error("database locked: {0}")]
    Locked(String),
    /// A database whose files are damaged or not what the manifest says
    /// (swapped, foreign, master records unreadable): never re-initialised.
    #[error("database damaged: {0}")]
    Damaged(String),
    /// A malformed record, page or row (decoders never panic).
    #[error("malformed {what}: {problem}")]
    Malformed {
        /// What was being decoded.
        what: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// A table or index that does not exist, or already does.
    #[error("{0}")]
    Catalog(String),
    /// A key or row larger than a page can hold.
    #[error("too large: {0}")]
    TooLarge(String),
    /// The log could not be made durable; the engine refuses further commits
    /// until it is recovered (a failed fsync is never retried).
    #[error("log failed, database needs recovery: {0}")]
    LogFailed(String),
    /// The log has no room for a new record until a checkpoint frees some;
    /// the message names what holds the log. Retryable.
    #[error("log full: {0}; retry the transaction")]
    LogFull(String),
    /// The log is damaged before its durable end: opening would lose
    /// acknowledged commits, so the database is not opened.
    #[error("log damaged at LSN {lsn} (device offset {offset_bytes}): {problem}")]
    LogDamaged {
        /// Where in the log the damage lies.
        lsn: u64,
        /// Where on the log device.
        offset_bytes: u64,
        /// What is wrong.
        problem: String,
    },
    /// A transaction used after it ended, or a similar misuse.
    #[error("invalid use: {0}")]
    Invalid(String),
    /// A device error.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// An operating-system error on a database file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        #[source]
        /// The operating system's error.
        source: std::io::Error,
    },
}

/// What an application can do about an error ([`Error::kind`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Run the transaction again ([`crate::Database::transact`] does).
    Retryable,
    /// A file or page is damaged: the database refuses to serve it.
    Damaged,
    /// A space or device has no room left.
    Full,
    /// Another process holds the database directory.
    Locked,
    /// The request or the configuration cannot work as given (a missing
    /// table, a value too large, a snapshot no longer kept, a directory
    /// that is not a database).
    InvalidInput,
    /// The log could not be made durable: the database accepts no commit
    /// until it is closed and opened again (recovery).
    Failed,
    /// The operating system or a device failed an operation.
    Io,
}

impl Error {
    /// What kind of error this is; see [`ErrorKind`].
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Deadlock { .. } | Error::Serialization { .. } | Error::LogFull(_) => {
                ErrorKind::Retryable
            }
            Error::Corruption { .. }
            | Error::Damaged(_)
            | Error::Malformed { .. }
            | Error::LogDamaged { .. } => ErrorKind::Damaged,
            e if e.is_space_full() => ErrorKind::Full,
            Error::Locked(_) => ErrorKind::Locked,
            Error::LogFailed(_) => ErrorKind::Failed,
            Error::Device(_) | Error::Io { .. } => ErrorKind::Io,
            _ => ErrorKind::InvalidInput,
        }
    }

    /// True when running the transaction again may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Deadlock { .. } | Error::Serialization { .. } | Error::LogFull(_)
        )
    }

    /// True for "no room left" errors, from the engine or a device.
    pub fn is_space_full(&self) -> bool {
        match self {
            Error::SpaceFull(_) | Error::PagesInUse { .. } => true,
            Error::Device(e) => e.is_full(),
            _ => false,
        }
    }

    /// Shorthand for a malformed-input error.
    pub fn malformed(what: &'static str, problem: impl Into<String>) -> Error {
        Error::Malformed {
            what,
            problem: problem.into(),
        }
    }
}

/// Test support: the message of `r`'s error; panics when `r` is `Ok` (its
/// value need not be `Debug`, as `unwrap_err` would want).
#[cfg(test)]
pub(crate) fn error_text<T, E: std::fmt::Display>(r: std::result::Result<T, E>) -> String {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}
