//! # The CPU model's one calibration file
//!
//! The simulated CPU charges a SQL statement 147 us at 1.86 GHz (see
//! [`crate::config::CpuCosts`]: one published point, lee2008 Table 2). Work
//! that is not a statement (a row visited by a scan, a sort's key
//! comparison, a tuple through a run, a KB copied, a key hashed) is priced
//! at what it costs flashlab's own engine *relative to one update-commit
//! transaction*, times the 294 us of that transaction.
//!
//! Those ratios are measured, not typed in: `flashlab calibrate --out
//! crates/engine/data/cpu-calibration.json` runs
//! [`crate::temp::calibrate::measure`] a few rounds on the machine it runs
//! on and writes this file. The engine compiles the committed file in
//! ([`CALIBRATION_JSON`]) and takes every non-statement price from it
//! ([`scan_row_ns`], [`operator_costs`]); the report cites the same file.
//! There is no second copy of a price anywhere in the code, so rerunning the
//! command and rebuilding is the whole of a recalibration.
//!
//! Invariant CAL-1: the committed file parses and names each price of
//! [`PriceKey`] exactly once, with a positive finite implied price (checked
//! by the tests below; [`committed`] asserts it on first use).

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// The committed calibration, compiled in.
pub const CALIBRATION_JSON: &str = include_str!("../data/cpu-calibration.json");
/// Where it lives in the repository (what `flashlab calibrate --out` takes).
pub const CALIBRATION_PATH: &str = "crates/engine/data/cpu-calibration.json";

/// The priced operations, as named in the file's `key` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PriceKey {
    /// A row visited by a scan ([`crate::config::CpuCosts::scan_row_ns`]).
    ScanRow,
    /// A key comparison ([`OperatorCosts::compare_ns`]).
    Compare,
    /// A tuple through a run writer and reader ([`OperatorCosts::tuple_ns`]).
    Tuple,
    /// A KB of tuple bytes copied ([`OperatorCosts::copy_ns_per_kb`]).
    CopyPerKb,
    /// A key hashed ([`OperatorCosts::hash_ns`]).
    Hash,
}

impl PriceKey {
    /// Every price the file must carry, in its order.
    pub const ALL: [PriceKey; 5] = [
        PriceKey::ScanRow,
        PriceKey::Compare,
        PriceKey::Tuple,
        PriceKey::CopyPerKb,
        PriceKey::Hash,
    ];
}

/// One priced operation: its host cost, its ratio to an update-commit
/// transaction, and the simulated price that implies.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub key: PriceKey,
    /// A reader's name for it.
    pub name: String,
    pub host_ns: f64,
    pub ratio_to_update_commit: f64,
    /// ratio x 2 x STATEMENT_NS, at 1.86 GHz: the price the engine charges.
    pub implied_ns: f64,
}

/// A calibration run, as `flashlab calibrate` writes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    /// The command that wrote it.
    pub command: String,
    /// The machine's CPU, from /proc/cpuinfo (or "unknown").
    pub host_cpu: String,
    pub rounds: usize,
    pub tuples: u64,
    /// The calibrated update-commit transaction, ns of CPU at the
    /// reference clock.
    pub update_commit_reference_ns: f64,
    pub reference_ghz: f64,
    /// Host ns of an update-commit transaction (median).
    pub update_commit_host_ns: f64,
    pub prices: Vec<Price>,
}

impl Calibration {
    /// Parse a calibration and check CAL-1 on it.
    pub fn parse(text: &str) -> Result<Calibration, String> {
        let c: Calibration = serde_json::from_str(text).map_err(|e| e.to_string())?;
        for key in PriceKey::ALL {
            let n = c.prices.iter().filter(|p| p.key == key).count();
            if n != 1 {
                return Err(format!("price {key:?} appears {n} times (CAL-1)"));
            }
        }
        if c.prices.len() != PriceKey::ALL.len() {
            return Err(format!(
                "{} prices, expected {}",
                c.prices.len(),
                PriceKey::ALL.len()
            ));
        }
        if let Some(p) = c
            .prices
            .iter()
            .find(|p| !(p.implied_ns.is_finite() && p.implied_ns > 0.0))
        {
            return Err(format!("price {:?} is {} ns (CAL-1)", p.key, p.implied_ns));
        }
        Ok(c)
    }

