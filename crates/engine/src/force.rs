//! [`LogForce`]: what the layers below the log (the buffer pool, the page
//! stores) ask of it. It lives apart from both, so that a page store needs
//! nothing of the buffer pool and the pool nothing of a store's internals.

use flashlab_devices::DeviceRef;

use crate::error::Result;
use crate::page::PageId;

/// Makes the log durable; the write-ahead log implements it.
pub trait LogForce: Send + Sync {
    /// Return once every log record ending at or before `lsn` is durable.
    fn flush_to(&self, lsn: u64) -> Result<()>;

    /// The end of the log appended so far (0 for a log that does not
    /// say): where an In-Page Logging force captures its state (IPL-10).
    fn end_lsn(&self) -> u64 {
        0
    }

    /// If `lsn` lies past the end of the log: that end and the log's
    /// name (BUF-18). `None` for a log that does not say.
    fn past_end(&self, lsn: u64) -> Option<(u64, String)> {
        let _ = lsn;
        None
    }

    /// Flush a data device of this pool (checkpoint, shutdown). The log
    /// fails itself if the flush fails, so that nothing is flushed again
    /// before recovery (WAL-4).
    fn flush_device(&self, device: &DeviceRef) -> Result<()> {
        Ok(device.flush()?)
    }

    /// A data device of this pool failed in a way that leaves what is
    /// durable in doubt (a page store's failed write): the log enters its
    /// failed state as for a failed flush (WAL-4), so no commit is
    /// acknowledged until recovery; returns the error to report.
    fn fail(&self, why: String) -> crate::error::Error {
        crate::error::Error::LogFailed(why)
    }

    /// Rebuild page `id` from the log alone (BUF-9), from its records
    /// before `before_lsn` if given: its image and the LSN of the last
    /// record that changed it. `None` if this log cannot.
    fn rebuild_page(
        &self,
        id: PageId,
        page_bytes: usize,
        before_lsn: Option<u64>,
    ) -> Option<Result<(Vec<u8>, u64)>> {
        let _ = (id, page_bytes, before_lsn);
        None
    }
}
