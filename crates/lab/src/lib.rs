//! # flashlab-lab: reproducing the papers' measurements
//!
//! The lab runs the experiments of the database-on-flash papers against
//! flashlab's device models and engine, and turns what they record into the
//! papers' kind of evidence: tables of numbers set beside the published
//! ones, fidelity checks that pass or miss, and figures.
//!
//! - [`published`]: the papers' figures, compiled in;
//! - [`calibrate`]: the CPU model's cost ratios, measured (`flashlab calibrate`);
//! - [`check`]: one measured value against one published value, under the
//!   report's one rule;
//! - [`coverage`]: every table and figure of every paper, and what covers it;
//! - [`findings`]: each paper's headline conclusions and their verdicts,
//!   computed from the checks they rest on;
//! - [`chart`] and [`plot`]: line charts, and the time × address scatter
//!   plots of lee2008 (Figures 4-8) and wang2010 (Figure 10), as SVG or PNG.
//!   Every plotters drawing must call [`plot::register_fonts`] first
//!   (plotters measures text through the font bundled with it, since the
//!   build may use no system font libraries);
//! - [`report`]: the HTML page and `results.json`;
//! - [`experiments`]: what `flashlab reproduce` runs;
//! - [`simtest`]: the seeded crash-recovery harness behind `flashlab simtest`.

#![forbid(unsafe_code)]

pub mod bench;
pub mod calibrate;
pub mod chart;
pub mod check;
pub mod coverage;
pub mod experiments;
pub mod filechar;
pub mod findings;
pub mod plot;
pub mod published;
pub mod report;
pub mod reproduce;
pub mod simtest;
