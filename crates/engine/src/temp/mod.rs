//! # Temporary space and the operators that spill to it
//!
//! lee2008 section 6 traces what a database server writes to its temporary
//! table space while it sorts and joins: sorted runs written sequentially,
//! then read back at random while they are merged; hash partitions written,
//! to the paper's surprise, append-only as well, then read back at random.
//! This module is that part of flashlab's server: a temporary space on its
//! own device, and three operators that use it when their input does not fit
//! their memory budget.
//!
//! - [`space`]: the temp space manager. Clusters are allocated append-only
//!   from the next free cluster, freed clusters go to a free list that is used
//!   only once the cap is reached, and a configurable cap gives a "temp space
//!   full" error of its own, distinct from an operator's memory budget being
//!   too small. In the real world the space is a file in a directory of the
//!   caller's choosing, unlinked as soon as it is open, so it is gone on
//!   completion, on error and on a crash alike.
//! - [`cluster`]: the on-device unit (a 40-byte header with a CRC, then
//!   payload; see `docs/FORMAT.md`), the owners that free what an operator
//!   allocated when they are dropped (RAII: success, error and panic free the
//!   same way), and the I/O workers behind write-behind and read-ahead.
//! - `tuple`: tuples, sort and join keys over any set of columns (byte
//!   fields of flat records, or typed columns of engine rows), ascending or
//!   descending, normalised to one memcomparable byte string; the inputs
//!   (engine table scans, vectors, and the sort benchmark's 100-byte records
//!   from a seeded gensort-like generator) and a valsort-like checksum.
//! - [`run`]: sorted runs, written sequentially cluster by cluster.
//! - [`forecast`]: overlapped merge reads: the clusters needed next are
//!   forecast from each run's last key and read ahead, several in flight
//!   (Knuth's forecasting, vol. 3 5.4.6).
//! - [`sort`]: external merge sort (quicksort of each memory load or
//!   replacement selection; merges with a stated fan-in rule, several
//!   passes when needed; stable).
//! - [`hash_join`]: grace hash join, with both partition layouts.
//! - [`merge_join`]: sort-merge join, duplicates on both sides.
//! - [`cpu`]: what the operators charge the simulated CPU, and why.
//!
//! ## Memory budgets
//!
//! Every operator has a budget in bytes ([`sort::SortConfig::memory_bytes`]
//! and the like) that covers every buffer it holds: tuples, their keys and
//! per-tuple bookkeeping (counted at [`tuple::TUPLE_OVERHEAD_BYTES`] a
//! tuple), input and output clusters, write-behind buffers and the
//! buffers of reads issued ahead. A budget too
//! small to make progress is refused before any temp space is allocated,
//! with an error naming the setting ([`TempError::Memory`]).
//!
//! ## Invariants (TEMP-n)
//!
//! 1. Allocated extents are disjoint, cluster-aligned to the sector, and lie
//!    below the cap; the free list holds disjoint, coalesced extents below
//!    the next free cluster, none of them allocated.
//! 2. Every allocated extent has exactly one owner ([`cluster::Extents`]),
//!    which frees it when dropped; when an operator returns, successfully or
//!    not, everything it allocated is free again.
//! 3. A cluster is read only after it was written in full, and a cluster
//!    read back carries the CRC it was written with (a mismatch is
//!    [`TempError::Corrupt`], never a wrong answer).
//! 4. A sort is stable: tuples with equal keys leave in input order. Runs
//!    are kept in input order and merges break ties by run position.
//! 5. Operators never hold a `std::sync::Mutex` across I/O or CPU charges;
//!    the space's allocator lock is held only for the bookkeeping itself.
//! 6. No behaviour depends on hash-map iteration order: hash tables are
//!    arrays of chains in insertion order, partitions are numbered.

pub mod calibrate;
pub mod cluster;
pub mod cpu;
pub mod forecast;
pub mod hash_join;
pub mod merge_join;
pub mod run;
pub mod sort;
pub mod space;
pub mod tuple;

#[cfg(test)]
mod forecast_tests;
#[cfg(test)]
mod tests;

use flashlab_devices::DeviceError;
use thiserror::Error;

pub use cpu::OperatorCosts;
pub use hash_join::{HashJoin, HashJoinConfig, HashJoinStats, PartitionLayout};
pub use merge_join::{MergeJoin, MergeJoinConfig, MergeJoinStats};
pub use sort::{ExternalSort, RunGeneration, SortConfig, SortStats, SortedStream};
pub use space::{TempSpace, TempSpaceStats};
pub use tuple::{KeyPart, Order, SortKey, TupleSource};