    /// The implied price of `key`, ns at the reference clock.
    pub fn price_ns(&self, key: PriceKey) -> f64 {
        self.prices
            .iter()
            .find(|p| p.key == key)
            .map(|p| p.implied_ns)
            .unwrap_or(f64::NAN)
    }
}

/// The committed calibration (CAL-1 asserted on first use; the tests below
/// keep a malformed file from ever being committed).
pub fn committed() -> &'static Calibration {
    static CALIBRATION: OnceLock<Calibration> = OnceLock::new();
    CALIBRATION.get_or_init(|| match Calibration::parse(CALIBRATION_JSON) {
        Ok(c) => c,
        Err(e) => panic!("CAL-1: {CALIBRATION_PATH} compiled into the engine is invalid: {e}"),
    })
}

/// A row visited by a scan, ns at the reference clock (rounded).
pub fn scan_row_ns() -> u64 {
    committed().price_ns(PriceKey::ScanRow).round() as u64
}

/// The sort and join operators' prices at the reference clock.
pub fn operator_costs() -> OperatorCosts {
    let c = committed();
    OperatorCosts {
        compare_ns: c.price_ns(PriceKey::Compare),
        tuple_ns: c.price_ns(PriceKey::Tuple),
        hash_ns: c.price_ns(PriceKey::Hash),
        copy_ns_per_kb: c.price_ns(PriceKey::CopyPerKb),
    }
}

/// Clock of the CPU the costs were calibrated on (lee2008 section 3).
pub const REFERENCE_CPU_GHZ: f64 = 1.86;

/// Per-operation CPU prices at [`REFERENCE_CPU_GHZ`], in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct OperatorCosts {
    /// One key comparison (sort, merge, join), normalised keys.
    pub compare_ns: f64,
    /// Taking one tuple in or passing one on: bookkeeping, key extraction.
    pub tuple_ns: f64,
    /// Hashing one key and choosing its partition or bucket.
    pub hash_ns: f64,
    /// Copying one KB of tuple bytes (memcpy, CRC of clusters).
    pub copy_ns_per_kb: f64,
}

impl Default for OperatorCosts {
    /// The calibrated prices ([`crate::cpu_calibration::operator_costs`]).
    fn default() -> Self {
        operator_costs()
    }
}

impl OperatorCosts {
    /// The same work on a CPU clocked at `ghz`.
    pub fn at_ghz(&self, ghz: f64) -> OperatorCosts {
        let s = REFERENCE_CPU_GHZ / ghz.max(0.01);
        OperatorCosts {
            compare_ns: self.compare_ns * s,
            tuple_ns: self.tuple_ns * s,
            hash_ns: self.hash_ns * s,
            copy_ns_per_kb: self.copy_ns_per_kb * s,
        }
    }

    /// No charges (tests that only care about results).
    pub fn free() -> OperatorCosts {
        OperatorCosts {
            compare_ns: 0.0,
            tuple_ns: 0.0,
            hash_ns: 0.0,
            copy_ns_per_kb: 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_calibration_names_every_price_once() {
        let c = Calibration::parse(CALIBRATION_JSON).expect("CAL-1");
        assert!(c.update_commit_host_ns > 0.0 && c.rounds > 0);
        assert!(scan_row_ns() > 0);
        let ops = operator_costs();
        for v in [
            ops.compare_ns,
            ops.tuple_ns,
            ops.hash_ns,
            ops.copy_ns_per_kb,
        ] {
            assert!(v.is_finite() && v > 0.0);
        }
    }

    #[test]
    fn a_calibration_missing_or_repeating_a_price_is_refused() {
        let mut c = committed().clone();
        c.prices.pop();
        let text = serde_json::to_string(&c).unwrap();
        assert!(
            Calibration::parse(&text)
                .unwrap_err()
                .contains("appears 0 times")
        );
        let mut c = committed().clone();
        c.prices[1].key = PriceKey::ScanRow;
        let text = serde_json::to_string(&c).unwrap();
        assert!(
            Calibration::parse(&text)
                .unwrap_err()
                .contains("appears 2 times")
        );
        let mut c = committed().clone();
        c.prices[0].implied_ns = -1.0;
        let text = serde_json::to_string(&c).unwrap();
        assert!(Calibration::parse(&text).unwrap_err().contains("CAL-1"));
    }
}
