//! # Magnetic disk timing model
//!
//! A disk answers a request in three mechanical steps: the arm *seeks* to the
//! track, the head *waits for the platter* to bring the first sector round,
//! and the sectors *transfer* as they pass under the head. For the small
//! random I/O of transaction processing the first two dominate (lee2008
//! Table 1: 8.33 ms of positioning against 0.04 ms to move 4 KB), which is the
//! whole case for flash; for sequential I/O only the third remains. This
//! model computes each step from the disk's datasheet figures:
//!
//! - seek: a square-root-then-linear curve fitted to the track-to-track,
//!   average and full-stroke times ([`seek`]);
//! - rotation: the platter angle is a function of virtual time alone, so the
//!   wait for a sector depends on exactly when the arm arrives ([`geometry`]).
//!   Rewriting the sector that has just passed costs nearly a revolution;
//!   writing the next one right away costs nothing, which is why a log on a
//!   disk is fast only while its writes stream;
//! - transfer as the sectors pass under the head, plus a track switch when a
//!   request runs off the end of a track (hidden mostly by track skew). The
//!   track is sized so that streaming, switches included, delivers the
//!   datasheet's sustained media rate; the platter itself passes data about
//!   10% faster.
//!
//! The mechanism serves one request at a time in arrival order (a FIFO
//! command queue: service starts at `max(arrival, busy_until)`). There is no
//! command overhead, so a request issued the instant its predecessor ended
//! finds the head where it left it and streams on.
//!
//! Reads go through a segmented read cache ([`read_cache`]): a read found in
//! a segment crosses the interface without moving the arm, and with
//! read-ahead on the head goes on reading the sectors after a read into its
//! segment until the segment is full or a command needs the mechanism. A
//! stream read page by page with host work between the pages then finds its
//! next page read already, where without the cache each page would wait
//! most of a revolution. A write drops the segments it overlaps.
//!
//! The host interface is assumed to overlap the media transfer (data streams
//! through the buffer while the arm moves and the media is slower than the
//! link), so it costs time only for cached writes and for reads whose data
//! is all in the read cache already: with the write cache on
//! ([`cache`]) a write completes when its data has crossed the interface and
//! is destaged later; a flush waits for every destage. With the cache off (the
//! default) a write completes when it is on the platter and a flush completes
//! once the outstanding work is done. Trim is a no-op that completes at once.
//!
//! Invariants (referred to as `HDD-n`):
//! 1. A request completes no earlier than it arrives (MODEL-2).
//! 2. Mechanical service starts no earlier than the end of the previous one
//!    (`busy_until_ns` never goes backwards).
//! 3. The head is on a track of the disk: where the last transfer ended,
//!    clamped to the last track for an out-of-range request (while a
//!    read-ahead runs, where it began; it moves when the read-ahead stops).

pub mod cache;
pub mod geometry;
pub mod params;
mod read_ahead;
pub mod read_cache;
pub mod seek;

pub use geometry::HddGeometry;
pub use params::{HDD_2008_NAME, HDD_2010_NAME, HDD_7200_7_NAME, HddParams, HddSources};
pub use seek::SeekCurve;

use crate::error::DeviceError;
use crate::model::{DeviceModel, IoKind, IoRequest, ModelStats, Parameter};
use cache::WriteCache;
use params::{NS_PER_MS, NS_PER_S, geometry_error};
use read_cache::ReadCache;

/// A magnetic disk. See the module documentation.
#[derive(Clone, Debug)]
pub struct HddModel {
    name: String,
    params: HddParams,
    geometry: HddGeometry,
    seek: SeekCurve,
    /// The track the head is on.
    head_track: u64,
    /// When the mechanism finishes what it has been given (HDD-2).
    busy_until_ns: u64,
    /// When the host interface is free (cached writes only).
    interface_free_ns: u64,
    cache: WriteCache,
    /// The read segments and the read-ahead filling one of them.
    read_cache: ReadCache,
    stats: ModelStats,
}

