//! # The seek curve: how long the arm takes to cross `d` tracks
//!
//! A voice-coil actuator accelerates, coasts and decelerates. For short seeks
//! it never reaches full speed, so the time grows with the square root of the
//! distance (constant acceleration then constant deceleration); for long seeks
//! it coasts at full speed and the time grows linearly. Ruemmler and Wilkes
//! ("An introduction to disk drive modeling", IEEE Computer 1994) fit exactly
//! this shape:
//!
//! ```text
//! seek(0) = 0
//! seek(d) = a + b * sqrt(d)      for 1 <= d < T   (short seeks)
//! seek(d) = c + e * d            for d >= T       (long seeks)
//! ```
//!
//! Datasheets give three numbers: the track-to-track time `seek(1)`, the
//! full-stroke time `seek(D)` for the largest distance `D`, and the *average*
//! seek, defined (see for example the Hitachi/HGST OEM specifications) as the
//! weighted average over all seeks between two uniformly chosen tracks: a
//! distance `n` occurs `(D + 1 - n)` times as often as the full stroke.
//!
//! Five unknowns (`a`, `b`, `c`, `e`, `T`) need five equations: the three
//! datasheet numbers, continuity at `T`, and a smooth join (equal slopes at
//! `T`, the physical statement that the arm's speed does not jump). For a given
//! `T` the first four determine `a`, `b`, `c`, `e` in closed form; the average
//! is then a closed-form integral of the curve against the seek-distance
//! density `2 (D - x) / D^2`, and it grows with `T` (a longer concave part
//! lifts the middle of the curve), so `T` is found by bisection. This is the
//! "do it properly" alternative to taking the seek at a third of the stroke,
//! and it costs microseconds.
//!
//! Not every triple fits this family: with the endpoints fixed, the average
//! lies between the all-linear curve (about `t2t + (full - t2t) / 3`) and the
//! all-square-root curve (about `t2t + 8/15 (full - t2t)`). Parameters outside
//! that band are refused rather than silently bent.
//!
//! Invariants (referred to as `SEEK-n`):
//! 1. `seek_ns(0) == 0` and `seek_ns(d) >= seek_ns(1) > 0` for `d >= 1`.
//! 2. `seek_ns` is non-decreasing in the distance.
//! 3. The two pieces meet at `T` with equal value and equal slope.

/// Bisection steps on `ln T`; 2^-80 of the range is far below a nanosecond.
const FIT_ITERATIONS_MAX: u32 = 80;

/// The smallest largest-distance a curve can be fitted on (three tracks).
pub const DISTANCE_TRACKS_MIN: u64 = 2;

/// A fitted seek curve. Times in nanoseconds (as `f64` inside, `u64` out).
#[derive(Clone, Debug, PartialEq)]
pub struct SeekCurve {
    /// `a`: constant of the short-seek piece (ns).
    short_ns: f64,
    /// `b`: square-root coefficient of the short-seek piece (ns per sqrt(track)).
    short_sqrt_ns: f64,
    /// `c`: constant of the long-seek piece (ns).
    long_ns: f64,
    /// `e`: slope of the long-seek piece (ns per track).
    long_per_track_ns: f64,
    /// `T`: the distance where the long-seek piece takes over (tracks).
    threshold_tracks: f64,
    /// `D`: the largest distance (tracks - 1).
    distance_tracks_max: u64,
}

impl SeekCurve {
    /// Fit the curve to a track-to-track, an average and a full-stroke time
    /// over a device whose largest seek is `distance_tracks_max` tracks.
    /// The error is a one-line description of the problem.
    pub fn fit(
        track_to_track_ns: u64,
        avg_ns: u64,
        full_stroke_ns: u64,
        distance_tracks_max: u64,
    ) -> Result<SeekCurve, String> {
        check_inputs(
            track_to_track_ns,
            avg_ns,
            full_stroke_ns,
            distance_tracks_max,
        )?;
        let (t2t, full) = (track_to_track_ns as f64, full_stroke_ns as f64);
        let at =
            |threshold: f64| SeekCurve::with_threshold(t2t, full, distance_tracks_max, threshold);
        let lowest = at(1.0);
        let highest = at(distance_tracks_max as f64);
        let target = avg_ns as f64;
        if target < lowest.average_ns() || target > highest.average_ns() {
            return Err(format!(
                "average seek {:.3} ms cannot be fitted between track-to-track {:.3} ms and \
                 full stroke {:.3} ms: it must lie in [{:.3}, {:.3}] ms",
                target / 1e6,
                t2t / 1e6,
                full / 1e6,
                lowest.average_ns() / 1e6,
                highest.average_ns() / 1e6
            ));
        }
        Ok(bisect_threshold(target, distance_tracks_max, at))
    }

