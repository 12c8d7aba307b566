//! The in-place page store: page `n` at device offset `n * page_bytes`.
//!
//! No format of its own and no metadata: page 0 (the space header) is the
//! first page of the device, and a write overwrites the page where it is.
//! Durability is the device's: [`PageStore::sync`] is one device flush.

use std::sync::atomic::{AtomicU64, Ordering};

use flashlab_devices::DeviceRef;

use super::{PageStore, StoreInfo, StoreKind, StoreStats};
use crate::error::Result;
use crate::force::LogForce;
use crate::page::PageNo;

/// See the module documentation.
pub struct InPlaceStore {
    device: DeviceRef,
    page_bytes: usize,
    capacity_pages: u64,
    pages_written: AtomicU64,
}

impl InPlaceStore {
    /// A store over the whole device, or its first `capacity_bytes`.
    pub fn new(device: DeviceRef, page_bytes: usize, capacity_bytes: Option<u64>) -> InPlaceStore {
        let bytes = capacity_bytes
            .unwrap_or(u64::MAX)
            .min(device.capacity_bytes());
        let capacity_pages = (bytes / page_bytes.max(1) as u64).min(u64::from(u32::MAX));
        InPlaceStore {
            device,
            page_bytes,
            capacity_pages,
            pages_written: AtomicU64::new(0),
        }
    }

    fn offset_bytes(&self, page_no: PageNo) -> u64 {
        u64::from(page_no) * self.page_bytes as u64
    }
}

impl PageStore for InPlaceStore {
    fn info(&self) -> StoreInfo {
        StoreInfo {
            kind: StoreKind::InPlace,
            page_bytes: self.page_bytes,
            capacity_pages: self.capacity_pages,
        }
    }

    fn device(&self) -> &DeviceRef {
        &self.device
    }

    fn read_page(&self, page_no: PageNo, buf: &mut [u8]) -> Result<()> {
        debug_assert_eq!(buf.len(), self.page_bytes);
        Ok(self.device.read(self.offset_bytes(page_no), buf)?)
    }

    fn read_pages(&self, first: PageNo, buf: &mut [u8]) -> Result<()> {
        debug_assert_eq!(buf.len() % self.page_bytes, 0);
        Ok(self.device.read(self.offset_bytes(first), buf)?)
    }

    fn write_batch(
        &self,
        pages: &[(PageNo, &[u8])],
        scheduler: &flashlab_devices::scheduler::SchedulerConfig,
    ) -> Result<u64> {
        let batch: Vec<(u64, &[u8])> = pages
            .iter()
            .map(|&(page_no, image)| (self.offset_bytes(page_no), image))
            .collect();
        let dispatched =
            flashlab_devices::scheduler::submit_batch(&*self.device, &batch, scheduler)?;
        self.pages_written
            .fetch_add(pages.len() as u64, Ordering::Relaxed);
        Ok(dispatched.requests)
    }

    fn write_page(&self, page_no: PageNo, image: &[u8]) -> Result<()> {
        debug_assert_eq!(image.len(), self.page_bytes);
        self.device.write(self.offset_bytes(page_no), image)?;
        self.pages_written.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn sync(&self, log: &dyn LogForce) -> Result<()> {
        log.flush_device(&self.device)
    }

    fn stats(&self) -> StoreStats {
        let pages = self.pages_written.load(Ordering::Relaxed);
        StoreStats {
            pages_written: pages,
            device_bytes_written: pages * self.page_bytes as u64,
            device_writes: pages,
            ..StoreStats::default()
        }
    }
}
