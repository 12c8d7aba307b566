//! Fidelity checks: a measured value beside a published one, under one rule.
//!
//! Every figure an experiment reproduces becomes a [`Check`]: the paper, the
//! published value, the value flashlab measured, the range the rule gives,
//! and PASS or MISS. A MISS is reported with its reason, never hidden.
//!
//! # The rule
//!
//! There is one rule for every check, stated on the report's first screen
//! ([`RULE`]) and applied here, by the constructors below; no experiment
//! chooses its own range.
//!
//! - **A published value** (an absolute figure: ms, MB/s, TPS, seconds)
//!   passes when the measured value is within ±[`TOLERANCE_PCT`] percent of
//!   it: [`Check::value`].
//! - **A published ratio** (SSD over disk, quad over dual core) passes when
//!   the measured ratio is within ±[`TOLERANCE_PCT`] percent of the
//!   published ratio: [`Check::ratio`]. It is the value rule applied to a
//!   ratio; it is named apart so the report can say which is which. An
//!   effect the paper states as a percentage ("30% more") is checked as
//!   that percentage with [`Check::value`]: ±25% of a ratio near 1 would
//!   pass no effect at all.
//! - **A published bound** (the paper says "at least twice", "less
//!   sensitive than") passes when the bound holds, with no slack:
//!   [`Check::at_least`], [`Check::at_most`].
//! - **A published optimum** (the best cluster size) passes when the
//!   measured optimum is within ±[`TOLERANCE_PCT`] percent of the published
//!   one *and* the sweep extends past the measured optimum on both sides,
//!   so it is a true optimum and not the end of the sweep:
//!   [`Check::optimum`]. When the paper's text gives the optimum as a range
//!   ("in the range of 64 to 128 KBytes"), the measured optimum passes
//!   anywhere in that range, with no slack, under the same sweep condition:
//!   [`Check::optimum_in`].
//!
//! A value that cannot be measured (NaN) misses.
//!
//! # Kinds
//!
//! A check is [`Kind::Calibration`] when the published figure is one a
//! device preset or the CPU model was set from (the preset against its own
//! sources: it shows the model does what it was built to do, not that it
//! predicts anything), and [`Kind::Prediction`] otherwise (a workload
//! result nothing was set from). The report counts them apart. A parameter
//! set from a single published row is named on that row's check with
//! [`Check::fitted`], whether the check passes or not.
//!
//! A check whose measured value the run's construction already pins (a
//! probability that cannot leave (0, 1]) is [`Kind::Sanity`]: an assertion
//! that the run is sound, shown apart and counted in neither predictions
//! nor calibration ([`Check::sanity`]), since no wrong model can fail it.
//!
use serde::{Deserialize, Serialize};

/// The tolerance of the rule, in percent of the published value or ratio.
pub const TOLERANCE_PCT: f64 = 25.0;

/// The rule in words, as the report's first screen states it.
pub const RULE: &str = "One rule for every check. A published value (ms, MB/s, TPS, s) passes when the measured value is within ±25% of it. \
A published ratio passes when the measured ratio is within ±25% of the published ratio; an effect the paper states as a percentage (\"30% more\") is checked as that percentage, under the value rule, since ±25% of a ratio near 1 would pass no effect at all. \
A published bound (\"at least 2x\") passes when it holds, with no slack. \
A published optimum passes when the measured optimum is within ±25% of it and the sweep extends past the measured optimum on both sides; an optimum the text gives as a range (\"64 to 128 KBytes\") passes anywhere in that range, with no slack, under the same condition on the sweep. \
Sanity assertions (values the run's construction pins, such as a probability in (0, 1]) are shown apart and counted in neither predictions nor calibration. \
A check that fails the rule is a MISS, with its reason in the note; no range is widened to make a check pass.";

