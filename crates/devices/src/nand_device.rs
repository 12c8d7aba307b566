//! # Raw NAND as a [`Device`] the engine can use
//!
//! [`crate::nand::RawNand`] is the bare medium for studies that drive it
//! page by page; a storage manager in the engine (In-Page Logging, lee2007)
//! needs it behind the one interface every space uses, in the simulated
//! world (timed, traced, wrapped by the fault model) and in tests (memory).
//! [`NandDevice`] is that: a [`Device`] over any [`StoredDevice`] (a
//! [`SimDevice`] with the [`NandModel`] timing, or a [`MemoryDevice`]),
//! that keeps the rules of NAND instead of hiding them:
//!
//! * a **write is a program**: it may only go to erased bytes (NAND-D1);
//! * a **trim is an erase**: it must cover whole erase units (NAND-D2);
//! * **partial programming**: a write may cover some 512-byte sectors of a
//!   NAND page, but a NAND page takes at most [`NOP_K9WAG08U1A`] programs
//!   between erases (the datasheet's NOP, "number of partial program cycles
//!   in the same page": 4 for the K9WAG08U1A main array) (NAND-D3);
//! * **in order**: a program never goes to a NAND page below the highest
//!   programmed NAND page of its erase unit (NAND-D4; partial programs of
//!   the highest page itself are allowed, as the datasheet allows sectors of
//!   one page in any order);
//! * an **erased byte reads `0xFF`** (NAND-D5).
//!
//! The rules are checked against the data itself, so a crash that drops an
//! unflushed program (the fault model's power cut) also undoes its effect
//! on the rules: the store under the device holds every byte inverted
//! (`!b`), so an erased byte is a zero, which is what a sparse store holds
//! for bytes never written or trimmed, and "erased" means "all zero in the
//! store". A program of `0xFF` bytes therefore leaves them erased, as on a
//! real chip. The NOP count keeps, per NAND page, the sectors each program
//! covered; programs whose sectors all read erased again (a crash dropped
//! them) no longer count.
//!
//! Timing ([`NandModel`], a [`DeviceModel`]): the chip is one timeline. A
//! read costs, per NAND page it touches, the array read (80 us) and the
//! transfer of the bytes over the 8-bit bus; a program costs, per NAND page
//! it touches, the transfer and the program (200 us); an erase 1.5 ms per
//! erase unit; a flush nothing (a program is durable when it completes).
//! The numbers are results.toml `[devices.nand_samsung_k9wag08u1a]` (the
//! lee2007 slides) and the datasheet's 25 ns cycle (40 MB/s).
//!
//! [`NandDevice`] reads the rules' data from a [`StoredDevice`]; raw NAND in
//! a real file is [`NandFile`], whose rules keep what a store would let
//! them read again (NAND-F1..3).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::device::{Device, DeviceRef};
use crate::error::DeviceError;
use crate::model::{DeviceModel, IoKind, IoRequest, ModelStats, Parameter, check_request};
use crate::store::{SparseStore, StoredDevice};

/// The preset name of the lee2007 chip.
pub const K9WAG08U1A: &str = "nand-k9wag08u1a";
/// Program/read unit of the K9WAG08U1A (results.toml `page_kb = 2`).
pub const NAND_PAGE_BYTES_K9WAG08U1A: u64 = 2048;
/// Erase unit of the K9WAG08U1A (results.toml `block_kb = 128`).
pub const ERASE_UNIT_BYTES_K9WAG08U1A: u64 = 128 << 10;
/// Capacity: 16 Gbit.
pub const CAPACITY_BYTES_K9WAG08U1A: u64 = 2 << 30;
/// Partial programs of one NAND page between erases (datasheet NOP).
pub const NOP_K9WAG08U1A: u32 = 4;
/// Array read time (results.toml `read_us = 80`).
pub const READ_NS_K9WAG08U1A: u64 = 80_000;
/// Program time (results.toml `write_us = 200`).
pub const PROGRAM_NS_K9WAG08U1A: u64 = 200_000;
/// Erase time (results.toml `erase_us = 1500`).
pub const ERASE_NS_K9WAG08U1A: u64 = 1_500_000;
/// Bus rate: one byte per 25 ns cycle (datasheet).
pub const BUS_BYTES_PER_S_K9WAG08U1A: u64 = 40_000_000;
/// The unit of partial programming and of requests.
pub const NAND_SECTOR_BYTES: u32 = 512;

/// The shape and timing of a raw NAND chip.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NandSpec {
    pub name: String,
    pub capacity_bytes: u64,
    pub nand_page_bytes: u64,
    pub erase_unit_bytes: u64,
    /// Partial programs per NAND page between erases (NOP).
    pub nop: u32,
    pub read_ns: u64,
    pub program_ns: u64,
    pub erase_ns: u64,
    pub bus_bytes_per_s: u64,
}

