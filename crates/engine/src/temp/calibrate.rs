//! Measuring the engine's own CPU costs on this machine.
//!
//! The CPU model prices the sort and join operators at what they cost
//! flashlab's own code, times a system profile's scale
//! ([`crate::cpu_calibration`]). [`measure`] takes those host timings in
//! one session (real world, a flat memory device): the operator prices of
//! [`super::OperatorCosts`] (a key comparison, a tuple moved through a run,
//! a KB copied, a key hashed). `flashlab calibrate` runs it with the
//! engine's event prices (`crate::db::calibrate`) and writes the file the
//! engine compiles in.

use std::sync::Arc;
use std::time::Instant;

use flashlab_devices::{Device, DeviceError};
use serde::{Deserialize, Serialize};

use super::cpu::{CpuMeter, OperatorCosts};
use super::tuple::{KeyDist, SortKey, SortRecords, TupleSource};
use super::{TempSpace, cluster, hash_join, run, sort};

/// Host nanoseconds of each priced operation, measured in one session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostCosts {
    /// One key comparison of an in-memory sort (data movement included).
    pub compare_ns: f64,
    /// One tuple through a run writer and reader, per tuple.
    pub tuple_ns: f64,
    /// One KB of tuple bytes through a run writer and reader.
    pub copy_ns_per_kb: f64,
    /// Hashing one 10-byte key.
    pub hash_ns: f64,
}

/// A flat in-memory device (one memcpy a request), so the device's own
/// bookkeeping is not counted: the simulated world models the device.
struct Flat(std::sync::Mutex<Vec<u8>>);

impl Device for Flat {
    fn name(&self) -> &str {
        "flat"
    }
    fn capacity_bytes(&self) -> u64 {
        self.0.lock().map(|d| d.len() as u64).unwrap_or(0)
    }
    fn sector_bytes(&self) -> u32 {
        512
    }
    fn read(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        let data = self.0.lock().map_err(|_| refused())?;
        let at = offset_bytes as usize;
        buf.copy_from_slice(&data[at..at + buf.len()]);
        Ok(())
    }
    fn write(&self, offset_bytes: u64, src: &[u8]) -> Result<(), DeviceError> {
        let mut data = self.0.lock().map_err(|_| refused())?;
        let at = offset_bytes as usize;
        data[at..at + src.len()].copy_from_slice(src);
        Ok(())
    }
    fn flush(&self) -> Result<(), DeviceError> {
        Ok(())
    }
    fn trim(&self, _: u64, _: u64) -> Result<(), DeviceError> {
        Ok(())
    }
}

fn refused() -> DeviceError {
    DeviceError::Refused {
        device: "flat".into(),
        problem: "a writer panicked".into(),
    }
}

/// Measure [`HostCosts`] once, on `tuples` sort records (1,000,000 is what
/// the published prices used). Must run inside a real-world runtime
/// (`RealRuntime::enter`).
pub fn measure(tuples: u64) -> crate::Result<HostCosts> {
    let n = tuples.max(1_000);
    let mut input = Vec::with_capacity(n as usize);
    let mut g = SortRecords::with_keys(16, n, KeyDist::Uniform);
    while let Some(t) = g.next_tuple()? {
        input.push(t.to_vec());
    }
    // Comparisons: sort one memory load.
    let key = SortKey::sort_benchmark();
    let mut load = sort::Load::new(usize::MAX / 2);
    for t in &input {
        load.try_push(t, &key)?;
    }
    let mut cpu = CpuMeter::new(OperatorCosts::free());
    let t0 = Instant::now();
    load.sort(&key, &mut cpu);
    let compare_ns = t0.elapsed().as_nanos() as f64 / cpu.compares.max(1) as f64;
    // Tuples through a run, at two sizes, to split per-tuple and per-byte.
    let space = TempSpace::new(
        Arc::new(Flat(std::sync::Mutex::new(vec![0u8; 1 << 30]))),
        None,
    )?;
    let pool = Arc::new(cluster::IoPool::new(&space, 1));
    let mut per_tuple = Vec::new();
    for size in [100usize, 1000] {
        let count = if size == 100 { n } else { n / 10 };
        let tuple = vec![b'x'; size];
        let t0 = Instant::now();
        let mut w = run::RunWriter::new(
            &space,
            &pool,
            64 << 10,
            Some(size),
            super::cluster::WRITE_BEHIND_CLUSTERS,
        );
        for _ in 0..count {
            w.push(&tuple, &tuple[..10], &mut cpu)?;
        }
        let r = w.finish(&mut cpu)?;
        let mut reader = run::RunReader::new(r, &Arc::new(SortKey::bytes(0, 10)));
        while reader.advance(&mut cpu)? {}
        per_tuple.push(t0.elapsed().as_nanos() as f64 / count as f64 / 2.0);
    }
    let copy_ns_per_kb = (per_tuple[1] - per_tuple[0]) / 0.9 * 1024.0 / 1000.0;
    let tuple_ns = per_tuple[0] - copy_ns_per_kb * 100.0 / 1024.0;
    // Hashing.
    let t0 = Instant::now();
    let mut acc = 0u64;
    for t in &input {
        acc = acc.wrapping_add(hash_join::hash_key(&t[..10], 1) >> 60);
    }
    let hash_ns = t0.elapsed().as_nanos() as f64 / n as f64;
    std::hint::black_box(acc);
    Ok(HostCosts {
        compare_ns,
        tuple_ns,
        copy_ns_per_kb,
        hash_ns,
    })
}
