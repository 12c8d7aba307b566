//! TPC-C's random numbers and strings (clause 2.1.4 to 2.1.6, 4.3.2).
//!
//! NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x
//! skews customer ids, customer last names and item ids towards a few hot
//! values. Its constant C is chosen once per run: [`Constants::load`] for
//! the population, [`Constants::run`] for the measured run, whose C for
//! C_LAST differs from the load's by 65 to 119 but neither 96 nor 112
//! (clause 2.1.6.1), so the names the terminals ask for are not exactly the
//! ones that were made hot at load time. C for C_ID and OL_I_ID may equal
//! the load's, and does here.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// NURand's A for customer last names.
pub const A_C_LAST: u32 = 255;
/// NURand's A for customer ids.
pub const A_C_ID: u32 = 1023;
/// NURand's A for item ids.
pub const A_OL_I_ID: u32 = 8191;
/// Last names are made from numbers 0 to this (clause 4.3.2.3).
pub const LAST_NAME_NUMBER_MAX: u32 = 999;
/// The C_LAST run constant's distance from the load constant (2.1.6.1).
const C_LAST_DELTA_MIN: u32 = 65;
const C_LAST_DELTA_MAX: u32 = 119;
const C_LAST_DELTA_FORBIDDEN: [u32; 2] = [96, 112];
/// Share of item and stock rows whose data holds "ORIGINAL" (4.3.3.1).
const ORIGINAL_PERCENT: u32 = 10;
const ORIGINAL: &str = "ORIGINAL";
/// Salt separating the constants' random stream from the population's.
const CONSTANTS_SALT: u64 = 0x7C0C_C0C0;

/// The syllables of a last name (clause 4.3.2.3).
const SYLLABLES: [&str; 10] = [
    "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
];
const ALPHANUMERIC: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// NURand's three constants C.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Constants {
    pub c_last: u32,
    pub c_id: u32,
    pub ol_i_id: u32,
}

impl Constants {
    /// The constants of the population, from the seed.
    pub fn load(seed: u64) -> Constants {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ CONSTANTS_SALT);
        Constants {
            c_last: rng.random_range(0..=A_C_LAST),
            c_id: rng.random_range(0..=A_C_ID),
            ol_i_id: rng.random_range(0..=A_OL_I_ID),
        }
    }

    /// The constants of the run, given the load's (clause 2.1.6.1).
    pub fn run(load: &Constants, seed: u64) -> Constants {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ CONSTANTS_SALT ^ 1);
        let c_last = loop {
            let candidate = rng.random_range(0..=A_C_LAST);
            if run_delta_ok(load.c_last, candidate) {
                break candidate;
            }
        };
        Constants { c_last, ..*load }
    }
}

/// Whether `run` is a valid C_LAST run constant for load constant `load`.
pub fn run_delta_ok(load: u32, run: u32) -> bool {
    let delta = load.abs_diff(run);
    (C_LAST_DELTA_MIN..=C_LAST_DELTA_MAX).contains(&delta)
        && !C_LAST_DELTA_FORBIDDEN.contains(&delta)
}

/// NURand(A, x, y) with constant `c` (clause 2.1.6).
pub fn nurand(rng: &mut impl Rng, a: u32, x: u32, y: u32, c: u32) -> u32 {
    let span = y - x + 1;
    (((rng.random_range(0..=a) | rng.random_range(x..=y)) + c) % span) + x
}

/// The last name made from `number` (0 to 999): three syllables.
pub fn last_name(number: u32) -> String {
    let digits = [number / 100 % 10, number / 10 % 10, number % 10];
    digits.iter().map(|&d| SYLLABLES[d as usize]).collect()
}

/// A random alphanumeric string of `min` to `max` characters.
pub fn astring(rng: &mut impl Rng, min: usize, max: usize) -> String {
    let len = rng.random_range(min..=max);
    (0..len)
        .map(|_| char::from(ALPHANUMERIC[rng.random_range(0..ALPHANUMERIC.len())]))
        .collect()
}

/// A random string of `min` to `max` digits.
pub fn nstring(rng: &mut impl Rng, min: usize, max: usize) -> String {
    let len = rng.random_range(min..=max);
    (0..len)
        .map(|_| char::from(b'0' + rng.random_range(0..10u8)))
        .collect()
}

/// A zip code: four random digits and "11111" (clause 4.3.2.7).
pub fn zip(rng: &mut impl Rng) -> String {
    nstring(rng, 4, 4) + "11111"
}

/// I_DATA or S_DATA: 26 to 50 characters, 10% holding "ORIGINAL".
pub fn data_maybe_original(rng: &mut impl Rng) -> String {
    let mut data = astring(rng, 26, 50);
    if rng.random_range(0..100) < ORIGINAL_PERCENT {
        let at = rng.random_range(0..=data.len() - ORIGINAL.len());
        data.replace_range(at..at + ORIGINAL.len(), ORIGINAL);
    }
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_names_follow_the_syllables() {
        assert_eq!(last_name(0), "BARBARBAR");
        assert_eq!(last_name(371), "PRICALLYOUGHT");
        assert_eq!(last_name(999), "EINGEINGEING");
    }

    #[test]
    fn run_constant_keeps_its_distance_for_every_load_constant() {
        for seed in 0..300 {
            let load = Constants::load(seed);
            let run = Constants::run(&load, seed);
            assert!(run_delta_ok(load.c_last, run.c_last), "seed {seed}");
            assert_eq!((run.c_id, run.ol_i_id), (load.c_id, load.ol_i_id));
        }
        assert!(!run_delta_ok(0, 96) && !run_delta_ok(200, 88) && run_delta_ok(0, 65));
    }

    /// NURand stays in range, reaches every value, and is skewed: the
    /// hottest values are drawn far more often than uniform draws would be,
    /// and the mean is near the uniform mean (the OR only reshuffles).
    #[test]
    fn nurand_is_in_range_and_skewed() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let (x, y) = (1u32, 3000u32);
        let draws = 300_000;
        let mut counts = vec![0u32; (y + 1) as usize];
        for _ in 0..draws {
            let v = nurand(&mut rng, A_C_ID, x, y, 259);
            assert!((x..=y).contains(&v));
            counts[v as usize] += 1;
        }
        let seen = counts[1..].iter().filter(|&&c| c > 0).count();
        assert!(
            seen > 2_900,
            "{seen} of 3,000 ids drawn: nearly all are reachable"
        );
        let mut sorted: Vec<u32> = counts[1..].to_vec();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let uniform = draws as f64 / 3000.0;
        let top_share: f64 =
            sorted[..300].iter().map(|&c| f64::from(c)).sum::<f64>() / f64::from(draws);
        assert!(
            f64::from(sorted[0]) > 3.0 * uniform,
            "hottest id drawn {} times, uniform {uniform}",
            sorted[0]
        );
        assert!(
            top_share > 0.2,
            "the hottest 10% of ids get {top_share:.3} of the draws (uniform: 0.1)"
        );
    }

    #[test]
    fn data_holds_original_about_one_time_in_ten() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let n = 20_000;
        let hits = (0..n)
            .filter(|_| {
                let d = data_maybe_original(&mut rng);
                assert!((26..=50).contains(&d.len()));
                d.contains(ORIGINAL)
            })
            .count();
        assert!((1_600..2_400).contains(&hits), "{hits} of {n}");
    }
}