impl NandSpec {
    /// The Samsung K9WAG08U1A of lee2007.
    pub fn k9wag08u1a() -> NandSpec {
        NandSpec {
            name: K9WAG08U1A.to_string(),
            capacity_bytes: CAPACITY_BYTES_K9WAG08U1A,
            nand_page_bytes: NAND_PAGE_BYTES_K9WAG08U1A,
            erase_unit_bytes: ERASE_UNIT_BYTES_K9WAG08U1A,
            nop: NOP_K9WAG08U1A,
            read_ns: READ_NS_K9WAG08U1A,
            program_ns: PROGRAM_NS_K9WAG08U1A,
            erase_ns: ERASE_NS_K9WAG08U1A,
            bus_bytes_per_s: BUS_BYTES_PER_S_K9WAG08U1A,
        }
    }

    /// The same chip with another capacity (whole erase units).
    pub fn with_capacity_bytes(mut self, capacity_bytes: u64) -> NandSpec {
        self.capacity_bytes = capacity_bytes - capacity_bytes % self.erase_unit_bytes;
        self
    }

    fn validate(&self) -> Result<(), DeviceError> {
        let bad = |problem: &str| {
            Err(DeviceError::Geometry {
                device: self.name.clone(),
                problem: problem.to_string(),
            })
        };
        let sector = u64::from(NAND_SECTOR_BYTES);
        if self.nand_page_bytes == 0 || !self.nand_page_bytes.is_multiple_of(sector) {
            return bad("the NAND page must be a multiple of 512 bytes");
        }
        if self.erase_unit_bytes == 0 || !self.erase_unit_bytes.is_multiple_of(self.nand_page_bytes)
        {
            return bad("the erase unit must be a multiple of the NAND page");
        }
        if self.capacity_bytes == 0 || !self.capacity_bytes.is_multiple_of(self.erase_unit_bytes) {
            return bad("the capacity must be a whole number of erase units");
        }
        if self.nop == 0 || self.bus_bytes_per_s == 0 {
            return bad("NOP and the bus rate must be above zero");
        }
        Ok(())
    }

    fn transfer_ns(&self, bytes: u64) -> u64 {
        (u128::from(bytes) * 1_000_000_000 / u128::from(self.bus_bytes_per_s)) as u64
    }

    /// NAND pages touched by `offset..offset+len`, with the bytes in each.
    fn pages_touched(&self, offset_bytes: u64, len_bytes: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut at = offset_bytes;
        let end = offset_bytes + len_bytes;
        while at < end {
            let page = at / self.nand_page_bytes;
            let page_end = (page + 1) * self.nand_page_bytes;
            let n = page_end.min(end) - at;
            out.push((page, n));
            at += n;
        }
        out
    }
}

/// Timing of a raw NAND chip. See the module documentation.
pub struct NandModel {
    spec: NandSpec,
    busy_until_ns: u64,
    stats: ModelStats,
}

impl NandModel {
    pub fn new(spec: NandSpec) -> Result<NandModel, DeviceError> {
        spec.validate()?;
        Ok(NandModel {
            spec,
            busy_until_ns: 0,
            stats: ModelStats::default(),
        })
    }
}

impl DeviceModel for NandModel {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn capacity_bytes(&self) -> u64 {
        self.spec.capacity_bytes
    }

    fn sector_bytes(&self) -> u32 {
        NAND_SECTOR_BYTES
    }

    fn submit(&mut self, now_ns: u64, req: &IoRequest) -> u64 {
        let start = now_ns.max(self.busy_until_ns);
        let spec = &self.spec;
        let cost_ns = match req.kind {
            IoKind::Read => {
                self.stats.reads += 1;
                self.stats.bytes_read += req.len_bytes;
                let pages = spec.pages_touched(req.offset_bytes, req.len_bytes);
                self.stats.flash_pages_read += pages.len() as u64;
                pages
                    .iter()
                    .map(|&(_, n)| spec.read_ns + spec.transfer_ns(n))
                    .sum()
            }
            IoKind::Write => {
                self.stats.writes += 1;
                self.stats.bytes_written += req.len_bytes;
                let pages = spec.pages_touched(req.offset_bytes, req.len_bytes);
                self.stats.flash_pages_written += pages.len() as u64;
                self.stats.host_pages_written += pages.len() as u64;
                self.stats.partial_page_writes += pages
                    .iter()
                    .filter(|&&(_, n)| n < spec.nand_page_bytes)
                    .count() as u64;
                pages
                    .iter()
                    .map(|&(_, n)| spec.transfer_ns(n) + spec.program_ns)
                    .sum()
            }
            IoKind::Trim => {
                self.stats.trims += 1;
                let units = req.len_bytes / spec.erase_unit_bytes;
                self.stats.erases += units;
                units * spec.erase_ns
            }
            IoKind::Flush => {
                self.stats.flushes += 1;
                0
            }
        };
        self.busy_until_ns = start + cost_ns;
        self.busy_until_ns
    }

