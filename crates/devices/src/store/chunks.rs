//! Where a store's chunks live: on the heap, or in sparse scratch files.
//!
//! Both keep the same thing, a map from chunk number to [`CHUNK_BYTES`]
//! bytes, where a chunk never written reads as zeros, and both share
//! chunks between a store and the images made of it, copying a chunk only
//! when one side writes it.
//!
//! - **Heap:** each chunk is a reference-counted array; an image clones
//!   the map, and a write to a shared chunk copies it first.
//! - **Scratch file:** a store's own chunks are in one sparse file, each at
//!   its own device offset, so a run of adjacent chunks is one `pread` or
//!   `pwrite`. Imaging freezes that file into a read-only *layer* that the
//!   store and the image then both read through, each writing a new file
//!   of its own on top. A chunk the top file lacks is read from the layers
//!   below, newest first; a chunk forgotten over a layer that holds it is a
//!   *tombstone*, read as zeros. Memory per chunk is one map entry; the
//!   bytes stay in the host's page cache, which bounds itself.
//!
//! Invariants (CHUNK-n):
//! 1. A file holds every chunk its map marks present, whole: a partial
//!    write to a chunk the top file lacks copies the chunk up first.
//! 2. Layers are never written once frozen; a store's layers number at
//!    most [`LAYERS_MAX`].

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use super::CHUNK_BYTES;
use super::scratch::{self, ScratchDir};

/// A chunk of a heap store, copied on write when an image shares it.
type HeapChunk = Arc<[u8; CHUNK_BYTES]>;

/// Most frozen layers under a scratch store (CHUNK-2). A study images a
/// loaded database once and starts its runs from that image (an image of
/// an image adds no layer), so a chain this long is a caller's bug.
pub const LAYERS_MAX: usize = 8;

const CHUNK: u64 = CHUNK_BYTES as u64;
const ZEROS: [u8; CHUNK_BYTES] = [0u8; CHUNK_BYTES];

/// A store's chunks.
pub(crate) enum Chunks {
    Heap(HashMap<u64, HeapChunk>),
    File(FileChunks),
}

impl Default for Chunks {
    fn default() -> Chunks {
        Chunks::Heap(HashMap::new())
    }
}

impl Chunks {
    pub(crate) fn in_scratch(dir: Arc<ScratchDir>) -> Chunks {
        Chunks::File(FileChunks {
            top: Layer::default(),
            below: None,
            dir,
        })
    }

    /// Copy the bytes at `offset` into `buf` (zeros where never written).
    pub(crate) fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        match self {
            Chunks::Heap(map) => {
                heap_read(map, offset, buf);
                Ok(())
            }
            Chunks::File(file) => file.read(offset, buf),
        }
    }

    /// Write `data` at `offset`.
    pub(crate) fn write(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        match self {
            Chunks::Heap(map) => {
                heap_write(map, offset, data);
                Ok(())
            }
            Chunks::File(file) => file.write(offset, data),
        }
    }

    /// True if chunk `chunk` holds written bytes.
    pub(crate) fn holds(&self, chunk: u64) -> bool {
        match self {
            Chunks::Heap(map) => map.contains_key(&chunk),
            Chunks::File(file) => file.holds(chunk),
        }
    }

    /// Drop chunk `chunk`: it reads as zeros from now on.
    pub(crate) fn remove(&mut self, chunk: u64) {
        match self {
            Chunks::Heap(map) => {
                map.remove(&chunk);
            }
            Chunks::File(file) => file.remove(chunk),
        }
    }

    /// Zero `offset..+len` within the chunks held, allocating none.
    pub(crate) fn zero_held(&mut self, offset: u64, len: u64) -> io::Result<()> {
        let end = offset + len;
        let mut at = offset;
        while at < end {
            let chunk = at / CHUNK;
            let n = (CHUNK - at % CHUNK).min(end - at);
            if self.holds(chunk) {
                self.write(at, &ZEROS[..n as usize])?;
            }
            at += n;
        }
        Ok(())
    }

    /// The chunks held, in address order.
    pub(crate) fn held(&self) -> Vec<u64> {
        let mut held: Vec<u64> = match self {
            Chunks::Heap(map) => map.keys().copied().collect(),
            Chunks::File(file) => file.held(),
        };
        held.sort_unstable();
        held
    }

    /// Number of chunks held.
    pub(crate) fn held_count(&self) -> usize {
        match self {
            Chunks::Heap(map) => map.len(),
            Chunks::File(file) => file.held().len(),
        }
    }

    /// A copy sharing every chunk (an image); each side copies a chunk
    /// when it first writes it.
    pub(crate) fn share(&mut self) -> Chunks {
        match self {
            Chunks::Heap(map) => Chunks::Heap(map.clone()),
            Chunks::File(file) => Chunks::File(file.share()),
        }
    }
}

