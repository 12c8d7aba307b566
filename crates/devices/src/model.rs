//! The timing-model interface shared by every modelled device.
//!
//! A [`DeviceModel`] answers one question: a request of this kind, at this
//! offset and length, arriving at this virtual time: when does it complete?
//! It keeps whatever state decides that (the disk head's cylinder and the
//! platter's angle, the SSD's die and channel timelines, its mapping tables)
//! and counts what it did ([`ModelStats`]). It stores no data.
//!
//! Invariants (referred to as `MODEL-n` in assertions and tests):
//! 1. `submit` is called with non-decreasing arrival times.
//! 2. The returned completion time is never earlier than the arrival time.
//! 3. Requests are already checked against capacity and sector alignment by
//!    [`check_request`]; a model may assume it.

use serde::Serialize;

use crate::error::DeviceError;

/// The kind of an I/O request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum IoKind {
    Read,
    Write,
    Flush,
    Trim,
}

impl IoKind {
    /// The short lower-case name used in traces.
    pub fn as_str(self) -> &'static str {
        match self {
            IoKind::Read => "read",
            IoKind::Write => "write",
            IoKind::Flush => "flush",
            IoKind::Trim => "trim",
        }
    }

    /// Parse the trace name back.
    pub fn parse(s: &str) -> Option<IoKind> {
        match s.trim().to_ascii_lowercase().as_str() {
            "read" | "r" => Some(IoKind::Read),
            "write" | "w" => Some(IoKind::Write),
            "flush" | "f" => Some(IoKind::Flush),
            "trim" | "t" | "discard" | "d" => Some(IoKind::Trim),
            _ => None,
        }
    }
}

/// One request to a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoRequest {
    pub kind: IoKind,
    pub offset_bytes: u64,
    pub len_bytes: u64,
}

/// What a model counts over a run. Fields that do not apply to a device
/// (erases on a disk) stay zero; `waf` is `None` where it has no meaning.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ModelStats {
    pub reads: u64,
    pub writes: u64,
    pub flushes: u64,
    pub trims: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Flash pages programmed for the host's data.
    pub host_pages_written: u64,
    /// Flash pages programmed in all (host data, GC copies, merge copies).
    pub flash_pages_written: u64,
    /// Flash pages read in all, including GC and merge reads.
    pub flash_pages_read: u64,
    /// Write amplification: flash pages programmed per host page.
    pub waf: Option<f64>,
    pub gc_runs: u64,
    pub switch_merges: u64,
    pub partial_merges: u64,
    pub full_merges: u64,
    pub erases: u64,
    /// Host writes smaller than a flash page that forced a read-modify-write.
    pub partial_page_writes: u64,
    /// Erase count of the least and most worn block, and the mean.
    pub wear_min: u64,
    pub wear_max: u64,
    pub wear_mean: f64,
    /// Disk: total seek time and rotational wait, for explaining latencies.
    pub seek_ns_total: u64,
    pub rotation_ns_total: u64,
    /// Disk: reads answered from the drive's read cache (held in a segment
    /// or brought in by its read-ahead).
    pub read_cache_hits: u64,
}

/// A timing model of one device. See the module documentation.
pub trait DeviceModel: Send {
    /// The preset or user-given name.
    fn name(&self) -> &str;
    /// Bytes the host can address.
    fn capacity_bytes(&self) -> u64;
    /// The sector size requests must be aligned to.
    fn sector_bytes(&self) -> u32;
    /// Submit a request arriving at `now_ns`; return its completion time.
    /// The request has passed [`check_request`] (MODEL-3).
    fn submit(&mut self, now_ns: u64, req: &IoRequest) -> u64;
    /// A hint that `req` is submitted soon: the model may start loading
    /// what it will look up for it (a host cache prefetch). It changes
    /// nothing the model answers.
    fn prefetch(&self, _req: &IoRequest) {}
    /// What the model has counted so far.
    fn stats(&self) -> ModelStats;
    /// The model's parameters, each with the source of its number, for
    /// `flashlab devices`.
    fn describe(&self) -> Vec<Parameter>;
}

/// One parameter of a model, for listing presets.
#[derive(Clone, Debug, Serialize)]
pub struct Parameter {
    pub name: String,
    pub value: String,
    pub source: String,
}

impl Parameter {
    pub fn new(name: &str, value: impl ToString, source: &str) -> Parameter {
        Parameter {
            name: name.to_string(),
            value: value.to_string(),
            source: source.to_string(),
        }
    }
}

