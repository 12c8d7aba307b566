//! # The CPU model's one calibration file
//!
//! The simulated CPU charges the engine's own events
//! ([`crate::cpu_calibration::CpuCosts`]). Their prices come from two sources, both
//! in one committed file, [`CALIBRATION_JSON`]:
//!
//! - **The engine's prices** ([`Price`]): what each event costs flashlab's
//!   own engine in host nanoseconds, measured by `flashlab calibrate` on
//!   the engine itself. Each is a difference of two measurements that
//!   differ in that event alone (a deeper tree: more page accesses; a
//!   larger page: more KB per read), a median over rounds, so no price
//!   rests on one noisy timing.
//! - **System profiles** ([`Profile`]): a paper's server (its CPU, clock,
//!   cores and DBMS) as a scale on the engine's prices, a fixed cost per
//!   transaction, and a scale on the price of a page I/O's KB. A profile fits at most two parameters, each to one
//!   declared published point of its own paper ([`Fit`]), from counting
//!   runs of the simulated engine at the engine's prices; each point is a
//!   calibration check in the report, and everything else is a prediction.
//!
//! The engine compiles the file in; rerunning `flashlab calibrate --out
//! crates/engine/data/cpu-calibration.json` and rebuilding is the whole of
//! a recalibration (`--fit-only` keeps the measured prices and refits the
//! profiles, which is deterministic).
//!
//! Invariant CAL-1: the committed file parses, names each price of
//! [`PriceKey`] exactly once with a finite price that is not negative,
//! and holds the default profile ([`DEFAULT_PROFILE`]); every profile has
//! a positive scale and page-KB scale, a non-negative fixed cost and at
//! most two fits (checked by the
//! tests below; [`committed`] asserts it on first use).

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// CPU prices of the engine's own events, charged in the simulated world
/// ([`crate::cpu_prices`]; in the real world the CPU does the work).
///
/// A simulated transaction costs the sum of its events' prices: its begin
/// and commit, each statement, each row a scan visits, each buffer page
/// access, each page I/O request and its kilobytes, each kilobyte of log.
/// The prices are a *system profile* ([`crate::cpu_calibration::Profile`]):
/// what each event costs flashlab's own engine, measured by `flashlab
/// calibrate` on the engine itself, times the profile's scale, plus the
/// profile's fixed cost per transaction (charged with the commit). A
/// profile fits at most two parameters, each to one declared published
/// point of its own paper; the default is lee2008's server. No price is
/// typed into the code: they come from the committed calibration file.
/// Prices are ns at the profile's clock; [`CpuCosts::at_ghz`] moves them
/// to another clock of the default profile's CPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CpuCosts {
    /// Begin a transaction.
    pub begin_ns: u64,
    /// A point read through a B+tree (its page accesses apart).
    pub get_ns: u64,
    /// An insert, update or delete through a B+tree (its page accesses and
    /// log bytes apart).
    pub put_ns: u64,
    /// Per row returned by a scan.
    pub scan_row_ns: u64,
    /// Commit processing (commit record, lock release), and the profile's
    /// fixed cost per transaction.
    pub commit_ns: u64,
    /// A buffer page access (a fix of a resident or loaded page).
    pub page_access_ns: u64,
    /// A page I/O request to or from a data space (the I/O path's fixed part).
    pub page_io_ns: u64,
    /// Per KB of a page I/O request (copies, checksums).
    pub page_io_ns_per_kb: u64,
    /// Per KB of log record appended.
    pub log_ns_per_kb: u64,
}

/// The prices of a [`CpuCosts`], one a kind of work.
pub const CPU_PRICES: usize = 9;

/// Largest CPU cost of one operation (one second): far above any real
/// statement's, and low enough that sums over a run cannot overflow.
pub const CPU_COST_NS_MAX: u64 = 1_000_000_000;

impl Default for CpuCosts {
    /// The default profile's prices ([`crate::cpu_calibration::default_profile`]).
    fn default() -> Self {
        crate::cpu_calibration::default_profile().costs()
    }
}