/// What one mechanical service cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Service {
    end_ns: u64,
    seek_ns: u64,
    rotation_ns: u64,
}

impl HddModel {
    /// A disk named `name` with `params`, or a `Geometry` error naming the
    /// first parameter that cannot describe a disk.
    pub fn new(name: &str, params: HddParams) -> Result<HddModel, DeviceError> {
        params.validate(name)?;
        let switch_ns = params.seek_ns_track_to_track + params.write_settle_ns;
        let geometry = HddGeometry::derive(&params, switch_ns, name)?;
        let seek = SeekCurve::fit(
            params.seek_ns_track_to_track,
            params.seek_ns_avg,
            params.seek_ns_full_stroke,
            geometry.tracks - 1,
        )
        .map_err(|problem| geometry_error(name, problem))?;
        let read_cache = ReadCache::new(
            params.read_cache_segments,
            params.read_segment_sectors(),
            params.capacity_bytes / u64::from(params.sector_bytes),
            params.read_ahead,
        );
        Ok(HddModel {
            name: name.to_string(),
            cache: WriteCache::new(params.write_cache_bytes),
            read_cache,
            params,
            geometry,
            seek,
            head_track: 0,
            busy_until_ns: 0,
            interface_free_ns: 0,
            stats: ModelStats::default(),
        })
    }

    /// The `hdd-2008` preset (lee2008's Seagate Barracuda 7200.10).
    pub fn hdd_2008() -> Result<HddModel, DeviceError> {
        HddModel::new(HDD_2008_NAME, HddParams::hdd_2008())
    }

    /// The `hdd-seagate-7200-7` preset (lee2007's Barracuda 7200.7).
    pub fn hdd_7200_7() -> Result<HddModel, DeviceError> {
        HddModel::new(HDD_7200_7_NAME, HddParams::hdd_7200_7())
    }

    /// The `hdd-2010` preset (petrov2010's enterprise disk).
    pub fn hdd_2010() -> Result<HddModel, DeviceError> {
        HddModel::new(HDD_2010_NAME, HddParams::hdd_2010())
    }

    /// The parameters the model was built from.
    pub fn params(&self) -> &HddParams {
        &self.params
    }

    /// The derived layout.
    pub fn geometry(&self) -> &HddGeometry {
        &self.geometry
    }

    /// The fitted seek curve.
    pub fn seek_curve(&self) -> &SeekCurve {
        &self.seek
    }

    /// The track under the head.
    pub fn head_track(&self) -> u64 {
        self.head_track
    }

    /// When the mechanism will have finished everything submitted so far.
    pub fn busy_until_ns(&self) -> u64 {
        self.busy_until_ns
    }

    /// Run one read or write on the mechanism, FIFO after earlier work.
    fn mechanical(&mut self, now_ns: u64, req: &IoRequest) -> u64 {
        let start_ns = now_ns.max(self.busy_until_ns);
        let service = self.serve(start_ns, req);
        debug_assert!(service.end_ns >= self.busy_until_ns, "HDD-2");
        self.busy_until_ns = service.end_ns;
        self.stats.seek_ns_total += service.seek_ns;
        self.stats.rotation_ns_total += service.rotation_ns;
        service.end_ns
    }

    /// Seek, wait and transfer, track by track, from `start_ns`.
    fn serve(&mut self, start_ns: u64, req: &IoRequest) -> Service {
        let sectors = req.len_bytes / self.geometry.sector_bytes;
        if sectors == 0 {
            return Service {
                end_ns: start_ns,
                ..Service::default()
            };
        }
        let settle_ns = match req.kind {
            IoKind::Write => self.params.write_settle_ns,
            _ => 0,
        };
        let (service, track) = self.walk(
            self.head_track,
            start_ns,
            req.offset_bytes,
            sectors,
            settle_ns,
        );
        self.head_track = track;
        service
    }

