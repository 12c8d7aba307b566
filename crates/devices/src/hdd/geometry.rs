//! # Where a sector is, and when it passes under the head
//!
//! The model has one surface and no zoning: every track holds the same number
//! of sectors, `sectors_per_track = sustained rate * (rotation time + track
//! switch) / sector size` (rounded down), and `tracks = capacity / track size` (rounded up; the last
//! track may be partly used). Logical sectors fill track 0, then track 1, and
//! so on, which is what makes sequential I/O sequential on the platter.
//!
//! Position is a function of virtual time, not state: the platter angle at
//! time `t` is `(t mod rotation_ns) / rotation_ns`. The track is divided into
//! `sectors_per_track` angular *slots*; slot `k` starts passing under the head
//! at phase `slot_ns(k) = floor(k * rotation_ns / sectors_per_track)`. Because
//! every time is computed from that one function, a transfer that ends at the
//! end of slot `k` ends exactly at the phase where slot `k + 1` begins, so a
//! request for the next sector that arrives at that instant waits zero.
//!
//! Track skew: sector 0 of track `t` sits `t * skew_sectors` slots further on
//! than sector 0 of track 0, with the skew just larger than a track switch
//! (track-to-track seek plus any write settle). A transfer that runs off the
//! end of a track therefore finds the next track's first sector arriving just
//! after the switch, as on real disks, instead of losing a revolution. The
//! skew still costs its slots once per track, so streaming runs at
//! `rotation / (rotation + skew)` of the rate the platter spins data past the
//! head. Datasheet "sustained" rates include those switches, so the track is
//! sized for the sustained figure *including* one switch per revolution:
//! streaming then delivers the published rate (110 MB/s, 160 MB/s), and the
//! platter's raw rate is about 10% higher.
//!
//! Invariants (referred to as `GEOM-n`):
//! 1. `slot_ns(k + sectors_per_track) == slot_ns(k) + rotation_ns`.
//! 2. `rotational_wait_ns` is in `[0, rotation_ns)`.
//! 3. `skew_sectors < sectors_per_track`.

use super::params::{HddParams, NS_PER_S, geometry_error};
use crate::error::DeviceError;

/// Nanoseconds per minute, for the rotation time.
const NS_PER_MINUTE: u64 = 60 * NS_PER_S;
/// A disk needs at least this many tracks for a seek curve.
pub const TRACKS_MIN: u64 = 3;
/// More tracks than this is a typo (a 2010 disk has a few hundred thousand
/// per surface).
pub const TRACKS_MAX: u64 = 1 << 32;

/// The layout derived from [`HddParams`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HddGeometry {
    /// One revolution.
    pub rotation_ns: u64,
    pub sector_bytes: u64,
    pub sectors_per_track: u64,
    pub tracks: u64,
    /// Slots by which each track's sector 0 is rotated against the previous.
    pub skew_sectors: u64,
}

impl HddGeometry {
    /// Derive the layout; `switch_ns` is the longest track switch the skew
    /// must cover.
    pub fn derive(
        params: &HddParams,
        switch_ns: u64,
        device: &str,
    ) -> Result<HddGeometry, DeviceError> {
        let rpm = u64::from(params.rpm);
        let rotation_ns = (NS_PER_MINUTE + rpm / 2) / rpm;
        let sector_bytes = u64::from(params.sector_bytes);
        // The sustained rate covers one track plus one switch per revolution.
        let track_bytes = u128::from(params.media_bytes_per_s)
            * u128::from(rotation_ns + switch_ns)
            / u128::from(NS_PER_S);
        let sectors_per_track =
            u64::try_from(track_bytes / u128::from(sector_bytes)).unwrap_or(u64::MAX);
        if sectors_per_track == 0 {
            return Err(geometry_error(
                device,
                format!(
                    "a track ({track_bytes} bytes at this rate and rpm) holds no {sector_bytes}-byte sector"
                ),
            ));
        }
        let capacity_sectors = params.capacity_bytes / sector_bytes;
        let tracks = capacity_sectors.div_ceil(sectors_per_track);
        if !(TRACKS_MIN..=TRACKS_MAX).contains(&tracks) {
            return Err(geometry_error(
                device,
                format!(
                    "{tracks} tracks of {sectors_per_track} sectors is outside [{TRACKS_MIN}, {TRACKS_MAX}]"
                ),
            ));
        }
        let mut geometry = HddGeometry {
            rotation_ns,
            sector_bytes,
            sectors_per_track,
            tracks,
            skew_sectors: 0,
        };
        geometry.skew_sectors = geometry.skew_for(switch_ns);
        debug_assert!(geometry.skew_sectors < sectors_per_track, "GEOM-3");
        Ok(geometry)
    }

    /// The smallest skew whose slots outlast `switch_ns`, plus one slot of
    /// margin for rounding, modulo the track.
    fn skew_for(&self, switch_ns: u64) -> u64 {
        let slots = (u128::from(switch_ns) * u128::from(self.sectors_per_track))
            .div_ceil(u128::from(self.rotation_ns));
        let slots = u64::try_from(slots).unwrap_or(u64::MAX);
        slots.saturating_add(1) % self.sectors_per_track
    }

    /// The track and the sector within it of a byte offset.
    pub fn locate(&self, offset_bytes: u64) -> (u64, u64) {
        let lba = offset_bytes / self.sector_bytes;
        (lba / self.sectors_per_track, lba % self.sectors_per_track)
    }

