//! Where a store's chunks live: on the heap, or in sparse scratch files.
//!
//! A store is a map from chunk number to [`CHUNK_BYTES`] bytes, where a
//! chunk never written reads as zeros. Each chunk sits in one of two
//! places:
//! - **the heap**, a reference-counted array;
//! - **a scratch file**, one sparse file per layer (below), each chunk at
//!   its own device offset, so a run of adjacent chunks is one `pread` or
//!   `pwrite`.
//!
//! A store without a scratch directory keeps every chunk on the heap. One
//! with a directory keeps new chunks on the heap while the directory's
//! heap budget lasts ([`ScratchDir::heap_budget_bytes`]) and puts the rest
//! in its file: small runs stay as fast as memory, and a database larger
//! than memory costs a map entry per chunk.
//!
//! **Images.** Imaging a store freezes its chunks into a read-only *layer*
//! that the store and the image both read through, each writing a new top
//! layer of its own. A chunk the top layer lacks is read from the layers
//! below, newest first; a chunk forgotten over a layer that holds it is a
//! *tombstone*, read as zeros.
//!
//! Invariants (CHUNK-n):
//! 1. A slot holds its chunk whole: a partial write to a chunk the top
//!    layer lacks copies the chunk up first.
//! 2. Layers are never written once frozen; a store's layers number at
//!    most [`LAYERS_MAX`].
//! 3. A directory's heap-held count is the sum of its layers' heap chunks.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use super::CHUNK_BYTES;
use super::scratch::{self, ScratchDir};

/// A chunk on the heap: exactly [`CHUNK_BYTES`] from the allocator's size
/// class of that size, so the budget counts what is resident (an `Arc`'s
/// header would put each in the next class up, a quarter more than
/// counted). Layers share by freezing, never a chunk.
type HeapChunk = Box<[u8; CHUNK_BYTES]>;

/// Most frozen layers under a store (CHUNK-2). A study images a loaded
/// database once and starts its runs from that image (an image of an image
/// adds no layer), so a chain this long is a caller's bug.
pub const LAYERS_MAX: usize = 8;

const CHUNK: u64 = CHUNK_BYTES as u64;
const ZEROS: [u8; CHUNK_BYTES] = [0u8; CHUNK_BYTES];

/// Where one chunk of a layer is.
enum Slot {
    Heap(HeapChunk),
    File,
    /// A tombstone: zeros, whatever the layers below hold.
    Zeros,
}

/// One layer's chunks, and its file if any went there.
#[derive(Default)]
struct Layer {
    /// Created on the first chunk placed in it.
    file: Option<File>,
    slots: HashMap<u64, Slot>,
    /// Its chunks on the heap and in its file, as counted in the
    /// directory's budget and the process's scratch total.
    heap_chunks: u64,
    file_chunks: u64,
    dir: Option<Arc<ScratchDir>>,
}

impl Layer {
    fn new(dir: Option<Arc<ScratchDir>>) -> Layer {
        Layer {
            file: None,
            slots: HashMap::new(),
            heap_chunks: 0,
            file_chunks: 0,
            dir,
        }
    }

    /// Take `chunk`'s slot out, releasing what it counted.
    fn release(&mut self, chunk: u64) {
        match self.slots.remove(&chunk) {
            Some(Slot::Heap(_)) => {
                self.heap_chunks -= 1;
                if let Some(dir) = &self.dir {
                    dir.release_heap(CHUNK);
                }
            }
            Some(Slot::File) => {
                self.file_chunks -= 1;
                scratch::sub_held(CHUNK);
            }
            Some(Slot::Zeros) | None => {}
        }
    }

    /// A slot for a new chunk: the heap while the budget lasts (always,
    /// without a directory), else the file.
    fn place(&mut self, chunk: u64, bytes: &[u8]) -> bool {
        let on_heap = self.dir.as_ref().is_none_or(|d| d.reserve_heap(CHUNK));
        self.release(chunk);
        if on_heap {
            let whole: [u8; CHUNK_BYTES] = bytes.try_into().expect("a whole chunk");
            self.slots.insert(chunk, Slot::Heap(Box::new(whole)));
            self.heap_chunks += 1;
        } else {
            self.slots.insert(chunk, Slot::File);
            self.file_chunks += 1;
            scratch::add_held(CHUNK);
        }
        on_heap
    }

    fn file(&mut self) -> io::Result<&File> {
        if self.file.is_none() {
            let dir = self.dir.as_ref().expect("a file slot has a directory");
            self.file = Some(dir.create_file()?);
        }
        Ok(self.file.as_ref().expect("just created"))
    }
}