    fn stats(&self) -> ModelStats {
        self.stats.clone()
    }

    fn describe(&self) -> Vec<Parameter> {
        let s = &self.spec;
        let src = "results.toml [devices.nand_samsung_k9wag08u1a] (lee2007 slides)";
        vec![
            Parameter::new(
                "kind",
                "raw NAND (no FTL): program-once, erase units",
                "lee2007",
            ),
            Parameter::new(
                "capacity",
                format!("{} bytes", s.capacity_bytes),
                "16 Gbit SLC (lee2007 slides)",
            ),
            Parameter::new("NAND page", format!("{} bytes", s.nand_page_bytes), src),
            Parameter::new("erase unit", format!("{} bytes", s.erase_unit_bytes), src),
            Parameter::new("read", format!("{} us", s.read_ns / 1000), src),
            Parameter::new("program", format!("{} us", s.program_ns / 1000), src),
            Parameter::new("erase", format!("{} us", s.erase_ns / 1000), src),
            Parameter::new(
                "NOP",
                s.nop,
                "K9WAG08U1A datasheet: partial programs per page",
            ),
            Parameter::new(
                "bus",
                format!("{} B/s", s.bus_bytes_per_s),
                "K9WAG08U1A datasheet: 25 ns cycle",
            ),
        ]
    }
}

/// Sectors programmed by each program of one NAND page (bit i = sector i).
type ProgramMasks = Vec<u64>;

/// The rules of NAND-D1..4, shared by the chip over a store
/// ([`NandDevice`]) and the chip in a file ([`NandFile`]). They read the
/// medium's bytes as stored, inverted: a zero is an erased byte.
struct Rules {
    spec: NandSpec,
    /// Programs per NAND page since its last erase (NAND-D3).
    programs: Mutex<HashMap<u64, ProgramMasks>>,
    /// The file form only: the highest programmed NAND page of each erase
    /// unit touched so far (`None`: the unit is erased), learned from the
    /// file at the unit's first program and kept since (NAND-F1).
    highest: Option<Mutex<HashMap<u64, Option<u64>>>>,
}

/// How the rules read the medium: `read(offset, buf)` fills `buf` with the
/// stored (inverted) bytes.
type RawRead<'a> = &'a dyn Fn(u64, &mut [u8]) -> Result<(), DeviceError>;

impl Rules {
    fn new(spec: NandSpec, file: bool) -> Result<Rules, DeviceError> {
        spec.validate()?;
        assert!(
            spec.nand_page_bytes / u64::from(NAND_SECTOR_BYTES) <= 64,
            "a NAND page of at most 64 sectors"
        );
        Ok(Rules {
            spec,
            programs: Mutex::new(HashMap::new()),
            highest: file.then(|| Mutex::new(HashMap::new())),
        })
    }

    fn sectors_per_page(&self) -> u64 {
        self.spec.nand_page_bytes / u64::from(NAND_SECTOR_BYTES)
    }

    fn pages_per_unit(&self) -> u64 {
        self.spec.erase_unit_bytes / self.spec.nand_page_bytes
    }

    /// Whether the medium holds only erased bytes in `offset..offset+len`.
    fn erased_in(read: RawRead, offset_bytes: u64, len_bytes: u64) -> Result<bool, DeviceError> {
        let mut buf = vec![0u8; len_bytes as usize];
        read(offset_bytes, &mut buf)?;
        Ok(buf.iter().all(|&b| b == 0))
    }

    /// NAND-D4: whether anything is programmed in `page`'s erase unit above
    /// `page`.
    fn programmed_above(&self, read: RawRead, page: u64) -> Result<bool, DeviceError> {
        let unit = page / self.pages_per_unit();
        let Some(highest) = &self.highest else {
            // Over a store: read the rest of the unit, so that a program a
            // power cut dropped no longer counts.
            let unit_end_bytes = (unit + 1) * self.spec.erase_unit_bytes;
            let above_bytes = (page + 1) * self.spec.nand_page_bytes;
            return Ok(above_bytes < unit_end_bytes
                && !Self::erased_in(read, above_bytes, unit_end_bytes - above_bytes)?);
        };
        let known = highest.lock().expect("highest").get(&unit).copied();
        let top = match known {
            Some(top) => top,
            None => {
                let top = self.highest_programmed(read, unit)?;
                highest.lock().expect("highest").insert(unit, top);
                top
            }
        };
        Ok(top.is_some_and(|top| top > page))
    }