/// Calibration or prediction.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A preset (or the CPU model) against the figure it was set from.
    Calibration,
    /// A workload result nothing was set from.
    #[default]
    Prediction,
    /// A value the run's construction pins: it shows the run is sound and
    /// predicts nothing, so it is counted in neither of the others.
    Sanity,
}

impl Kind {
    /// "calibration" or "prediction".
    pub fn label(self) -> &'static str {
        match self {
            Kind::Calibration => "calibration",
            Kind::Prediction => "prediction",
            Kind::Sanity => "sanity",
        }
    }
}

/// Which clause of the rule a check is held to.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Form {
    /// An absolute value, ±25%.
    #[default]
    Value,
    /// A ratio, ±25% of the published ratio.
    Ratio,
    /// A bound that must hold.
    Bound,
    /// The optimum of a sweep.
    Optimum,
    /// The optimum of a sweep, published as a range.
    #[serde(rename = "optimum_range")]
    OptimumRange,
}

/// One measured value against one published value.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Check {
    /// Stable identifier, e.g. `characterize.ssd-2010.rand_read_4k_ms`.
    pub id: String,
    /// Paper and table or figure, e.g. `petrov2010 Table 1`.
    pub paper: String,
    /// What is compared, in words.
    pub what: String,
    pub unit: String,
    pub published: f64,
    pub measured: f64,
    /// Inclusive pass range, as the rule gives it.
    pub range: [f64; 2],
    pub pass: bool,
    /// Calibration or prediction.
    pub kind: Kind,
    /// The clause of the rule applied.
    pub form: Form,
    /// Parameters set from this published row ("name: how"), shown on the
    /// report whether the check passes or not.
    pub fitted: Vec<String>,
    /// Why a value misses, or how it is derived, when that needs saying.
    pub note: String,
}

fn pct_range(published: f64) -> [f64; 2] {
    let delta = published.abs() * TOLERANCE_PCT / 100.0;
    [published - delta, published + delta]
}

impl Check {
    /// A check on `[id, paper, what, unit]`: pass when `measured` is a
    /// number inside `range`.
    fn new(
        subject: [&str; 4],
        published: f64,
        measured: f64,
        range: [f64; 2],
        form: Form,
    ) -> Check {
        let [id, paper, what, unit] = subject;
        Check {
            id: id.to_string(),
            paper: paper.to_string(),
            what: what.to_string(),
            unit: unit.to_string(),
            published,
            measured,
            range,
            pass: measured.is_finite() && range[0] <= measured && measured <= range[1],
            kind: Kind::Prediction,
            form,
            fitted: Vec::new(),
            note: String::new(),
        }
    }

    /// A check on `subject` whose range is ±[`TOLERANCE_PCT`]% of `published`.
    fn near(subject: [&str; 4], published: f64, measured: f64, form: Form) -> Check {
        Check::new(subject, published, measured, pct_range(published), form)
    }

    /// A published absolute value: pass within ±[`TOLERANCE_PCT`]%.
    pub fn value(
        id: &str,
        paper: &str,
        what: &str,
        unit: &str,
        published: f64,
        measured: f64,
    ) -> Check {
        Check::near([id, paper, what, unit], published, measured, Form::Value)
    }

    /// A published ratio (unit "x"): pass within ±[`TOLERANCE_PCT`]% of it.
    pub fn ratio(id: &str, paper: &str, what: &str, published: f64, measured: f64) -> Check {
        Check::near([id, paper, what, "x"], published, measured, Form::Ratio)
    }

    /// A bound check on `[id, paper, what, unit]`: pass when `got` is in `range`.
    fn bounded(subject: [&str; 4], bound: f64, got: f64, range: [f64; 2]) -> Check {
        Check::new(subject, bound, got, range, Form::Bound)
    }

    /// A published lower bound: pass when `got >= bound`.
    pub fn at_least(id: &str, paper: &str, what: &str, unit: &str, bound: f64, got: f64) -> Check {
        Check::bounded([id, paper, what, unit], bound, got, [bound, f64::INFINITY])
    }