impl Drop for Layer {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            dir.release_heap(self.heap_chunks * CHUNK);
        }
        scratch::sub_held(self.file_chunks * CHUNK);
    }
}

/// A frozen layer and the ones under it (CHUNK-2).
struct Frozen {
    layer: Layer,
    below: Option<Arc<Frozen>>,
    depth: usize,
}

/// Where a chunk's bytes are, as a read finds them.
#[derive(Clone, Copy)]
enum Source<'a> {
    Zeros,
    Heap(&'a [u8; CHUNK_BYTES]),
    File(&'a File),
}

impl<'a> Source<'a> {
    fn of(slot: &'a Slot, layer: &'a Layer) -> Source<'a> {
        match (slot, &layer.file) {
            (Slot::Heap(bytes), _) => Source::Heap(bytes),
            (Slot::File, Some(file)) => Source::File(file),
            _ => Source::Zeros,
        }
    }
}

/// A store's chunks: a top layer over frozen ones.
#[derive(Default)]
pub(crate) struct Chunks {
    top: Layer,
    below: Option<Arc<Frozen>>,
}

impl Chunks {
    /// Chunks that may go to files in `dir` once its heap budget is spent.
    pub(crate) fn in_scratch(dir: Arc<ScratchDir>) -> Chunks {
        Chunks {
            top: Layer::new(Some(dir)),
            below: None,
        }
    }