/// Smallest cluster: lee2008 Figure 7 sweeps 2 KB to 128 KB.
pub const CLUSTER_BYTES_MIN: usize = 2 << 10;
/// Largest cluster.
pub const CLUSTER_BYTES_MAX: usize = 256 << 10;

/// The temp module's result type.
pub type Result<T, E = TempError> = std::result::Result<T, E>;

/// Where a join delivers its matches: `(left or build tuple, right or probe
/// tuple)`; an error stops the join (and frees its temp space).
pub type JoinSink<'a> = dyn FnMut(&[u8], &[u8]) -> Result<()> + 'a;

/// Everything a temp-space operator can fail with. Each names the setting,
/// device or offset it is about, in one line.
#[derive(Debug, Error)]
pub enum TempError {
    /// The temp space reached its cap (or its device is full). Distinct from
    /// [`TempError::Memory`]: more memory would not help, more temp space would.
    #[error(
        "temp space full on {device}: {needed_bytes} more bytes needed with {used_bytes} of {capacity_bytes} in use (raise the temp space's capacity_bytes)"
    )]
    Full {
        device: String,
        needed_bytes: u64,
        used_bytes: u64,
        capacity_bytes: u64,
    },
    /// The memory budget is too small for the operator to make progress.
    #[error("memory_bytes too small: {0}")]
    Memory(String),
    /// A setting that cannot work (a cluster size that is not a multiple of
    /// the sector, a cap beyond the device, a missing directory).
    #[error("{setting}: {problem}")]
    Setting {
        setting: &'static str,
        problem: String,
    },
    /// A tuple the operator cannot handle (shorter than its key, too large).
    #[error("tuple: {0}")]
    Tuple(String),
    /// A cluster read back does not carry what was written.
    #[error("corrupt temp cluster at offset {offset_bytes}: {problem}")]
    Corrupt { offset_bytes: u64, problem: String },
    /// A device error other than "full".
    #[error("temp device: {0}")]
    Device(DeviceError),
    /// An engine error from an input (a table scan).
    #[error(transparent)]
    Engine(#[from] crate::Error),
    /// The consumer of an operator's output gave up.
    #[error("consumer: {0}")]
    Consumer(String),
}

impl TempError {
    /// Shorthand for a bad setting.
    pub fn setting(setting: &'static str, problem: impl Into<String>) -> TempError {
        TempError::Setting {
            setting,
            problem: problem.into(),
        }
    }

    /// True for "temp space full" (from the cap or from the device).
    pub fn is_full(&self) -> bool {
        matches!(self, TempError::Full { .. })
    }
}

impl From<DeviceError> for TempError {
    fn from(e: DeviceError) -> TempError {
        if e.is_full() {
            let device = match &e {
                DeviceError::Full { device, .. } | DeviceError::Io { device, .. } => device.clone(),
                _ => String::new(),
            };
            return TempError::Full {
                device,
                needed_bytes: 0,
                used_bytes: 0,
                capacity_bytes: 0,
            };
        }
        TempError::Device(e)
    }
}

impl From<TempError> for crate::Error {
    fn from(e: TempError) -> crate::Error {
        match e {
            TempError::Full { .. } => crate::Error::SpaceFull(e.to_string()),
            TempError::Memory(_) | TempError::Setting { .. } => crate::Error::Config(e.to_string()),
            TempError::Engine(inner) => inner,
            TempError::Device(inner) => crate::Error::Device(inner),
            TempError::Tuple(problem) => crate::Error::malformed("tuple", problem),
            TempError::Corrupt { .. } => crate::Error::malformed("temp cluster", e.to_string()),
            TempError::Consumer(problem) => crate::Error::Invalid(problem),
        }
    }
}

/// Check a cluster size against the limits and the device's sector.
pub fn validate_cluster_bytes(cluster_bytes: usize, sector_bytes: u32) -> Result<()> {
    if !(CLUSTER_BYTES_MIN..=CLUSTER_BYTES_MAX).contains(&cluster_bytes) {
        return Err(TempError::setting(
            "cluster_bytes",
            format!(
                "{cluster_bytes} is outside {CLUSTER_BYTES_MIN}..={CLUSTER_BYTES_MAX} bytes (2 KB to 256 KB)"
            ),
        ));
    }
    if sector_bytes == 0 || !cluster_bytes.is_multiple_of(sector_bytes as usize) {
        return Err(TempError::setting(
            "cluster_bytes",
            format!(
                "{cluster_bytes} is not a multiple of the temp device's {sector_bytes}-byte sector"
            ),
        ));
    }
    Ok(())
}