    /// A published upper bound: pass when `got <= bound`.
    pub fn at_most(id: &str, paper: &str, what: &str, unit: &str, bound: f64, got: f64) -> Check {
        Check::bounded(
            [id, paper, what, unit],
            bound,
            got,
            [f64::NEG_INFINITY, bound],
        )
    }

    /// A published optimum of a sweep: `sweep` holds (x, cost) points, lower
    /// cost better; the measured optimum is the x of the lowest cost (the
    /// first, on a tie). Pass when it is within ±[`TOLERANCE_PCT`]% of
    /// `published` and the sweep has a point below and above it. The note
    /// says which part failed.
    pub fn optimum(
        id: &str,
        paper: &str,
        what: &str,
        unit: &str,
        published: f64,
        sweep: &[(f64, f64)],
    ) -> Check {
        let best = sweep_optimum(sweep);
        Check::near([id, paper, what, unit], published, best, Form::Optimum).past_both_ends(sweep)
    }

    /// An optimum the paper's text gives as a range, `lo` to `hi` ("in the
    /// range of 64 to 128 KBytes"): pass when the measured optimum of
    /// `sweep` (as in [`Check::optimum`]) lies in it, with no slack, and
    /// the sweep has a point below and above it. The published value is
    /// `lo`; the range is `[lo, hi]`.
    pub fn optimum_in(
        id: &str,
        paper: &str,
        what: &str,
        unit: &str,
        [lo, hi]: [f64; 2],
        sweep: &[(f64, f64)],
    ) -> Check {
        let best = sweep_optimum(sweep);
        Check::new(
            [id, paper, what, unit],
            lo,
            best,
            [lo, hi],
            Form::OptimumRange,
        )
        .past_both_ends(sweep)
    }

    /// Miss, with the reason in the note, when the measured optimum is at an
    /// end of `sweep` (it is not shown to be an optimum).
    fn past_both_ends(mut self, sweep: &[(f64, f64)]) -> Check {
        let best = self.measured;
        let below = sweep.iter().any(|p| p.0 < best);
        let above = sweep.iter().any(|p| p.0 > best);
        if best.is_finite() && !(below && above) {
            self.pass = false;
            let lo = sweep.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
            let hi = sweep.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
            self.note = format!(
                "the measured optimum is at the {} end of the sweep ({} to {} {}): it is not shown to be an optimum",
                if above { "low" } else { "high" },
                fmt_num(lo),
                fmt_num(hi),
                self.unit,
            );
        }
        self
    }

    /// Mark the check as calibration: the published figure is one a model
    /// parameter was set from.
    pub fn calibration(mut self) -> Check {
        self.kind = Kind::Calibration;
        self
    }

    /// Name a parameter set from this published row ("name: how"); marks
    /// the check as calibration.
    pub fn fitted(mut self, parameter: &str) -> Check {
        self.fitted.push(parameter.to_string());
        self.kind = Kind::Calibration;
        self
    }

    /// Mark the check as a sanity assertion: its value is pinned by how the
    /// run is built, so it is shown apart and counted in neither
    /// predictions nor calibration.
    pub fn sanity(mut self) -> Check {
        self.kind = Kind::Sanity;
        self
    }

    /// Attach an explanation (replacing any note).
    pub fn with_note(mut self, note: &str) -> Check {
        self.note = note.to_string();
        self
    }

    /// Attach an explanation only if the check misses.
    pub fn with_miss_note(self, note: &str) -> Check {
        if self.pass {
            self
        } else {
            self.with_note(note)
        }
    }

