//! A sparse in-memory byte store with crash semantics.
//!
//! Memory and simulated devices keep their contents here. Bytes never
//! written read as zeros; memory grows with what is written, in chunks of
//! [`CHUNK_BYTES`], not with the device's capacity, so a 250 GB disk model
//! costs nothing until used.
//!
//! To model a crash, the store remembers, for every write since the last
//! flush, what the bytes were before it (its *before-image*). A flush makes
//! everything durable and forgets them. [`SparseStore::crash`] rolls the
//! unflushed writes back, newest first, leaving exactly what the last flush
//! made durable; the fault model of a later issue decides per write whether
//! it is kept, dropped or torn, through [`SparseStore::crash_with`].
//!
//! Invariants (STORE-n):
//! 1. Applying the before-images of the unflushed writes in reverse order
//!    yields the durable contents.
//! 2. Unflushed bytes are bounded by [`UNFLUSHED_BYTES_MAX`]; a writer that
//!    never flushes gets an error, not unbounded memory.

use std::collections::HashMap;

/// Allocation unit of the store.
pub const CHUNK_BYTES: usize = 4096;
/// Most bytes that may be written between two flushes (STORE-2).
pub const UNFLUSHED_BYTES_MAX: u64 = 8 << 30;

/// What a crash does with one unflushed write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashFate {
    /// The write reached the media.
    Keep,
    /// The write never reached the media.
    Drop,
    /// Only the first `bytes` of it reached the media (a torn write).
    Tear { bytes: u64 },
}

/// One write since the last flush and the bytes it replaced.
struct Unflushed {
    offset_bytes: u64,
    before: Vec<u8>,
}

/// Sparse, chunked bytes with before-images of unflushed writes.
#[derive(Default)]
pub struct SparseStore {
    chunks: HashMap<u64, Box<[u8]>>,
    unflushed: Vec<Unflushed>,
    unflushed_bytes: u64,
}

impl SparseStore {
    pub fn new() -> SparseStore {
        SparseStore::default()
    }

    /// Copy bytes at `offset_bytes` into `buf`.
    pub fn read(&self, offset_bytes: u64, buf: &mut [u8]) {
        let mut done = 0usize;
        while done < buf.len() {
            let at = offset_bytes + done as u64;
            let (chunk, within) = split(at);
            let n = (CHUNK_BYTES - within).min(buf.len() - done);
            match self.chunks.get(&chunk) {
                Some(data) => buf[done..done + n].copy_from_slice(&data[within..within + n]),
                None => buf[done..done + n].fill(0),
            }
            done += n;
        }
    }

    /// Write `data` at `offset_bytes`, remembering what it replaced. Fails
    /// (writing nothing) if the unflushed bytes would pass the limit.
    pub fn write(&mut self, offset_bytes: u64, data: &[u8]) -> Result<(), u64> {
        let len = data.len() as u64;
        if self.unflushed_bytes + len > UNFLUSHED_BYTES_MAX {
            return Err(UNFLUSHED_BYTES_MAX);
        }
        let mut before = vec![0u8; data.len()];
        self.read(offset_bytes, &mut before);
        self.unflushed.push(Unflushed {
            offset_bytes,
            before,
        });
        self.unflushed_bytes += len;
        self.put(offset_bytes, data);
        Ok(())
    }