fn heap_read(map: &HashMap<u64, HeapChunk>, offset: u64, buf: &mut [u8]) {
    let mut done = 0usize;
    while done < buf.len() {
        let at = offset + done as u64;
        let (chunk, within) = (at / CHUNK, (at % CHUNK) as usize);
        let n = (CHUNK_BYTES - within).min(buf.len() - done);
        match map.get(&chunk) {
            Some(data) => buf[done..done + n].copy_from_slice(&data[within..within + n]),
            None => buf[done..done + n].fill(0),
        }
        done += n;
    }
}

fn heap_write(map: &mut HashMap<u64, HeapChunk>, offset: u64, data: &[u8]) {
    use std::collections::hash_map::Entry;
    let mut done = 0usize;
    while done < data.len() {
        let at = offset + done as u64;
        let (chunk, within) = (at / CHUNK, (at % CHUNK) as usize);
        let n = (CHUNK_BYTES - within).min(data.len() - done);
        let bytes = &data[done..done + n];
        match map.entry(chunk) {
            Entry::Occupied(mut slot) => {
                Arc::make_mut(slot.get_mut())[within..within + n].copy_from_slice(bytes)
            }
            // A whole new chunk is made from the data, not zeroed first.
            Entry::Vacant(slot) if n == CHUNK_BYTES => {
                let whole: [u8; CHUNK_BYTES] = bytes.try_into().expect("a whole chunk");
                slot.insert(Arc::new(whole));
            }
            Entry::Vacant(slot) => {
                let mut fresh = Arc::new([0u8; CHUNK_BYTES]);
                Arc::make_mut(&mut fresh)[within..within + n].copy_from_slice(bytes);
                slot.insert(fresh);
            }
        }
        done += n;
    }
}

/// One sparse file of chunks and which of them it holds.
#[derive(Default)]
struct Layer {
    /// Created on the first write, so a device never written costs no file.
    file: Option<File>,
    /// `true`: the file holds the chunk; `false`: a tombstone, the chunk
    /// reads as zeros whatever the layers below hold.
    chunks: HashMap<u64, bool>,
    /// Chunks marked `true`, counted in the process's scratch total.
    held: u64,
}

impl Layer {
    /// Mark `chunk` held by the file.
    fn hold(&mut self, chunk: u64) {
        if self.chunks.insert(chunk, true) != Some(true) {
            self.held += 1;
            scratch::add_held(CHUNK);
        }
    }

    /// Unmark `chunk`; true if the file held it.
    fn release(&mut self, chunk: u64) -> bool {
        let held = self.chunks.remove(&chunk) == Some(true);
        if held {
            self.held -= 1;
            scratch::sub_held(CHUNK);
        }
        held
    }
}

impl Drop for Layer {
    fn drop(&mut self) {
        scratch::sub_held(self.held * CHUNK);
    }
}

/// A frozen layer and the ones under it (CHUNK-2).
struct Frozen {
    layer: Layer,
    below: Option<Arc<Frozen>>,
    depth: usize,
}

/// Where a chunk's bytes are.
#[derive(Clone, Copy)]
enum Source<'a> {
    Zeros,
    In(&'a File),
}

impl Source<'_> {
    fn same(self, other: Source<'_>) -> bool {
        match (self, other) {
            (Source::Zeros, Source::Zeros) => true,
            (Source::In(a), Source::In(b)) => std::ptr::eq(a, b),
            _ => false,
        }
    }
}

/// Chunks in a scratch file over frozen layers.
pub(crate) struct FileChunks {
    top: Layer,
    below: Option<Arc<Frozen>>,
    dir: Arc<ScratchDir>,
}