    /// The curve with a given threshold `T`, its other four coefficients
    /// fixed by `seek(1) = t2t`, `seek(D) = full` and a smooth join (SEEK-3).
    fn with_threshold(t2t: f64, full: f64, distance_tracks_max: u64, threshold: f64) -> SeekCurve {
        let d_max = distance_tracks_max as f64;
        let root = threshold.sqrt();
        // full - t2t = b * (sqrt(T)/2 + D/(2 sqrt(T)) - 1); positive for D >= 2.
        let b = (full - t2t) / (root / 2.0 + d_max / (2.0 * root) - 1.0);
        let a = t2t - b;
        SeekCurve {
            short_ns: a,
            short_sqrt_ns: b,
            long_ns: a + b * root / 2.0,
            long_per_track_ns: b / (2.0 * root),
            threshold_tracks: threshold,
            distance_tracks_max,
        }
    }

    /// The seek time for a distance, in whole nanoseconds.
    pub fn seek_ns(&self, distance_tracks: u64) -> u64 {
        if distance_tracks == 0 {
            return 0;
        }
        self.seek_exact_ns(distance_tracks as f64).round().max(1.0) as u64
    }

    /// The curve at a real distance `x >= 1`, without rounding.
    fn seek_exact_ns(&self, x: f64) -> f64 {
        if x < self.threshold_tracks {
            self.short_ns + self.short_sqrt_ns * x.sqrt()
        } else {
            self.long_ns + self.long_per_track_ns * x
        }
    }

    /// The average seek between two uniformly chosen tracks: the integral of
    /// the curve against the distance density `2 (D - x) / D^2` on `[0, D]`.
    pub fn average_ns(&self) -> f64 {
        let d = self.distance_tracks_max as f64;
        let t = self.threshold_tracks;
        let (a, b) = (self.short_ns, self.short_sqrt_ns);
        let (c, e) = (self.long_ns, self.long_per_track_ns);
        let short =
            a * (d * t - t * t / 2.0) + b * (2.0 / 3.0 * d * t.powf(1.5) - 2.0 / 5.0 * t.powf(2.5));
        let long = c * (d * d / 2.0 - d * t + t * t / 2.0)
            + e * (d * d * d / 6.0 - d * t * t / 2.0 + t * t * t / 3.0);
        2.0 * (short + long) / (d * d)
    }

    /// The same average as the datasheets' discrete formula,
    /// `sum (D + 1 - n) seek(n) / (D (D + 1) / 2)`. O(D); for tests.
    pub fn average_discrete_ns(&self) -> f64 {
        let d = self.distance_tracks_max;
        let weighted: f64 = (1..=d)
            .map(|n| (d + 1 - n) as f64 * self.seek_ns(n) as f64)
            .sum();
        weighted / (d as f64 * (d as f64 + 1.0) / 2.0)
    }

    /// `T`, where the linear piece takes over (tracks).
    pub fn threshold_tracks(&self) -> f64 {
        self.threshold_tracks
    }

    /// `(a, b, c, e)`: `a + b sqrt(d)` below the threshold, `c + e d` above.
    pub fn coefficients_ns(&self) -> (f64, f64, f64, f64) {
        (
            self.short_ns,
            self.short_sqrt_ns,
            self.long_ns,
            self.long_per_track_ns,
        )
    }

    /// The largest distance the curve was fitted on (tracks).
    pub fn distance_tracks_max(&self) -> u64 {
        self.distance_tracks_max
    }
}

/// The datasheet triple must be ordered and the device must have tracks.
fn check_inputs(t2t_ns: u64, avg_ns: u64, full_ns: u64, distance_max: u64) -> Result<(), String> {
    if distance_max < DISTANCE_TRACKS_MIN {
        return Err(format!(
            "{} tracks are too few for a seek curve (at least {})",
            distance_max + 1,
            DISTANCE_TRACKS_MIN + 1
        ));
    }
    if t2t_ns == 0 {
        return Err("track-to-track seek must be positive".to_string());
    }
    if !(t2t_ns < full_ns && t2t_ns <= avg_ns && avg_ns <= full_ns) {
        return Err(format!(
            "seek times must satisfy track-to-track ({t2t_ns} ns) <= average ({avg_ns} ns) \
             <= full stroke ({full_ns} ns), with track-to-track < full stroke"
        ));
    }
    Ok(())
}