    fn put(&mut self, offset_bytes: u64, data: &[u8]) {
        let mut done = 0usize;
        while done < data.len() {
            let at = offset_bytes + done as u64;
            let (chunk, within) = split(at);
            let n = (CHUNK_BYTES - within).min(data.len() - done);
            let slot = self
                .chunks
                .entry(chunk)
                .or_insert_with(|| vec![0u8; CHUNK_BYTES].into_boxed_slice());
            slot[within..within + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
    }

    /// Zero a range (trim); remembered like a write.
    pub fn zero(&mut self, offset_bytes: u64, len_bytes: u64) -> Result<(), u64> {
        let mut at = offset_bytes;
        let end = offset_bytes + len_bytes;
        while at < end {
            let n = (end - at).min(1 << 20);
            self.write(at, &vec![0u8; n as usize])?;
            at += n;
        }
        Ok(())
    }

    /// Everything written so far is durable.
    pub fn flush(&mut self) {
        self.unflushed.clear();
        self.unflushed_bytes = 0;
    }

    /// Make the oldest `writes` unflushed writes durable: a flush covers
    /// what was written before it began, not what arrived while it ran.
    pub fn flush_first(&mut self, writes: usize) {
        let writes = writes.min(self.unflushed.len());
        for write in self.unflushed.drain(..writes) {
            self.unflushed_bytes -= write.before.len() as u64;
        }
    }

    /// Number of writes since the last flush.
    pub fn unflushed_writes(&self) -> usize {
        self.unflushed.len()
    }

    /// A crash: every unflushed write is lost (STORE-1).
    pub fn crash(&mut self) {
        self.crash_with(|_, _| CrashFate::Drop);
    }

    /// A crash where `fate(index, len_bytes)` decides each unflushed write's
    /// fate (index 0 is the oldest). Writes are undone newest first, so an
    /// older write that is kept survives under a newer one that is dropped.
    pub fn crash_with(&mut self, mut fate: impl FnMut(usize, u64) -> CrashFate) {
        let fates: Vec<CrashFate> = self
            .unflushed
            .iter()
            .enumerate()
            .map(|(i, w)| fate(i, w.before.len() as u64))
            .collect();
        let unflushed = std::mem::take(&mut self.unflushed);
        for (write, fate) in unflushed.into_iter().zip(fates).rev() {
            match fate {
                CrashFate::Keep => {}
                CrashFate::Drop => self.put(write.offset_bytes, &write.before),
                CrashFate::Tear { bytes } => {
                    let kept = (bytes as usize).min(write.before.len());
                    self.put(write.offset_bytes + kept as u64, &write.before[kept..]);
                }
            }
        }
        self.unflushed_bytes = 0;
    }

    /// Bytes of memory held by data chunks.
    pub fn resident_bytes(&self) -> u64 {
        (self.chunks.len() * CHUNK_BYTES) as u64
    }
}

fn split(offset_bytes: u64) -> (u64, usize) {
    (
        offset_bytes / CHUNK_BYTES as u64,
        (offset_bytes % CHUNK_BYTES as u64) as usize,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwritten_reads_zero_and_writes_span_chunks() {
        let mut store = SparseStore::new();
        let mut buf = vec![7u8; 100];
        store.read(10_000, &mut buf);
        assert!(buf.iter().all(|&b| b == 0));
        let data: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        store.write(4000, &data).unwrap();
        let mut back = vec![0u8; 10_000];
        store.read(4000, &mut back);
        assert_eq!(back, data);
    }

    #[test]
    fn crash_restores_the_last_flushed_state() {
        let mut store = SparseStore::new();
        store.write(0, &[1u8; 512]).unwrap();
        store.flush();
        store.write(0, &[2u8; 512]).unwrap();
        store.write(256, &[3u8; 512]).unwrap();
        store.crash();
        let mut buf = vec![0u8; 1024];
        store.read(0, &mut buf);
        assert!(buf[..512].iter().all(|&b| b == 1));
        assert!(buf[512..].iter().all(|&b| b == 0));
    }

    #[test]
    fn torn_write_keeps_only_its_prefix() {
        let mut store = SparseStore::new();
        store.write(0, &[9u8; 1024]).unwrap();
        store.crash_with(|_, _| CrashFate::Tear { bytes: 512 });
        let mut buf = vec![0u8; 1024];
        store.read(0, &mut buf);
        assert!(buf[..512].iter().all(|&b| b == 9));
        assert!(buf[512..].iter().all(|&b| b == 0));
    }

    #[test]
    fn kept_old_write_survives_under_dropped_new_one() {
        let mut store = SparseStore::new();
        store.write(0, &[1u8; 512]).unwrap();
        store.write(0, &[2u8; 512]).unwrap();
        store.crash_with(|i, _| {
            if i == 0 {
                CrashFate::Keep
            } else {
                CrashFate::Drop
            }
        });
        let mut buf = vec![0u8; 512];
        store.read(0, &mut buf);
        assert!(buf.iter().all(|&b| b == 1));
    }
}