    /// What a transfer of `sectors` from `offset_bytes` costs with the head
    /// on `head_track` at `start_ns`, and the track it ends on. Pure: the
    /// read-ahead's timing asks it about sectors not yet requested.
    fn walk(
        &self,
        head_track: u64,
        start_ns: u64,
        offset_bytes: u64,
        sectors: u64,
        settle_ns: u64,
    ) -> (Service, u64) {
        let g = &self.geometry;
        let mut remaining = sectors;
        let mut service = Service {
            end_ns: start_ns,
            ..Service::default()
        };
        if remaining == 0 {
            return (service, head_track);
        }
        let (mut track, mut sector) = g.locate(offset_bytes);
        let distance = track.abs_diff(head_track);
        if distance > 0 {
            service.seek_ns = self.seek.seek_ns(distance) + settle_ns;
        }
        let mut t = start_ns.saturating_add(service.seek_ns);
        loop {
            let slot = g.slot(track, sector);
            let wait_ns = g.rotational_wait_ns(t, slot);
            let sectors = remaining.min(g.sectors_per_track - sector);
            t = t.saturating_add(wait_ns + g.transfer_ns(slot, sectors));
            service.rotation_ns += wait_ns;
            remaining -= sectors;
            if remaining == 0 {
                break;
            }
            let switch_ns = self.seek.seek_ns(1) + settle_ns;
            t = t.saturating_add(switch_ns);
            service.seek_ns += switch_ns;
            (track, sector) = (track + 1, 0);
        }
        let end_track = track.min(g.tracks - 1);
        debug_assert!(end_track < g.tracks, "HDD-3");
        service.end_ns = t;
        (service, end_track)
    }

    /// A write that the cache takes: done when its data is in the buffer.
    fn cached_write(&mut self, now_ns: u64, req: &IoRequest) -> u64 {
        let admit_ns = self.cache.admit_ns(now_ns, req.len_bytes);
        let transfer_ns = self.interface_ns(req.len_bytes);
        let in_buffer_ns = admit_ns
            .max(self.interface_free_ns)
            .saturating_add(transfer_ns);
        self.interface_free_ns = in_buffer_ns;
        let destaged_ns = self.mechanical(now_ns, req);
        self.cache.push(destaged_ns, req.len_bytes);
        in_buffer_ns
    }

    /// Time to move `bytes` over the host interface.
    fn interface_ns(&self, bytes: u64) -> u64 {
        let ns = u128::from(bytes) * u128::from(NS_PER_S)
            / u128::from(self.params.interface_bytes_per_s);
        u64::try_from(ns).unwrap_or(u64::MAX)
    }

    fn write(&mut self, now_ns: u64, req: &IoRequest) -> u64 {
        self.stats.writes += 1;
        self.stats.bytes_written += req.len_bytes;
        self.invalidate_read_cache(now_ns, req);
        if self.params.write_cache_enabled && self.cache.fits(req.len_bytes) {
            self.cached_write(now_ns, req)
        } else {
            self.mechanical(now_ns, req)
        }
    }
}

impl DeviceModel for HddModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn capacity_bytes(&self) -> u64 {
        self.params.capacity_bytes
    }

    fn sector_bytes(&self) -> u32 {
        self.params.sector_bytes
    }

    fn submit(&mut self, now_ns: u64, req: &IoRequest) -> u64 {
        let done_ns = match req.kind {
            IoKind::Read => {
                self.stats.reads += 1;
                self.stats.bytes_read += req.len_bytes;
                self.read(now_ns, req)
            }
            IoKind::Write => self.write(now_ns, req),
            IoKind::Flush => {
                self.stats.flushes += 1;
                now_ns.max(self.busy_until_ns)
            }
            IoKind::Trim => {
                self.stats.trims += 1;
                now_ns
            }
        };
        debug_assert!(done_ns >= now_ns, "HDD-1");
        done_ns
    }

    fn stats(&self) -> ModelStats {
        ModelStats {
            read_cache_hits: self.read_cache.hits(),
            ..self.stats.clone()
        }
    }

    fn describe(&self) -> Vec<Parameter> {
        let mut out = describe_params(&self.params);
        out.extend(describe_derived(&self.geometry, &self.seek));
        out
    }
}