    /// The angular slot of a sector (GEOM-3 keeps it on the track).
    pub fn slot(&self, track: u64, sector: u64) -> u64 {
        let spt = u128::from(self.sectors_per_track);
        let skewed = u128::from(track) * u128::from(self.skew_sectors) + u128::from(sector);
        (skewed % spt) as u64
    }

    /// The phase (ns into a revolution) at which slot `k` starts; `k` may
    /// exceed the track (GEOM-1).
    pub fn slot_ns(&self, k: u64) -> u64 {
        let ns = u128::from(k) * u128::from(self.rotation_ns) / u128::from(self.sectors_per_track);
        u64::try_from(ns).unwrap_or(u64::MAX)
    }

    /// How long a head that is over the track at `now_ns` waits for the
    /// start of `slot` (GEOM-2).
    pub fn rotational_wait_ns(&self, now_ns: u64, slot: u64) -> u64 {
        let phase = now_ns % self.rotation_ns;
        let target = self.slot_ns(slot);
        let wait = (target + self.rotation_ns - phase) % self.rotation_ns;
        debug_assert!(wait < self.rotation_ns, "GEOM-2");
        wait
    }

    /// The time `sectors` consecutive slots starting at `slot` take to pass.
    pub fn transfer_ns(&self, slot: u64, sectors: u64) -> u64 {
        self.slot_ns(slot + sectors) - self.slot_ns(slot)
    }

    /// Bytes on one track.
    pub fn track_bytes(&self) -> u64 {
        self.sectors_per_track * self.sector_bytes
    }

    /// The raw rate at which the rounded track passes under the head
    /// (bytes/s): about 10% above the sustained rate, which also pays the
    /// track switches.
    pub fn platter_bytes_per_s(&self) -> f64 {
        self.track_bytes() as f64 * NS_PER_S as f64 / self.rotation_ns as f64
    }

    /// The rate a long sequential transfer gets (bytes/s): one track per
    /// revolution plus the skew, which the track switch fits inside.
    pub fn streaming_bytes_per_s(&self) -> f64 {
        let per_track_ns = self.rotation_ns + self.slot_ns(self.skew_sectors);
        self.track_bytes() as f64 * NS_PER_S as f64 / per_track_ns as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hdd_2008_geometry_by_hand() {
        let g = HddGeometry::derive(&HddParams::hdd_2008(), 800_000, "hdd-2008").unwrap();
        // 60e9 / 7200 = 8,333,333.3 ns.
        assert_eq!(g.rotation_ns, 8_333_333);
        // The sustained rate covers a revolution plus one 0.8 ms switch:
        // 110e6 B/s * (8,333,333 + 800,000) ns = 110e6 * 9.133333 ms
        // = 1,004,666.6 -> 1,004,666 bytes = 1962.2 -> 1962 sectors of 512.
        assert_eq!(g.sectors_per_track, 1962);
        // 250e9 / 512 = 488,281,250 sectors / 1962 = 248,869.1 -> 248,870.
        assert_eq!(g.tracks, 248_870);
        // 0.8 ms covers 0.8 / 8.333333 * 1962 = 188.4 -> 189 slots, +1.
        assert_eq!(g.skew_sectors, 190);
        // Streaming moves 1962 * 512 = 1,004,544 bytes per revolution plus
        // the skew, slot_ns(190) = floor(190 * 8,333,333 / 1962) = 806,999 ns:
        // 1,004,544 B / 9,140,332 ns = 109.90 MB/s, the published 110 MB/s
        // (the platter itself passes 1,004,544 B / 8.333333 ms = 120.545 MB/s).
        assert_eq!(g.slot_ns(190), 806_999);
        let streaming = 1_004_544.0 * 1e9 / 9_140_332.0;
        assert!((g.streaming_bytes_per_s() - streaming).abs() < 1e-6);
        assert!((streaming / 1e6 - 109.902).abs() < 0.001, "{streaming}");
        assert!((g.platter_bytes_per_s() / 1e6 - 120.545).abs() < 0.001);
    }

    #[test]
    fn hdd_slot_phase_wraps_exactly() {
        let g = HddGeometry::derive(&HddParams::hdd_2008(), 800_000, "hdd-2008").unwrap();
        for k in [0, 1, 17, 1961] {
            assert_eq!(g.slot_ns(k + 1962), g.slot_ns(k) + g.rotation_ns, "GEOM-1");
        }
        // A head at the phase where slot 8 starts waits nothing for slot 8 and
        // almost a revolution for slot 7.
        let at = 5 * g.rotation_ns + g.slot_ns(8);
        assert_eq!(g.rotational_wait_ns(at, 8), 0);
        assert_eq!(
            g.rotational_wait_ns(at, 7),
            g.rotation_ns - (g.slot_ns(8) - g.slot_ns(7))
        );
    }

    #[test]
    fn hdd_geometry_refuses_too_few_tracks() {
        let mut p = HddParams::hdd_2008();
        p.capacity_bytes = 512 * 1962; // one track
        assert!(HddGeometry::derive(&p, 800_000, "tiny").is_err());
        p.media_bytes_per_s = 1; // no sector fits on a track
        assert!(HddGeometry::derive(&p, 800_000, "slow").is_err());
    }
}