    /// The highest programmed NAND page of `unit`, read from the medium.
    fn highest_programmed(&self, read: RawRead, unit: u64) -> Result<Option<u64>, DeviceError> {
        let mut bytes = vec![0u8; self.spec.erase_unit_bytes as usize];
        read(unit * self.spec.erase_unit_bytes, &mut bytes)?;
        let page_bytes = self.spec.nand_page_bytes as usize;
        Ok(bytes
            .chunks(page_bytes)
            .rposition(|page| page.iter().any(|&b| b != 0))
            .map(|i| unit * self.pages_per_unit() + i as u64))
    }

    /// The file form: the programs a NAND page first seen since the open
    /// has taken, as the fewest the data allows (one per run of programmed
    /// sectors; NAND-F2).
    fn programs_in_data(&self, read: RawRead, page: u64) -> Result<ProgramMasks, DeviceError> {
        let mut bytes = vec![0u8; self.spec.nand_page_bytes as usize];
        read(page * self.spec.nand_page_bytes, &mut bytes)?;
        let mut masks = Vec::new();
        let mut run = 0u64;
        for (s, sector) in bytes.chunks(NAND_SECTOR_BYTES as usize).enumerate() {
            if sector.iter().any(|&b| b != 0) {
                run |= 1 << s;
            } else if run != 0 {
                masks.push(std::mem::take(&mut run));
            }
        }
        if run != 0 {
            masks.push(run);
        }
        Ok(masks)
    }

    /// Check a program of `len` bytes at `offset` against NAND-D1, D3, D4
    /// and note it.
    fn admit_program(
        &self,
        read: RawRead,
        offset_bytes: u64,
        len_bytes: u64,
    ) -> Result<(), DeviceError> {
        let spec = &self.spec;
        let sector = u64::from(NAND_SECTOR_BYTES);
        if !Self::erased_in(read, offset_bytes, len_bytes)? {
            let page = offset_bytes / spec.nand_page_bytes;
            return Err(DeviceError::ProgramProgrammed {
                device: spec.name.clone(),
                block: offset_bytes / spec.erase_unit_bytes,
                page: page % self.pages_per_unit(),
            });
        }
        let pages_per_unit = self.pages_per_unit();
        let touched = spec.pages_touched(offset_bytes, len_bytes);
        for &(page, _) in &touched {
            if self.programmed_above(read, page)? {
                return Err(DeviceError::ProgramOutOfOrder {
                    device: spec.name.clone(),
                    block: page / pages_per_unit,
                    page: page % pages_per_unit,
                    next: pages_per_unit,
                });
            }
        }
        let mut programs = self.programs.lock().expect("programs");
        let mut noted = Vec::with_capacity(touched.len());
        for (page, n) in touched {
            let unit = page / pages_per_unit;
            let page_start = page * spec.nand_page_bytes;
            let mut masks = match programs.remove(&page) {
                Some(masks) => masks,
                None if self.highest.is_some() => self.programs_in_data(read, page)?,
                None => ProgramMasks::new(),
            };
            // NAND-D3: count the programs of this page whose sectors still
            // hold data.
            let mut still = Vec::with_capacity(masks.len());
            for mask in masks.drain(..) {
                let mut holds = false;
                for s in 0..self.sectors_per_page() {
                    if mask & (1 << s) != 0
                        && !Self::erased_in(read, page_start + s * sector, sector)?
                    {
                        holds = true;
                        break;
                    }
                }
                if holds {
                    still.push(mask);
                }
            }
            if still.len() as u32 >= spec.nop {
                let taken = still.len();
                programs.insert(page, still);
                for (page, masks) in noted {
                    programs.insert(page, masks);
                }
                return Err(DeviceError::Refused {
                    device: spec.name.clone(),
                    problem: format!(
                        "NAND page {} of erase unit {unit} would take partial program {} (NOP limit {})",
                        page % pages_per_unit,
                        taken + 1,
                        spec.nop
                    ),
                });
            }
            let first = offset_bytes.max(page_start);
            let first_sector = (first - page_start) / sector;
            let mut mask = 0u64;
            for s in first_sector..first_sector + n / sector {
                mask |= 1 << s;
            }
            still.push(mask);
            noted.push((page, still));
        }
        for (page, masks) in noted {
            programs.insert(page, masks);
        }
        Ok(())
    }

    /// A program of `offset..+len` completed: the file form's highest
    /// programmed page of each unit follows it.
    fn programmed(&self, offset_bytes: u64, len_bytes: u64) {
        let Some(highest) = &self.highest else {
            return;
        };
        let mut highest = highest.lock().expect("highest");
        for (page, _) in self.spec.pages_touched(offset_bytes, len_bytes) {
            let top = highest.entry(page / self.pages_per_unit()).or_insert(None);
            *top = Some(top.map_or(page, |t| t.max(page)));
        }
    }