/// Milliseconds with three decimals, for listings.
fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / NS_PER_MS as f64)
}

fn describe_params(p: &HddParams) -> Vec<Parameter> {
    let s = &p.sources;
    let mb_s = |rate: u64| format!("{:.1} MB/s", rate as f64 / 1e6);
    let cache = on_off(p.write_cache_enabled);
    vec![
        Parameter::new("capacity_bytes", p.capacity_bytes, &s.capacity),
        Parameter::new("sector_bytes", p.sector_bytes, &s.sector),
        Parameter::new("rpm", p.rpm, &s.rpm),
        Parameter::new("media_rate", mb_s(p.media_bytes_per_s), &s.media_rate),
        Parameter::new(
            "interface_rate",
            mb_s(p.interface_bytes_per_s),
            &s.interface_rate,
        ),
        Parameter::new(
            "seek_track_to_track",
            ms(p.seek_ns_track_to_track),
            &s.seek_track_to_track,
        ),
        Parameter::new("seek_avg", ms(p.seek_ns_avg), &s.seek_avg),
        Parameter::new(
            "seek_full_stroke",
            ms(p.seek_ns_full_stroke),
            &s.seek_full_stroke,
        ),
        Parameter::new("write_settle", ms(p.write_settle_ns), &s.write_settle),
        Parameter::new("write_cache", cache, &s.write_cache),
        Parameter::new(
            "write_cache_bytes",
            p.write_cache_bytes,
            &s.write_cache_size,
        ),
        Parameter::new("read_cache_bytes", p.read_cache_bytes, &s.read_cache_size),
        Parameter::new(
            "read_cache_segments",
            p.read_cache_segments,
            &s.read_cache_segments,
        ),
        Parameter::new("read_ahead", on_off(p.read_ahead), &s.read_ahead),
        Parameter::new(
            "read_segment_bytes",
            p.read_segment_sectors() * u64::from(p.sector_bytes),
            "derived: read_cache_bytes / read_cache_segments, whole sectors",
        ),
    ]
}

fn on_off(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}

fn describe_derived(g: &HddGeometry, seek: &SeekCurve) -> Vec<Parameter> {
    let (a, b, c, e) = seek.coefficients_ns();
    let curve = format!(
        "{:.4} + {:.5} sqrt(d) ms below {:.0} tracks, {:.4} + {:.3e} d ms above",
        a / 1e6,
        b / 1e6,
        seek.threshold_tracks(),
        c / 1e6,
        e / 1e6
    );
    let platter = format!("{:.2} MB/s", g.platter_bytes_per_s() / 1e6);
    let streaming = format!("{:.2} MB/s", g.streaming_bytes_per_s() / 1e6);
    vec![
        Parameter::new("rotation", ms(g.rotation_ns), "derived: 60 s / rpm"),
        Parameter::new(
            "sectors_per_track",
            g.sectors_per_track,
            "derived: media rate x (rotation + track-to-track seek + write settle) / sector, \
             rounded down (no zoning): the sustained rate includes one switch per track",
        ),
        Parameter::new(
            "track_media_rate",
            platter,
            "derived: track bytes / rotation, the raw rate under the head; above media_rate, \
             which also pays the track switches",
        ),
        Parameter::new(
            "streaming_rate",
            streaming,
            "derived: track bytes / (rotation + track skew), what sequential I/O gets; \
             media_rate less the skew's rounding up to whole slots",
        ),
        Parameter::new(
            "tracks",
            g.tracks,
            "derived: capacity / track bytes, rounded up (one surface)",
        ),
        Parameter::new(
            "track_skew_sectors",
            g.skew_sectors,
            "derived: slots covering track-to-track seek + write settle, plus one",
        ),
        Parameter::new(
            "seek_curve",
            curve,
            "derived: fitted to track-to-track, average and full stroke, smooth join",
        ),
    ]
}

#[cfg(test)]
mod tests;