impl CpuCosts {
    /// Every price with its key, in the file's order.
    pub fn named(&self) -> [(&'static str, u64); CPU_PRICES] {
        [
            ("begin_ns", self.begin_ns),
            ("get_ns", self.get_ns),
            ("put_ns", self.put_ns),
            ("scan_row_ns", self.scan_row_ns),
            ("commit_ns", self.commit_ns),
            ("page_access_ns", self.page_access_ns),
            ("page_io_ns", self.page_io_ns),
            ("page_io_ns_per_kb", self.page_io_ns_per_kb),
            ("log_ns_per_kb", self.log_ns_per_kb),
        ]
    }

    /// The prices `values` gives in [`CpuCosts::named`]'s order.
    pub fn from_values(values: [u64; CPU_PRICES]) -> CpuCosts {
        CpuCosts {
            begin_ns: values[0],
            get_ns: values[1],
            put_ns: values[2],
            scan_row_ns: values[3],
            commit_ns: values[4],
            page_access_ns: values[5],
            page_io_ns: values[6],
            page_io_ns_per_kb: values[7],
            log_ns_per_kb: values[8],
        }
    }

    /// Every price multiplied by `factor` (rounded; `as` saturates, so a
    /// cost at the limit on a slow clock stays finite).
    pub fn scaled(&self, factor: f64) -> CpuCosts {
        let f = |ns: u64| (ns as f64 * factor).round() as u64;
        CpuCosts::from_values(self.named().map(|(_, ns)| f(ns)))
    }

    /// The default profile's work on its CPU clocked at `ghz` (costs scale
    /// with 1/clock).
    pub fn at_ghz(&self, ghz: f64) -> CpuCosts {
        self.scaled(REFERENCE_CPU_GHZ / ghz.max(0.01))
    }

    /// Check every cost against [`CPU_COST_NS_MAX`], naming the key.
    pub fn validate(&self) -> Result<()> {
        for (key, ns) in self.named() {
            if ns > CPU_COST_NS_MAX {
                return Err(Error::Config(format!(
                    "[cpu] {key} = {ns} is more than the limit of {CPU_COST_NS_MAX} ns"
                )));
            }
        }
        Ok(())
    }

    /// No CPU charges (for tests and loading).
    pub fn free() -> CpuCosts {
        CpuCosts::from_values([0; CPU_PRICES])
    }
}

/// The committed calibration, compiled in.
pub const CALIBRATION_JSON: &str = include_str!("../data/cpu-calibration.json");
/// Where it lives in the repository (what `flashlab calibrate --out` takes).
pub const CALIBRATION_PATH: &str = "crates/engine/data/cpu-calibration.json";
/// The profile a database is priced at unless told otherwise: lee2008's
/// server, whose clock is [`REFERENCE_CPU_GHZ`].
pub const DEFAULT_PROFILE: &str = "lee2008";
/// Most parameters a profile may fit (the calibration rule).
pub const PROFILE_FITS_MAX: usize = 2;

/// The priced events, as named in the file's `key` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PriceKey {
    /// A read-only transaction's begin and commit.
    Begin,
    /// A point read, its page accesses apart.
    Get,
    /// An update, its page accesses and log bytes apart.
    Put,
    /// A writing transaction's commit (record, locks, begin included).
    Commit,
    /// A row visited by a scan.
    ScanRow,
    /// A buffer page access.
    PageAccess,
    /// A page read request's fixed part.
    PageIo,
    /// A KB of page read.
    PageIoPerKb,
    /// A KB of log record appended.
    LogPerKb,
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
    pub const ALL: [PriceKey; 13] = [
        PriceKey::Begin,
        PriceKey::Get,
        PriceKey::Put,
        PriceKey::Commit,
        PriceKey::ScanRow,
        PriceKey::PageAccess,
        PriceKey::PageIo,
        PriceKey::PageIoPerKb,
        PriceKey::LogPerKb,
        PriceKey::Compare,
        PriceKey::Tuple,
        PriceKey::CopyPerKb,
        PriceKey::Hash,
    ];
}

/// One priced event of flashlab's engine, in host ns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub key: PriceKey,
    /// A reader's name for it.
    pub name: String,
    /// Host ns on the calibration machine (median over the rounds).
    pub host_ns: f64,
    /// How it was measured.
    pub how: String,
}

/// One published point a profile's parameter was fitted to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fit {
    /// The parameter (`scale` or `txn_ns`).
    pub parameter: String,
    /// The published point, in words, with its paper and table.
    pub point: String,
    /// The calibration check in the report that holds the profile to it.
    pub check: String,
    /// The published CPU time per transaction the point implies, ns.
    pub published_ns: f64,
    /// CPU per transaction of the counting run at the engine's prices, ns.
    pub engine_ns: f64,
}