    /// NAND-D2: an erase of whole units of `inner` (a trim); the rules
    /// forget what they noted there.
    fn erase(
        &self,
        inner: &dyn Device,
        offset_bytes: u64,
        len_bytes: u64,
    ) -> Result<(), DeviceError> {
        let unit = self.spec.erase_unit_bytes;
        if !offset_bytes.is_multiple_of(unit) || !len_bytes.is_multiple_of(unit) {
            return Err(DeviceError::Unaligned {
                device: self.spec.name.clone(),
                offset_bytes,
                len_bytes,
                sector_bytes: unit as u32,
            });
        }
        inner.trim(offset_bytes, len_bytes)?;
        self.erased(offset_bytes, len_bytes);
        Ok(())
    }

    fn erased(&self, offset_bytes: u64, len_bytes: u64) {
        let first = offset_bytes / self.spec.nand_page_bytes;
        let last = (offset_bytes + len_bytes) / self.spec.nand_page_bytes;
        let mut programs = self.programs.lock().expect("programs");
        programs.retain(|&page, _| page < first || page >= last);
        if let Some(highest) = &self.highest {
            let mut highest = highest.lock().expect("highest");
            let unit = self.spec.erase_unit_bytes;
            for u in offset_bytes / unit..(offset_bytes + len_bytes) / unit {
                highest.insert(u, None);
            }
        }
    }

    fn check_program(&self, offset_bytes: u64, len_bytes: u64) -> Result<(), DeviceError> {
        let req = IoRequest {
            kind: IoKind::Write,
            offset_bytes,
            len_bytes,
        };
        check_request(
            &self.spec.name,
            self.spec.capacity_bytes,
            NAND_SECTOR_BYTES,
            &req,
        )
    }
}

/// What a chip's rules sit on: a store (the simulated chip and the chip in
/// memory) or a file (the real world's chip).
pub trait NandMedium: Send + Sync {
    /// The device under the chip.
    fn device(&self) -> &dyn Device;
    /// The medium's bytes as stored (inverted): what the rules read.
    fn raw(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<(), DeviceError>;
    /// The chip's name: its spec's, or the medium's.
    fn chip_name<'a>(&'a self, spec: &'a NandSpec) -> &'a str;
}

/// A store's bytes are read untimed, straight from the store.
impl NandMedium for Arc<dyn StoredDevice> {
    fn device(&self) -> &dyn Device {
        &**self
    }

    fn raw(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        let read = self.store().lock().expect("store").read(offset_bytes, buf);
        read.map_err(|e| e.on_device(self.name()))
    }

    fn chip_name<'a>(&'a self, spec: &'a NandSpec) -> &'a str {
        &spec.name
    }
}

/// A file's bytes are read from the file (NAND-F1: once per erase unit).
impl NandMedium for DeviceRef {
    fn device(&self) -> &dyn Device {
        &**self
    }

    fn raw(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.read(offset_bytes, buf)
    }

    fn chip_name<'a>(&'a self, _spec: &'a NandSpec) -> &'a str {
        self.name()
    }
}

/// Raw NAND behind the [`Device`] interface: the rules of NAND-D1..5 over a
/// medium that holds every byte inverted. See the module documentation.
pub struct NandChip<M> {
    rules: Rules,
    inner: M,
}

/// Raw NAND over a store (a simulated chip, or one in memory).
pub type NandDevice = NandChip<Arc<dyn StoredDevice>>;

/// Raw NAND in a file, for the real world (NAND-F1..3): the same rules
/// as [`NandDevice`], over a device that is not a store (a
/// [`crate::file::FileDevice`]). The file holds every byte inverted, as the
/// store does, so a sparse file's holes are erased flash and an erase
/// punches a hole (`FileDevice::trim`). A program is durable at the next
/// flush (fdatasync), as any write to the file.
///
/// What the rules cannot read from a store they read from the file, once:
/// * NAND-F1: the highest programmed NAND page of an erase unit is read at
///   the unit's first program since the open (one erase unit read), and
///   kept since; the rules never read the rest of a unit again;
/// * NAND-F2: a NAND page first programmed since the open is counted as
///   having taken one program per run of programmed sectors, the fewest
///   its data allows (the chip keeps no count either);
/// * NAND-F3: the rules see only this process's programs: one writer per
///   file, which the database directory's lock ensures.
pub type NandFile = NandChip<DeviceRef>;

impl NandDevice {
    /// A NAND device over `inner`, whose capacity must be the spec's.
    pub fn new(spec: NandSpec, inner: Arc<dyn StoredDevice>) -> Result<NandDevice, DeviceError> {
        check_capacity(&spec, inner.capacity_bytes(), "the store under it")?;
        Ok(NandChip {
            rules: Rules::new(spec, false)?,
            inner,
        })
    }