impl FileChunks {
    /// Where `chunk`'s bytes are, top layer first.
    fn source(&self, chunk: u64) -> Source<'_> {
        if let Some(&present) = self.top.chunks.get(&chunk) {
            return Self::present_in(present, &self.top);
        }
        let mut layer = self.below.as_deref();
        while let Some(frozen) = layer {
            if let Some(&present) = frozen.layer.chunks.get(&chunk) {
                return Self::present_in(present, &frozen.layer);
            }
            layer = frozen.below.as_deref();
        }
        Source::Zeros
    }

    fn present_in(present: bool, layer: &Layer) -> Source<'_> {
        match (present, &layer.file) {
            (true, Some(file)) => Source::In(file),
            _ => Source::Zeros,
        }
    }

    fn holds(&self, chunk: u64) -> bool {
        matches!(self.source(chunk), Source::In(_))
    }

    /// Read runs of adjacent chunks that share a source in one call each.
    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let end = offset + buf.len() as u64;
        let mut at = offset;
        while at < end {
            let source = self.source(at / CHUNK);
            let mut run_end = ((at / CHUNK) + 1) * CHUNK;
            while run_end < end && source.same(self.source(run_end / CHUNK)) {
                run_end += CHUNK;
            }
            let run_end = run_end.min(end);
            let part = &mut buf[(at - offset) as usize..(run_end - offset) as usize];
            match source {
                Source::Zeros => part.fill(0),
                Source::In(file) => file.read_exact_at(part, at)?,
            }
            at = run_end;
        }
        Ok(())
    }

    /// Copy up every partly written chunk the top lacks (CHUNK-1), then
    /// write all of `data` to the top file in one call.
    fn write(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let end = offset + data.len() as u64;
        let (first, last) = (offset / CHUNK, (end - 1) / CHUNK);
        for chunk in [first, last] {
            let whole = offset <= chunk * CHUNK && (chunk + 1) * CHUNK <= end;
            if !whole && self.top.chunks.get(&chunk) != Some(&true) {
                self.copy_up(chunk)?;
            }
        }
        self.top_file()?.write_all_at(data, offset)?;
        for chunk in first..=last {
            self.top.hold(chunk);
        }
        Ok(())
    }

    /// Put `chunk`'s current bytes in the top file.
    fn copy_up(&mut self, chunk: u64) -> io::Result<()> {
        let mut bytes = [0u8; CHUNK_BYTES];
        self.read(chunk * CHUNK, &mut bytes)?;
        self.top_file()?.write_all_at(&bytes, chunk * CHUNK)?;
        self.top.hold(chunk);
        Ok(())
    }

    fn top_file(&mut self) -> io::Result<&File> {
        if self.top.file.is_none() {
            self.top.file = Some(self.dir.create_file()?);
        }
        Ok(self.top.file.as_ref().expect("just created"))
    }

    /// Drop a chunk: a tombstone if a layer below holds it. Its space in
    /// the top file is given back where the file system allows.
    fn remove(&mut self, chunk: u64) {
        if self.top.release(chunk)
            && let Some(file) = &self.top.file
        {
            punch_hole(file, chunk * CHUNK, CHUNK);
        }
        if self.holds(chunk) {
            self.top.chunks.insert(chunk, false);
        }
    }

    fn held(&self) -> Vec<u64> {
        let mut seen: HashSet<u64> = self.top.chunks.keys().copied().collect();
        let mut layer = self.below.as_deref();
        while let Some(frozen) = layer {
            seen.extend(frozen.layer.chunks.keys().copied());
            layer = frozen.below.as_deref();
        }
        seen.into_iter().filter(|&c| self.holds(c)).collect()
    }

    /// Freeze the top layer (unless empty) and start a fresh one on each
    /// side of the share.
    fn share(&mut self) -> FileChunks {
        if !self.top.chunks.is_empty() {
            let depth = self.below.as_ref().map_or(0, |b| b.depth) + 1;
            assert!(depth <= LAYERS_MAX, "CHUNK-2: at most {LAYERS_MAX} layers");
            let frozen = Frozen {
                layer: std::mem::take(&mut self.top),
                below: self.below.take(),
                depth,
            };
            self.below = Some(Arc::new(frozen));
        }
        FileChunks {
            top: Layer::default(),
            below: self.below.clone(),
            dir: self.dir.clone(),
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