/// Find `T` in `[1, D]` whose curve has the target average. The average grows
/// with `T`; bisect on `ln T` because `T` spans orders of magnitude.
fn bisect_threshold(
    target_ns: f64,
    distance_tracks_max: u64,
    at: impl Fn(f64) -> SeekCurve,
) -> SeekCurve {
    let (mut lo, mut hi) = (0.0_f64, (distance_tracks_max as f64).ln());
    for _ in 0..FIT_ITERATIONS_MAX {
        let mid = (lo + hi) / 2.0;
        if at(mid.exp()).average_ns() < target_ns {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let curve = at(((lo + hi) / 2.0).exp());
    debug_assert!(curve.short_sqrt_ns > 0.0, "SEEK-2: the curve must rise");
    curve
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    /// hdd-2008: 0.8 ms, 4.16 ms, 8.32 ms over 248,870 tracks (the largest
    /// distance is 248,869; see `geometry`'s hand-computed test).
    fn curve_2008() -> SeekCurve {
        SeekCurve::fit(800_000, 4_160_000, 8_320_000, 248_869).unwrap()
    }

    #[test]
    fn seek_curve_hits_the_datasheet_points() {
        let curve = curve_2008();
        assert_eq!(curve.seek_ns(0), 0);
        assert_eq!(curve.seek_ns(1), 800_000);
        assert_eq!(curve.seek_ns(248_869), 8_320_000);
        assert!((curve.average_ns() - 4_160_000.0).abs() < 1.0);
    }

    #[test]
    fn seek_curve_closed_form_average_matches_discrete_formula() {
        let curve = curve_2008();
        let discrete = curve.average_discrete_ns();
        // The continuous density and the datasheets' discrete weights differ
        // by O(1/D) and rounding to whole nanoseconds: well under 0.1%.
        assert!(
            (discrete - 4_160_000.0).abs() < 4_160.0,
            "discrete {discrete}"
        );
    }

    #[test]
    fn seek_curve_is_continuous_and_smooth_at_the_threshold() {
        let curve = curve_2008();
        let t = curve.threshold_tracks();
        let (a, b, c, e) = curve.coefficients_ns();
        let short = a + b * t.sqrt();
        let long = c + e * t;
        assert!((short - long).abs() < 1e-6 * short, "SEEK-3 value");
        let short_slope = b / (2.0 * t.sqrt());
        assert!((short_slope - e).abs() < 1e-9 * e.max(1.0), "SEEK-3 slope");
        // Integer distances around T differ by at most one slope step.
        let below = curve.seek_ns(t.floor() as u64);
        let above = curve.seek_ns(t.ceil() as u64);
        assert!(above >= below && above - below <= e.ceil() as u64 + 1);
    }

    #[test]
    fn seek_curve_is_monotone() {
        let curve = curve_2008();
        let mut previous = 0;
        let mut d = 0;
        while d <= 248_869 {
            let s = curve.seek_ns(d);
            assert!(s >= previous, "SEEK-2 at {d}: {s} < {previous}");
            previous = s;
            d += if d < 2_000 { 1 } else { 97 };
        }
    }

    #[test]
    fn seek_curve_average_grows_with_threshold() {
        let mut previous = 0.0;
        // Thresholds up to 2^17 = 131,072, inside the largest distance.
        for exponent in 0..=17 {
            let threshold = (1u64 << exponent) as f64;
            let curve = SeekCurve::with_threshold(0.8e6, 8.32e6, 248_869, threshold);
            assert!(curve.average_ns() > previous);
            previous = curve.average_ns();
        }
    }

    #[test]
    fn seek_curve_refuses_impossible_triples() {
        // Average below a third of the stroke: not reachable by the family.
        assert!(SeekCurve::fit(MS, 2 * MS, 20 * MS, 100_000).is_err());
        // Average above the all-square-root curve.
        assert!(SeekCurve::fit(MS, 15 * MS, 20 * MS, 100_000).is_err());
        assert!(SeekCurve::fit(0, 4 * MS, 8 * MS, 100_000).is_err());
        assert!(SeekCurve::fit(5 * MS, 4 * MS, 8 * MS, 100_000).is_err());
        assert!(SeekCurve::fit(MS, 4 * MS, 8 * MS, 1).is_err());
    }
}