    /// True when the check's range and verdict are what the rule gives for
    /// its form and published value (nothing changed them after
    /// construction).
    pub fn follows_rule(&self) -> bool {
        let range = match self.form {
            Form::Value | Form::Ratio | Form::Optimum => pct_range(self.published),
            Form::Bound | Form::OptimumRange => self.range,
        };
        let bound_ok = match self.form {
            Form::Bound => self.range[0] == self.published || self.range[1] == self.published,
            Form::OptimumRange => self.range[0] == self.published && self.range[0] <= self.range[1],
            _ => true,
        };
        let same = |a: f64, b: f64| a == b || (a.is_nan() && b.is_nan());
        let inside =
            self.measured.is_finite() && range[0] <= self.measured && self.measured <= range[1];
        // An optimum may miss inside the range (the sweep's end); nothing
        // may pass outside it.
        let verdict_ok = if matches!(self.form, Form::Optimum | Form::OptimumRange) {
            !self.pass || inside
        } else {
            self.pass == inside
        };
        same(range[0], self.range[0]) && same(range[1], self.range[1]) && bound_ok && verdict_ok
    }

    /// "PASS" or "MISS".
    pub fn verdict(&self) -> &'static str {
        if self.pass { "PASS" } else { "MISS" }
    }
}

/// Passed and total checks of one kind.
pub fn tally<'a>(checks: impl IntoIterator<Item = &'a Check>, kind: Kind) -> (usize, usize) {
    checks
        .into_iter()
        .filter(|c| c.kind == kind)
        .fold((0, 0), |(p, n), c| (p + usize::from(c.pass), n + 1))
}

/// The x of the lowest finite cost of `sweep` (the first, on a tie); NaN
/// when there is none.
fn sweep_optimum(sweep: &[(f64, f64)]) -> f64 {
    sweep
        .iter()
        .filter(|p| p.1.is_finite())
        .fold(None::<(f64, f64)>, |acc, &p| match acc {
            Some(a) if a.1 <= p.1 => Some(a),
            _ => Some(p),
        })
        .map_or(f64::NAN, |p| p.0)
}

/// True when check id `id` is named by `pattern`: the id itself, or a
/// prefix ending in `*` (`lee2007.merges_fall_with_segment.*`) for a family
/// of checks whose members depend on the run.
pub fn id_matches(pattern: &str, id: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => id.starts_with(prefix),
        None => pattern == id,
    }
}

