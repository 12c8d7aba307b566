//! # One skeleton for every experiment
//!
//! An experiment runs its simulations, then reports what they measured:
//! tables with the published values beside, figures, checks under the
//! report's one rule, notes that explain misses, the measurements as JSON,
//! and raw files. [`Study`] splits an experiment into those steps. Only
//! [`Study::measure`] runs anything; every other step is a view of its
//! result, so a check cannot depend on something the tables do not show,
//! and each step is small enough to read on its own. [`run_study`] runs the
//! steps in one order and times the whole; every `Study`, entered in the
//! registry with its [`About`] (id, title, paper) by [`described`], is an
//! [`Experiment`] through it.
//!
//! REPORT-1: `results.json` holds only what the seed decides, so the same
//! seed gives the same bytes; host time goes to `timings.json` (any data
//! field named `*host_seconds*`). [`run_study`] refuses an experiment whose
//! text (description, notes, check notes) quotes host time.
//!
//! [`run_study`] also refuses a run whose check ids disagree with the ids
//! the experiment declares in [`super::check_ids::DECLARED`], on which the
//! findings and the coverage table rest.

use super::{Experiment, RunContext};
use crate::check::Check;
use crate::report::{ExperimentResult, Figure, RawFile, Table};
use anyhow::anyhow;

/// An experiment as a measurement and its views (see the module essay).
pub(crate) trait Study {
    /// What the simulations measured.
    type Measured;

    /// Run the simulations.
    fn measure(&self, ctx: &RunContext) -> anyhow::Result<Self::Measured>;
    /// What was run and how, in a paragraph.
    fn description(&self, ctx: &RunContext, m: &Self::Measured) -> String;
    /// The tables, measured values beside published ones.
    fn tables(&self, m: &Self::Measured) -> Vec<Table>;
    /// The checks, built with [`Check`]'s constructors (the report's rule).
    fn checks(&self, m: &Self::Measured) -> Vec<Check>;
    /// The measurements, machine-readable.
    fn data(&self, m: &Self::Measured) -> serde_json::Value;
    /// The figures.
    fn figures(&self, m: &Self::Measured) -> anyhow::Result<Vec<Figure>> {
        let _ = m;
        Ok(Vec::new())
    }
    /// Observations, and the causes of misses.
    fn notes(&self, m: &Self::Measured) -> Vec<String> {
        let _ = m;
        Vec::new()
    }
    /// Files written beside the report (traces, per-run CSVs).
    fn raw_files(&self, m: &Self::Measured) -> anyhow::Result<Vec<RawFile>> {
        let _ = m;
        Ok(Vec::new())
    }
}

/// What an experiment reproduces, beside its [`Study`] in the registry.
#[derive(Clone, Copy, Debug)]
pub(crate) struct About {
    /// Stable identifier, used by `--only`.
    pub(crate) id: &'static str,
    /// What it reproduces, for progress lines and the report.
    pub(crate) title: &'static str,
    /// Where in which paper.
    pub(crate) paper: &'static str,
}

/// A [`Study`] and its [`About`]: an [`Experiment`].
struct Described<S> {
    about: About,
    study: S,
}

/// The registry's entry for `study`, under `id`, `title` and `paper`.
pub(crate) fn described<S: Study + Send + Sync + 'static>(
    study: S,
    id: &'static str,
    title: &'static str,
    paper: &'static str,
) -> Box<dyn Experiment> {
    let about = About { id, title, paper };
    Box::new(Described { about, study })
}

/// Measure, then take every view of the measurement.
pub(crate) fn run_study<S: Study>(
    about: &About,
    study: &S,
    ctx: &RunContext,
) -> anyhow::Result<ExperimentResult> {
    let started = std::time::Instant::now();
    let m = study.measure(ctx)?;
    let result = ExperimentResult {
        id: about.id.into(),
        title: about.title.into(),
        paper: about.paper.into(),
        description: study.description(ctx, &m),
        tables: study.tables(&m),
        figures: study.figures(&m)?,
        checks: study.checks(&m),
        notes: study.notes(&m),
        data: study.data(&m),
        raw_files: study.raw_files(&m)?,
        host_seconds: started.elapsed().as_secs_f64(),
    };
    check_no_host_time(&result)?;
    let made: Vec<&str> = result.checks.iter().map(|c| c.id.as_str()).collect();
    if let Some(why) = super::check_ids::disagreement(about.id, &made) {
        return Err(anyhow!(why));
    }
    Ok(result)
}

/// What quotes host time in a report's text (REPORT-1).
const HOST_TIME_MARKS: [&str; 3] = [" host s ", " host s)", "host seconds"];

/// REPORT-1: no text of `result` quotes host time.
fn check_no_host_time(result: &ExperimentResult) -> anyhow::Result<()> {
    let texts = std::iter::once(&result.description)
        .chain(&result.notes)
        .chain(result.checks.iter().map(|c| &c.note));
    for text in texts {
        if let Some(mark) = HOST_TIME_MARKS.iter().find(|m| text.contains(*m)) {
            return Err(anyhow!(
                "{}: its text quotes host time (\"{}\"), which belongs in timings.json, not results.json (REPORT-1)",
                result.id,
                mark.trim()
            ));
        }
    }
    Ok(())
}

impl<S: Study + Send + Sync> Experiment for Described<S> {
    fn id(&self) -> &'static str {
        self.about.id
    }

    fn title(&self) -> &'static str {
        self.about.title
    }

    fn run(&self, ctx: &RunContext) -> anyhow::Result<ExperimentResult> {
        run_study(&self.about, &self.study, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A study whose note quotes host time, as petrov2010's description
    /// once did ("loaded once (185 host s for both)").
    struct Timed(&'static str);

    impl Study for Timed {
        type Measured = ();

        fn measure(&self, _: &RunContext) -> anyhow::Result<()> {
            Ok(())
        }
        fn description(&self, _: &RunContext, _: &()) -> String {
            "a run".into()
        }
        fn tables(&self, _: &()) -> Vec<Table> {
            Vec::new()
        }
        fn checks(&self, _: &()) -> Vec<Check> {
            Vec::new()
        }
        fn data(&self, _: &()) -> serde_json::Value {
            serde_json::Value::Null
        }
        fn notes(&self, _: &()) -> Vec<String> {
            vec![self.0.into()]
        }
    }

    #[test]
    fn regression_an_experiment_quoting_host_time_is_refused() {
        let ctx = RunContext::new(true, 1);
        let about = About {
            id: "timed",
            title: "timed",
            paper: "none",
        };
        let err = run_study(&about, &Timed("loaded once (185 host s for both)"), &ctx)
            .unwrap_err()
            .to_string();
        assert!(err.contains("REPORT-1"), "{err}");
        assert!(run_study(&about, &Timed("loaded once"), &ctx).is_ok());
    }
}