    /// A simulated chip: the [`NandModel`]'s timing over a sparse store.
    pub fn simulated(spec: NandSpec) -> Result<NandDevice, DeviceError> {
        let model = NandModel::new(spec.clone())?;
        let inner = Arc::new(crate::sim::SimDevice::new(Box::new(model)));
        NandDevice::new(spec, inner)
    }

    /// A chip in memory, without latency (tests, the real world's memory).
    pub fn in_memory(spec: NandSpec) -> Result<NandDevice, DeviceError> {
        let inner = Arc::new(crate::memory::MemoryDevice::new(
            &spec.name,
            spec.capacity_bytes,
        ));
        NandDevice::new(spec, inner)
    }
}

impl NandFile {
    /// Raw NAND of shape `spec` in `inner` (a file of at least the spec's
    /// capacity, holding inverted bytes: a new sparse file is an erased chip).
    pub fn new(spec: NandSpec, inner: DeviceRef) -> Result<NandFile, DeviceError> {
        check_capacity(&spec, inner.capacity_bytes(), "the file under it")?;
        Ok(NandChip {
            rules: Rules::new(spec, true)?,
            inner,
        })
    }
}

impl<M> NandChip<M> {
    /// The chip's shape and timing.
    pub fn spec(&self) -> &NandSpec {
        &self.rules.spec
    }
}

/// The chip's capacity must fit in what is under it.
fn check_capacity(spec: &NandSpec, under_bytes: u64, what: &str) -> Result<(), DeviceError> {
    if under_bytes < spec.capacity_bytes {
        return Err(DeviceError::Geometry {
            device: spec.name.clone(),
            problem: format!(
                "{what} holds {under_bytes} bytes, fewer than {}",
                spec.capacity_bytes
            ),
        });
    }
    Ok(())
}

/// NAND-D5: read `inner`'s stored bytes inverted, so that its zeros (a
/// store's never-written bytes, a file's holes) read `0xFF`.
fn read_inverted(inner: &dyn Device, offset_bytes: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
    inner.read(offset_bytes, buf)?;
    for b in buf.iter_mut() {
        *b = !*b;
    }
    Ok(())
}

fn inverted(data: &[u8]) -> Vec<u8> {
    data.iter().map(|&b| !b).collect()
}

impl StoredDevice for NandDevice {
    fn store(&self) -> &Mutex<SparseStore> {
        self.inner.store()
    }
}

impl<M: NandMedium> Device for NandChip<M> {
    fn name(&self) -> &str {
        self.inner.chip_name(&self.rules.spec)
    }

    fn capacity_bytes(&self) -> u64 {
        self.rules.spec.capacity_bytes
    }

    fn sector_bytes(&self) -> u32 {
        NAND_SECTOR_BYTES
    }

    fn read(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        read_inverted(self.inner.device(), offset_bytes, buf)
    }

    fn write(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        let len_bytes = data.len() as u64;
        self.rules.check_program(offset_bytes, len_bytes)?;
        let raw = |at: u64, buf: &mut [u8]| self.inner.raw(at, buf);
        self.rules.admit_program(&raw, offset_bytes, len_bytes)?;
        self.inner.device().write(offset_bytes, &inverted(data))?;
        self.rules.programmed(offset_bytes, len_bytes);
        Ok(())
    }

    fn flush(&self) -> Result<(), DeviceError> {
        self.inner.device().flush()
    }

    /// An erase of whole erase units (NAND-D2); in a file, a punched hole.
    fn trim(&self, offset_bytes: u64, len_bytes: u64) -> Result<(), DeviceError> {
        self.rules
            .erase(self.inner.device(), offset_bytes, len_bytes)
    }