/// A number with precision that suits its size.
pub fn fmt_num(x: f64) -> String {
    if !x.is_finite() {
        return "n/a".to_string();
    }
    let a = x.abs();
    if a >= 1000.0 || a == 0.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 0.1 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_bounds_are_inclusive_and_nan_misses() {
        assert!(Check::value("a", "p", "w", "ms", 8.0, 10.0).pass);
        assert!(Check::value("a", "p", "w", "ms", 8.0, 6.0).pass);
        assert!(!Check::value("a", "p", "w", "ms", 8.0, 10.1).pass);
        assert!(!Check::value("a", "p", "w", "ms", 8.0, 5.9).pass);
        assert!(!Check::value("a", "p", "w", "ms", 8.0, f64::NAN).pass);
    }

    #[test]
    fn values_and_ratios_are_held_to_the_rule() {
        // 11 against 8 is outside ±25%; a ratio's range is ±25% of it.
        assert!(!Check::value("a", "p", "w", "ms", 8.0, 11.0).pass);
        let c = Check::ratio("a", "p", "w", 4.0, 2.5);
        assert!(!c.pass);
        assert_eq!(c.range, [3.0, 5.0]);
        assert_eq!(c.form, Form::Ratio);
    }

    #[test]
    fn bounds_hold_without_slack() {
        assert!(Check::at_least("a", "p", "w", "x", 2.0, 2.0).pass);
        assert!(!Check::at_least("a", "p", "w", "x", 2.0, 1.99).pass);
        assert!(Check::at_most("a", "p", "w", "x", 1.0, 0.5).pass);
        assert!(!Check::at_most("a", "p", "w", "x", 1.0, f64::NAN).pass);
    }

    #[test]
    fn an_optimum_needs_the_sweep_past_it_on_both_sides() {
        let interior = [(32.0, 5.0), (64.0, 4.0), (128.0, 4.5)];
        let c = Check::optimum("a", "p", "w", "KB", 64.0, &interior);
        assert!(c.pass && c.measured == 64.0, "{c:?}");
        let at_end = [(32.0, 5.0), (64.0, 4.5), (128.0, 4.0)];
        let c = Check::optimum("a", "p", "w", "KB", 128.0, &at_end);
        assert!(!c.pass && c.note.contains("high end"), "{c:?}");
        let wrong = [(2.0, 9.0), (16.0, 4.0), (64.0, 5.0)];
        assert!(!Check::optimum("a", "p", "w", "KB", 2.0, &wrong).pass);
    }

    #[test]
    fn an_optimum_range_passes_anywhere_inside_and_can_fail() {
        let at_128 = [(32.0, 5.0), (64.0, 4.5), (128.0, 4.0), (256.0, 4.2)];
        let c = Check::optimum_in("a", "p", "w", "KB", [64.0, 128.0], &at_128);
        assert!(c.pass && c.measured == 128.0 && c.follows_rule(), "{c:?}");
        assert_eq!((c.published, c.range), (64.0, [64.0, 128.0]));
        // Outside the range: a miss, with no slack.
        let at_16 = [(2.0, 5.0), (16.0, 4.0), (64.0, 4.5)];
        let c = Check::optimum_in("a", "p", "w", "KB", [2.0, 4.0], &at_16);
        assert!(!c.pass && c.follows_rule(), "{c:?}");
        // Inside the range but at the end of the sweep: a miss.
        let at_end = [(32.0, 5.0), (64.0, 4.5), (128.0, 4.0)];
        let c = Check::optimum_in("a", "p", "w", "KB", [64.0, 128.0], &at_end);
        assert!(!c.pass && c.note.contains("high end"), "{c:?}");
    }

    #[test]
    fn sanity_checks_count_in_neither_kind_and_patterns_match_families() {
        let checks = [
            Check::at_most("a", "p", "w", "x", 1.0, 0.5).sanity(),
            Check::value("b", "p", "w", "ms", 1.0, 1.0),
        ];
        assert_eq!(tally(&checks, Kind::Prediction), (1, 1));
        assert_eq!(tally(&checks, Kind::Calibration), (0, 0));
        assert_eq!(tally(&checks, Kind::Sanity), (1, 1));
        assert!(id_matches("lee2007.merges.*", "lee2007.merges.1G"));
        assert!(id_matches("lee2007.alpha", "lee2007.alpha"));
        assert!(!id_matches("lee2007.alpha", "lee2007.alpha_positive"));
    }

    #[test]
    fn follows_rule_catches_a_widened_range() {
        let mut c = Check::value("a", "p", "w", "ms", 8.0, 11.0);
        assert!(c.follows_rule() && !c.pass);
        c.range = [4.0, 12.0];
        c.pass = true;
        assert!(!c.follows_rule());
        assert!(Check::at_least("a", "p", "w", "x", 2.0, 3.0).follows_rule());
        let sweep = [(1.0, 3.0), (2.0, 2.0)];
        assert!(Check::optimum("a", "p", "w", "KB", 2.0, &sweep).follows_rule());
    }

    #[test]
    fn fitted_rows_are_calibration_and_kinds_tally_apart() {
        let checks = [
            Check::value("a", "p", "w", "ms", 1.0, 1.0).fitted("x: set from this row"),
            Check::value("b", "p", "w", "ms", 1.0, 2.0),
            Check::value("c", "p", "w", "ms", 1.0, 1.1),
        ];
        assert_eq!(checks[0].kind, Kind::Calibration);
        assert_eq!(tally(&checks, Kind::Calibration), (1, 1));
        assert_eq!(tally(&checks, Kind::Prediction), (1, 2));
    }
}