    /// Where `chunk`'s bytes are, top layer first.
    fn source(&self, chunk: u64) -> Source<'_> {
        if let Some(slot) = self.top.slots.get(&chunk) {
            return Source::of(slot, &self.top);
        }
        let mut layer = self.below.as_deref();
        while let Some(frozen) = layer {
            if let Some(slot) = frozen.layer.slots.get(&chunk) {
                return Source::of(slot, &frozen.layer);
            }
            layer = frozen.below.as_deref();
        }
        Source::Zeros
    }

    /// True if chunk `chunk` holds written bytes.
    pub(crate) fn holds(&self, chunk: u64) -> bool {
        !matches!(self.source(chunk), Source::Zeros)
    }

    /// Copy the bytes at `offset` into `buf` (zeros where never written);
    /// adjacent chunks in one file are read in one call.
    pub(crate) fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let end = offset + buf.len() as u64;
        let mut at = offset;
        while at < end {
            let source = self.source(at / CHUNK);
            let mut run_end = (at / CHUNK + 1) * CHUNK;
            if let Source::File(file) = source {
                while run_end < end
                    && matches!(self.source(run_end / CHUNK), Source::File(f) if std::ptr::eq(f, file))
                {
                    run_end += CHUNK;
                }
            }
            let run_end = run_end.min(end);
            let part = &mut buf[(at - offset) as usize..(run_end - offset) as usize];
            match source {
                Source::Zeros => part.fill(0),
                Source::Heap(bytes) => {
                    let within = (at % CHUNK) as usize;
                    part.copy_from_slice(&bytes[within..within + part.len()]);
                }
                Source::File(file) => file.read_exact_at(part, at)?,
            }
            at = run_end;
        }
        Ok(())
    }

    /// Write `data` at `offset`: into heap chunks in place, and into the
    /// top file in one call per run of adjacent file chunks.
    pub(crate) fn write(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let end = offset + data.len() as u64;
        let (first, last) = (offset / CHUNK, (end - 1) / CHUNK);
        let mut file_run: Option<(u64, u64)> = None;
        for chunk in first..=last {
            let from = (chunk * CHUNK).max(offset);
            let to = ((chunk + 1) * CHUNK).min(end);
            let bytes = &data[(from - offset) as usize..(to - offset) as usize];
            if self.write_in_chunk(chunk, from, bytes)? {
                continue;
            }
            // The chunk is in the top file: extend the pending run.
            file_run = match file_run {
                Some((a, _)) => Some((a, to)),
                None => Some((from, to)),
            };
            if chunk == last || !matches!(self.top.slots.get(&(chunk + 1)), Some(Slot::File)) {
                let (a, b) = file_run.take().expect("a run");
                let part = &data[(a - offset) as usize..(b - offset) as usize];
                // The next chunk may yet be placed in the file: then a
                // shorter run is written now, which is still correct.
                self.top.file()?.write_all_at(part, a)?;
            }
        }
        Ok(())
    }

    /// Put `bytes` (at device offset `from`, inside `chunk`) in the top
    /// layer. Returns true if done (a heap chunk), false if the caller
    /// writes them to the top file (the chunk's slot is there).
    fn write_in_chunk(&mut self, chunk: u64, from: u64, bytes: &[u8]) -> io::Result<bool> {
        let within = (from % CHUNK) as usize;
        match self.top.slots.get_mut(&chunk) {
            // Top heap chunks are never shared: a share freezes the top.
            Some(Slot::Heap(heap)) => {
                heap[within..within + bytes.len()].copy_from_slice(bytes);
                return Ok(true);
            }
            Some(Slot::File) => return Ok(false),
            Some(Slot::Zeros) | None => {}
        }
        // A new chunk in the top layer (CHUNK-1): its current bytes, then
        // the write over them.
        let mut whole = [0u8; CHUNK_BYTES];
        if bytes.len() < CHUNK_BYTES {
            self.read(chunk * CHUNK, &mut whole)?;
        }
        whole[within..within + bytes.len()].copy_from_slice(bytes);
        if self.top.place(chunk, &whole) {
            return Ok(true);
        }
        if bytes.len() < CHUNK_BYTES {
            self.top.file()?.write_all_at(&whole, chunk * CHUNK)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Drop chunk `chunk`: it reads as zeros from now on (a tombstone if a
    /// layer below holds it). Its file space is given back by
    /// [`Chunks::give_back`].
    pub(crate) fn remove(&mut self, chunk: u64) {
        self.top.release(chunk);
        if self.holds(chunk) {
            self.top.slots.insert(chunk, Slot::Zeros);
        }
    }

    /// Return to the file system the space of the chunks in `first..=last`
    /// that the top file no longer holds, one call per run of them (a hole
    /// per chunk would cost a system call each).
    pub(crate) fn give_back(&mut self, first: u64, last: u64) {
        let Some(file) = &self.top.file else { return };
        let mut run_start = None;
        for chunk in first..=last + 1 {
            let free = chunk <= last && !matches!(self.top.slots.get(&chunk), Some(Slot::File));
            match (free, run_start) {
                (true, None) => run_start = Some(chunk),
                (false, Some(start)) => {
                    punch_hole(file, start * CHUNK, (chunk - start) * CHUNK);
                    run_start = None;
                }
                _ => {}
            }
        }
    }

    /// Zero `offset..+len` within the chunks held, allocating none.
    pub(crate) fn zero_held(&mut self, offset: u64, len: u64) -> io::Result<()> {
        let end = offset + len;
        let mut at = offset;
        while at < end {
            let n = (CHUNK - at % CHUNK).min(end - at);
            if self.holds(at / CHUNK) {
                self.write(at, &ZEROS[..n as usize])?;
            }
            at += n;
        }
        Ok(())
    }

    /// The chunks held, in address order.
    pub(crate) fn held(&self) -> Vec<u64> {
        let mut seen: HashSet<u64> = self.top.slots.keys().copied().collect();
        let mut layer = self.below.as_deref();
        while let Some(frozen) = layer {
            seen.extend(frozen.layer.slots.keys().copied());
            layer = frozen.below.as_deref();
        }
        let mut held: Vec<u64> = seen.into_iter().filter(|&c| self.holds(c)).collect();
        held.sort_unstable();
        held
    }

    /// A copy sharing every chunk (an image): the top layer is frozen
    /// (unless empty) under a fresh top on each side.
    pub(crate) fn share(&mut self) -> Chunks {
        let dir = self.top.dir.clone();
        if !self.top.slots.is_empty() {
            let depth = self.below.as_ref().map_or(0, |b| b.depth) + 1;
            assert!(depth <= LAYERS_MAX, "CHUNK-2: at most {LAYERS_MAX} layers");
            let frozen = Frozen {
                layer: std::mem::replace(&mut self.top, Layer::new(dir.clone())),
                below: self.below.take(),
                depth,
            };
            self.below = Some(Arc::new(frozen));
        }
        Chunks {
            top: Layer::new(dir),
            below: self.below.clone(),
        }
    }
}

/// Give `len` bytes at `offset` of `file` back to the file system. Only
/// disk space is at stake: a removed chunk is never read from the file.
fn punch_hole(file: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    // SAFETY: fallocate on an open descriptor with plain integer arguments;
    // a failure (a file system without holes) leaves the bytes in place.
    unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            offset as libc::off_t,
            len as libc::off_t,
        );
    }
}