    fn model_stats(&self) -> Option<ModelStats> {
        self.inner.device().model_stats()
    }
}

/// SSDs of the same flash as [`K9WAG08U1A`] behind an FTL, for comparing
/// In-Page Logging with in-place writes through a page-mapping and a
/// block-mapping FTL (lee2007's "without IPL"): one chip of the same
/// geometry and timing, a controller that adds nothing, no write buffer.
pub const FTL_PRESETS_K9WAG08U1A: [&str; 2] = ["ssd-k9wag08u1a-page", "ssd-k9wag08u1a-block"];
/// Spare area of those SSDs (an assumption; lee2007 gives none).
pub const FTL_OVER_PROVISIONING: f64 = 0.07;

/// The SSD preset `name` of [`FTL_PRESETS_K9WAG08U1A`], if it is one.
pub fn build_ftl_ssd(name: &str) -> Option<Result<crate::ssd::SsdModel, DeviceError>> {
    use crate::ssd::ftl::FtlKind;
    let ftl = match name {
        "ssd-k9wag08u1a-page" => FtlKind::PageGreedy,
        "ssd-k9wag08u1a-block" => FtlKind::Block,
        _ => return None,
    };
    let spec = NandSpec::k9wag08u1a();
    let geometry = crate::ssd::Geometry {
        channels: 1,
        chips_per_channel: 1,
        dies_per_chip: 1,
        planes_per_die: 1,
        blocks_per_plane: (spec.capacity_bytes / spec.erase_unit_bytes) as u32,
        pages_per_block: (spec.erase_unit_bytes / spec.nand_page_bytes) as u32,
        page_bytes: spec.nand_page_bytes as u32,
        over_provisioning: FTL_OVER_PROVISIONING,
    };
    let timing = crate::ssd::Timing {
        page_read_ns: spec.read_ns,
        page_program_ns: spec.program_ns,
        block_erase_ns: spec.erase_ns,
        channel_bytes_per_s: spec.bus_bytes_per_s,
        host_bytes_per_s: spec.bus_bytes_per_s,
        controller_overhead_ns: 0,
    };
    let src = "results.toml [devices.nand_samsung_k9wag08u1a] (lee2007 slides), one chip";
    Some(
        crate::ssd::SsdModel::new(name, geometry, timing, ftl, 0).map(|m| {
            m.with_sources(&[
                ("capacity_bytes", "16 Gbit chip less the spare area"),
                ("page_bytes", src),
                ("pages_per_block", src),
                ("page_read_ns", src),
                ("page_program_ns", src),
                ("block_erase_ns", src),
                ("channel_bytes_per_s", "K9WAG08U1A datasheet: 25 ns cycle"),
                ("host_bytes_per_s", "the bus rate: the host adds nothing"),
                ("over_provisioning", "7%: an assumption, lee2007 gives none"),
                (
                    "ftl",
                    "page mapping (greedy GC) or block mapping, for lee2007's in-place case",
                ),
            ])
        }),
    )
}

#[cfg(test)]
mod tests {
    use flashlab_runtime::{Sim, SimConfig};

    use super::*;

    fn small() -> NandSpec {
        NandSpec::k9wag08u1a().with_capacity_bytes(4 * ERASE_UNIT_BYTES_K9WAG08U1A)
    }

    #[test]
    fn erased_reads_ff_and_programs_read_back() {
        let d = NandDevice::in_memory(small()).unwrap();
        let mut buf = vec![0u8; 1024];
        d.read(0, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0xFF));
        d.write(512, &[7u8; 512]).unwrap();
        d.read(0, &mut buf).unwrap();
        assert!(buf[..512].iter().all(|&b| b == 0xFF));
        assert!(buf[512..].iter().all(|&b| b == 7));
    }

    #[test]
    fn programming_programmed_bytes_is_refused() {
        let d = NandDevice::in_memory(small()).unwrap();
        d.write(0, &[1u8; 512]).unwrap();
        let err = d.write(0, &[2u8; 512]).unwrap_err();
        assert!(
            matches!(err, DeviceError::ProgramProgrammed { .. }),
            "{err}"
        );
    }

    #[test]
    fn a_fifth_partial_program_of_a_page_is_refused() {
        let d = NandDevice::in_memory(small()).unwrap();
        // A 2 KB page of 4 sectors takes 4 partial programs...
        for s in 0..4u64 {
            d.write(s * 512, &[s as u8; 512]).unwrap();
        }
        // ...and in the next page, after 4 programs of one sector each, a
        // fifth program (bytes still erased) is refused.
        let page = NAND_PAGE_BYTES_K9WAG08U1A;
        let d2 = NandDevice::in_memory(NandSpec { nop: 2, ..small() }).unwrap();
        d2.write(page, &[1u8; 512]).unwrap();
        d2.write(page + 512, &[1u8; 512]).unwrap();
        let err = d2.write(page + 1024, &[1u8; 512]).unwrap_err();
        assert!(err.to_string().contains("NOP limit 2"), "{err}");
    }

    #[test]
    fn programs_go_in_order_within_an_erase_unit() {
        let d = NandDevice::in_memory(small()).unwrap();
        d.write(4 * 2048, &[1u8; 2048]).unwrap();
        let err = d.write(2048, &[1u8; 2048]).unwrap_err();
        assert!(
            matches!(err, DeviceError::ProgramOutOfOrder { .. }),
            "{err}"
        );
        // Another erase unit is free to start anywhere.
        d.write(ERASE_UNIT_BYTES_K9WAG08U1A + 2048, &[1u8; 2048])
            .unwrap();
    }