/// What every request to a device is checked against (MODEL-3): the name
/// its errors give, the bytes it can address and the sector its offsets
/// and lengths align to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    name: String,
    capacity_bytes: u64,
    sector_bytes: u32,
}

impl Geometry {
    pub fn new(name: impl Into<String>, capacity_bytes: u64, sector_bytes: u32) -> Geometry {
        Geometry {
            name: name.into(),
            capacity_bytes,
            sector_bytes,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }

    pub fn sector_bytes(&self) -> u32 {
        self.sector_bytes
    }

    /// [`check_request`] on `req`.
    pub fn check(&self, req: &IoRequest) -> Result<(), DeviceError> {
        check_request(&self.name, self.capacity_bytes, self.sector_bytes, req)
    }

    /// [`Geometry::check`] on a request of `kind` for `len_bytes` at `offset_bytes`.
    pub fn check_io(
        &self,
        kind: IoKind,
        offset_bytes: u64,
        len_bytes: u64,
    ) -> Result<(), DeviceError> {
        self.check(&IoRequest {
            kind,
            offset_bytes,
            len_bytes,
        })
    }
}

/// Check a request against a device's capacity and sector size (MODEL-3).
pub fn check_request(
    device: &str,
    capacity_bytes: u64,
    sector_bytes: u32,
    req: &IoRequest,
) -> Result<(), DeviceError> {
    if req.kind == IoKind::Flush {
        return Ok(());
    }
    let end = req.offset_bytes.checked_add(req.len_bytes);
    if end.is_none_or(|end| end > capacity_bytes) {
        return Err(DeviceError::OutOfRange {
            device: device.to_string(),
            offset_bytes: req.offset_bytes,
            len_bytes: req.len_bytes,
            capacity_bytes,
        });
    }
    let sector = u64::from(sector_bytes);
    if !req.offset_bytes.is_multiple_of(sector) || !req.len_bytes.is_multiple_of(sector) {
        return Err(DeviceError::Unaligned {
            device: device.to_string(),
            offset_bytes: req.offset_bytes,
            len_bytes: req.len_bytes,
            sector_bytes,
        });
    }
    Ok(())
}

/// Test doubles for the models built on other models.
#[cfg(test)]
pub(crate) mod testing {
    use super::{DeviceModel, IoKind, IoRequest, ModelStats, Parameter};

    /// A 1 GiB model of 512-byte sectors whose requests take `latency_ns`
    /// each: all at once, or (`serial`) one after another. It counts reads
    /// and writes, and notes a submit time that went backwards (CHAR-1).
    pub(crate) struct FixedLatency {
        latency_ns: u64,
        serial: bool,
        busy_ns: u64,
        last_submit_ns: u64,
        pub(crate) backwards: bool,
        reads: u64,
        writes: u64,
    }

    impl FixedLatency {
        /// Unlimited parallelism.
        pub(crate) fn new(latency_ns: u64) -> FixedLatency {
            FixedLatency {
                latency_ns,
                serial: false,
                busy_ns: 0,
                last_submit_ns: 0,
                backwards: false,
                reads: 0,
                writes: 0,
            }
        }

        /// One request at a time.
        pub(crate) fn serial(latency_ns: u64) -> FixedLatency {
            FixedLatency {
                serial: true,
                ..FixedLatency::new(latency_ns)
            }
        }
    }

    impl DeviceModel for FixedLatency {
        fn name(&self) -> &str {
            "fixed"
        }

        fn capacity_bytes(&self) -> u64 {
            1 << 30
        }

        fn sector_bytes(&self) -> u32 {
            512
        }

        fn submit(&mut self, now_ns: u64, req: &IoRequest) -> u64 {
            self.backwards |= now_ns < self.last_submit_ns;
            self.last_submit_ns = now_ns;
            match req.kind {
                IoKind::Read => self.reads += 1,
                IoKind::Write => self.writes += 1,
                _ => {}
            }
            if !self.serial {
                return now_ns + self.latency_ns;
            }
            self.busy_ns = now_ns.max(self.busy_ns) + self.latency_ns;
            self.busy_ns
        }

        fn stats(&self) -> ModelStats {
            ModelStats {
                reads: self.reads,
                writes: self.writes,
                ..ModelStats::default()
            }
        }

        fn describe(&self) -> Vec<Parameter> {
            Vec::new()
        }
    }
}