/// A paper's system: the engine's prices times `scale` (the prices per KB
/// as they are, [`Profile::scale_of`]), plus `txn_ns` per transaction.
/// See the module documentation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Which paper's system (`lee2008`, `petrov2010`).
    pub id: String,
    /// The CPU and DBMS, in words, with the source.
    pub system: String,
    /// The clock the prices are at.
    pub ghz: f64,
    /// The engine's prices are multiplied by this.
    pub scale: f64,
    /// The engine's price per KB of page I/O is multiplied by this: 1 (the
    /// engine's own) unless the DBMS does byte work on every page it reads
    /// or writes that the engine does not (InnoDB 5.1 folds every byte of a
    /// page into its checksum, where the engine's CRC-32C is one instruction
    /// per 8 bytes).
    #[serde(default = "one")]
    pub page_kb_scale: f64,
    /// Fixed CPU per transaction (the DBMS's session and client work that
    /// an embedded engine does not do), ns, charged with the commit.
    pub txn_ns: f64,
    /// The published points the parameters were fitted to.
    pub fitted: Vec<Fit>,
}

fn one() -> f64 {
    1.0
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
    pub prices: Vec<Price>,
    pub profiles: Vec<Profile>,
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
        if let Some(p) = c
            .prices
            .iter()
            .find(|p| !(p.host_ns.is_finite() && p.host_ns >= 0.0))
        {
            return Err(format!("price {:?} is {} ns (CAL-1)", p.key, p.host_ns));
        }
        if c.profile(DEFAULT_PROFILE).is_none() {
            return Err(format!("no profile {DEFAULT_PROFILE} (CAL-1)"));
        }
        for p in &c.profiles {
            p.validate()?;
        }
        Ok(c)
    }

    /// The engine's host price of `key`, ns.
    pub fn host_ns(&self, key: PriceKey) -> f64 {
        self.prices
            .iter()
            .find(|p| p.key == key)
            .map(|p| p.host_ns)
            .unwrap_or(f64::NAN)
    }

    /// The profile named `id`.
    pub fn profile(&self, id: &str) -> Option<&Profile> {
        self.profiles.iter().find(|p| p.id == id)
    }

    /// The engine's own prices, unscaled (the counting runs' profile).
    pub fn engine_profile(&self) -> Profile {
        Profile {
            id: "engine".into(),
            system: format!(
                "flashlab's engine on the calibration machine ({})",
                self.host_cpu
            ),
            ghz: REFERENCE_CPU_GHZ,
            scale: 1.0,
            page_kb_scale: 1.0,
            txn_ns: 0.0,
            fitted: Vec::new(),
        }
    }

    /// `profile`'s prices of the engine's events, ns at its clock. The
    /// per-KB prices are the engine's own, unscaled (see [`Profile`]).
    pub fn costs(&self, profile: &Profile) -> CpuCosts {
        let p = |key| (self.host_ns(key) * profile.scale_of(key)).round() as u64;
        CpuCosts {
            begin_ns: p(PriceKey::Begin),
            get_ns: p(PriceKey::Get),
            put_ns: p(PriceKey::Put),
            scan_row_ns: p(PriceKey::ScanRow),
            commit_ns: p(PriceKey::Commit) + profile.txn_ns.round() as u64,
            page_access_ns: p(PriceKey::PageAccess),
            page_io_ns: p(PriceKey::PageIo),
            page_io_ns_per_kb: p(PriceKey::PageIoPerKb),
            log_ns_per_kb: p(PriceKey::LogPerKb),
        }
    }

    /// `profile`'s prices of the sort and join operators, ns at its clock.
    pub fn operators(&self, profile: &Profile) -> OperatorCosts {
        let p = |key| self.host_ns(key) * profile.scale_of(key);
        OperatorCosts {
            compare_ns: p(PriceKey::Compare),
            tuple_ns: p(PriceKey::Tuple),
            hash_ns: p(PriceKey::Hash),
            copy_ns_per_kb: p(PriceKey::CopyPerKb),
        }
    }
}

impl Profile {
    /// What `key`'s engine price is multiplied by: the scale, except for
    /// the prices per KB. Those are byte-proportional work (copying a page
    /// or a record, checksumming it), bound by memory bandwidth, not by the
    /// length of the DBMS's code path that the scale stands for: a profile
    /// takes them as the engine measured them, save a page I/O's KB, which
    /// a DBMS with its own page checksum prices at `page_kb_scale`.
    pub fn scale_of(&self, key: PriceKey) -> f64 {
        match key {
            PriceKey::PageIoPerKb => self.page_kb_scale,
            PriceKey::LogPerKb | PriceKey::CopyPerKb => 1.0,
            _ => self.scale,
        }
    }