    #[test]
    fn an_erase_covers_whole_units_and_resets_the_rules() {
        let d = NandDevice::in_memory(small()).unwrap();
        d.write(0, &[1u8; 2048]).unwrap();
        assert!(d.trim(0, 4096).is_err(), "a partial erase unit");
        d.trim(0, ERASE_UNIT_BYTES_K9WAG08U1A).unwrap();
        d.write(0, &[2u8; 2048]).unwrap();
        let mut buf = vec![0u8; 2048];
        d.read(0, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 2));
    }

    #[test]
    fn a_dropped_program_leaves_the_sector_programmable() {
        let inner = Arc::new(crate::memory::MemoryDevice::new(
            "m",
            4 * ERASE_UNIT_BYTES_K9WAG08U1A,
        ));
        let d = NandDevice::new(small(), inner.clone()).unwrap();
        d.write(0, &[1u8; 512]).unwrap();
        inner.crash();
        d.write(0, &[3u8; 512]).unwrap();
        let mut buf = vec![0u8; 512];
        d.read(0, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 3));
    }

    /// A chip in a file of `small()`'s size, opened afresh each call.
    fn in_file(path: &std::path::Path) -> NandFile {
        use crate::file::{FileDevice, FileOptions};
        let file = match path.exists() {
            true => FileDevice::open(path, FileOptions::default()),
            false => FileDevice::create(path, small().capacity_bytes, FileOptions::default()),
        }
        .unwrap();
        NandFile::new(small(), Arc::new(file)).unwrap()
    }

    #[test]
    fn a_chip_in_a_file_keeps_the_rules_across_an_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nand");
        {
            let d = in_file(&path);
            let mut buf = vec![0u8; 1024];
            d.read(0, &mut buf).unwrap();
            assert!(buf.iter().all(|&b| b == 0xFF), "a new file is erased");
            d.write(4 * 2048, &[5u8; 1024]).unwrap();
            d.write(4 * 2048 + 1536, &[6u8; 512]).unwrap();
            d.flush().unwrap();
        }
        let d = in_file(&path);
        let mut buf = vec![0u8; 2048];
        d.read(4 * 2048, &mut buf).unwrap();
        assert!(buf[..1024].iter().all(|&b| b == 5));
        assert!(buf[1024..1536].iter().all(|&b| b == 0xFF));
        assert!(buf[1536..].iter().all(|&b| b == 6));
        // NAND-D1 from the data.
        let err = d.write(4 * 2048, &[1u8; 512]).unwrap_err();
        assert!(
            matches!(err, DeviceError::ProgramProgrammed { .. }),
            "{err}"
        );
        // NAND-F1: the unit's highest programmed page is read from the file.
        let err = d.write(2048, &[1u8; 512]).unwrap_err();
        assert!(
            matches!(err, DeviceError::ProgramOutOfOrder { .. }),
            "{err}"
        );
        // NAND-F2: the page's two runs of sectors count as two programs, so
        // a third fits under NOP 4; a fresh page takes NOP programs, no more.
        d.write(4 * 2048 + 1024, &[7u8; 512]).unwrap();
        let d2 = NandFile::new(NandSpec { nop: 3, ..small() }, d.inner.clone()).unwrap();
        d2.write(5 * 2048, &[1u8; 512]).unwrap();
        d2.write(5 * 2048 + 512, &[1u8; 512]).unwrap();
        d2.write(5 * 2048 + 1024, &[1u8; 512]).unwrap();
        let err = d2.write(5 * 2048 + 1536, &[1u8; 512]).unwrap_err();
        assert!(err.to_string().contains("NOP limit 3"), "{err}");
    }

    #[test]
    fn an_erase_of_a_chip_in_a_file_punches_the_unit_and_resets_the_rules() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nand");
        let d = in_file(&path);
        d.write(6 * 2048, &[1u8; 2048]).unwrap();
        assert!(d.trim(0, 4096).is_err(), "a partial erase unit");
        d.trim(0, ERASE_UNIT_BYTES_K9WAG08U1A).unwrap();
        d.write(0, &[2u8; 2048]).unwrap();
        drop(d);
        let d = in_file(&path);
        let mut buf = vec![0u8; 2048];
        d.read(6 * 2048, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0xFF), "erased by the punched hole");
        d.read(0, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 2));
    }

    #[test]
    fn timing_is_the_datasheet_sum() {
        let (read, program, erase) = Sim::run(SimConfig::default(), |rt| {
            let d = NandDevice::simulated(small()).unwrap();
            let t0 = rt.now_ns();
            d.write(0, &[1u8; 512]).unwrap();
            let t1 = rt.now_ns();
            d.read(0, &mut [0u8; 2048]).unwrap();
            let t2 = rt.now_ns();
            d.trim(0, ERASE_UNIT_BYTES_K9WAG08U1A).unwrap();
            let t3 = rt.now_ns();
            (t2 - t1, t1 - t0, t3 - t2)
        })
        .unwrap()
        .0
        .finished()
        .unwrap();
        assert_eq!(program, 200_000 + 12_800, "512 B over the bus + program");
        assert_eq!(read, 80_000 + 51_200, "array read + 2 KB over the bus");
        assert_eq!(erase, 1_500_000);
    }
}
