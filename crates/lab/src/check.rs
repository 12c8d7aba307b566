//! Fidelity checks: a measured value beside a published one, with a range.
//!
//! Every figure an experiment reproduces becomes a [`Check`]: the paper, the
//! published value, the value flashlab measured, the range it must land in,
//! and PASS or MISS. A MISS is reported with its reason, never hidden.

use serde::Serialize;

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
    /// Inclusive pass range.
    pub range: [f64; 2],
    pub pass: bool,
    /// Why a value misses, or how it is derived, when that needs saying.
    pub note: String,
}

impl Check {
    /// Pass when `measured` is within `pct` percent of `published`.
    pub fn within_pct(
        id: &str,
        paper: &str,
        what: &str,
        unit: &str,
        published: f64,
        measured: f64,
        pct: f64,
    ) -> Check {
        let delta = published.abs() * pct / 100.0;
        Check::in_range(
            id,
            paper,
            what,
            unit,
            published,
            measured,
            published - delta,
            published + delta,
        )
    }

    /// Pass when `lo <= measured <= hi`.
    #[allow(clippy::too_many_arguments)]
    pub fn in_range(
        id: &str,
        paper: &str,
        what: &str,
        unit: &str,
        published: f64,
        measured: f64,
        lo: f64,
        hi: f64,
    ) -> Check {
        Check {
            id: id.to_string(),
            paper: paper.to_string(),
            what: what.to_string(),
            unit: unit.to_string(),
            published,
            measured,
            range: [lo, hi],
            pass: measured.is_finite() && lo <= measured && measured <= hi,
            note: String::new(),
        }
    }

    /// Attach an explanation.
    pub fn with_note(mut self, note: &str) -> Check {
        self.note = note.to_string();
        self
    }

    /// "PASS" or "MISS".
    pub fn verdict(&self) -> &'static str {
        if self.pass { "PASS" } else { "MISS" }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_pct_bounds_are_inclusive() {
        assert!(Check::within_pct("a", "p", "w", "ms", 8.0, 10.0, 25.0).pass);
        assert!(!Check::within_pct("a", "p", "w", "ms", 8.0, 10.1, 25.0).pass);
        assert!(!Check::within_pct("a", "p", "w", "ms", 8.0, f64::NAN, 25.0).pass);
    }
}