    /// CAL-1 for one profile.
    fn validate(&self) -> Result<(), String> {
        if !(self.scale.is_finite() && self.scale > 0.0) {
            return Err(format!("profile {}: scale {} (CAL-1)", self.id, self.scale));
        }
        if !(self.txn_ns.is_finite() && self.txn_ns >= 0.0) {
            return Err(format!(
                "profile {}: txn_ns {} (CAL-1)",
                self.id, self.txn_ns
            ));
        }
        if !(self.ghz.is_finite() && self.ghz > 0.0) {
            return Err(format!("profile {}: ghz {} (CAL-1)", self.id, self.ghz));
        }
        if !(self.page_kb_scale.is_finite() && self.page_kb_scale > 0.0) {
            return Err(format!(
                "profile {}: page_kb_scale {} (CAL-1)",
                self.id, self.page_kb_scale
            ));
        }
        if self.fitted.len() > PROFILE_FITS_MAX {
            return Err(format!(
                "profile {} fits {} parameters, more than {PROFILE_FITS_MAX} (CAL-1)",
                self.id,
                self.fitted.len()
            ));
        }
        Ok(())
    }

    /// This profile's event prices (from the committed file).
    pub fn costs(&self) -> CpuCosts {
        committed().costs(self)
    }

    /// These prices on the same CPU family clocked at `ghz`.
    pub fn costs_at(&self, ghz: f64) -> CpuCosts {
        self.costs().scaled(self.ghz / ghz.max(0.01))
    }

    /// This profile's operator prices (from the committed file).
    pub fn operators(&self) -> OperatorCosts {
        committed().operators(self)
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

/// The committed profile named `id`.
pub fn profile(id: &str) -> Option<&'static Profile> {
    committed().profile(id)
}

/// The default profile ([`DEFAULT_PROFILE`]).
pub fn default_profile() -> &'static Profile {
    profile(DEFAULT_PROFILE).expect("CAL-1: the committed file holds the default profile")
}

/// A row visited by a scan at the default profile, ns (rounded).
pub fn scan_row_ns() -> u64 {
    default_profile().costs().scan_row_ns
}

/// The sort and join operators' prices at the default profile.
pub fn operator_costs() -> OperatorCosts {
    default_profile().operators()
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
        assert!(c.rounds > 0);
        assert!(scan_row_ns() > 0);
        assert_eq!(default_profile().ghz, REFERENCE_CPU_GHZ);
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
        // Each case: a change to the committed calibration, and what the
        // refusal of the changed file says.
        type Case = (fn(&mut Calibration), &'static str);
        let cases: [Case; 3] = [
            (|c| drop(c.prices.pop()), "appears 0 times"),
            (|c| c.prices[1].key = PriceKey::Begin, "appears 2 times"),
            (|c| c.prices[0].host_ns = -1.0, "CAL-1"),
        ];
        for (change, refusal) in cases {
            let mut c = committed().clone();
            change(&mut c);
            let text = serde_json::to_string(&c).unwrap();
            let err = Calibration::parse(&text).unwrap_err();
            assert!(err.contains(refusal), "{refusal}: {err}");
        }
    }

    #[test]
    fn a_profile_fitting_more_than_two_parameters_is_refused() {
        let mut c = committed().clone();
        let p = c
            .profiles
            .iter_mut()
            .find(|p| p.id == DEFAULT_PROFILE)
            .unwrap();
        let fit = Fit {
            parameter: "scale".into(),
            point: "p".into(),
            check: "c".into(),
            published_ns: 1.0,
            engine_ns: 1.0,
        };
        p.fitted = vec![fit.clone(), fit.clone(), fit];
        let text = serde_json::to_string(&c).unwrap();
        assert!(
            Calibration::parse(&text)
                .unwrap_err()
                .contains("more than 2")
        );
        c.profiles.retain(|p| p.id != DEFAULT_PROFILE);
        let text = serde_json::to_string(&c).unwrap();
        assert!(
            Calibration::parse(&text)
                .unwrap_err()
                .contains("no profile")
        );
    }

    #[test]
    fn a_profile_scales_the_engine_prices_and_adds_its_fixed_cost_to_the_commit() {
        let c = committed();
        let mut p = c.engine_profile();
        let base = c.costs(&p);
        p.scale = 3.0;
        p.txn_ns = 1000.0;
        let scaled = c.costs(&p);
        let expect = (c.host_ns(PriceKey::Get) * 3.0).round() as u64;
        assert_eq!(scaled.get_ns, expect);
        assert_eq!(
            scaled.page_io_ns_per_kb, base.page_io_ns_per_kb,
            "bytes are not scaled"
        );
        assert!(scaled.commit_ns >= base.commit_ns * 3 + 998);
    }
}
