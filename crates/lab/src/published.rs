//! The papers' published figures, carried inside the program.
//!
//! `data/published.toml` is a copy of the papers' `results.toml`: the
//! device-level figures presets are calibrated from, and the workload-level
//! figures experiments must predict. It is compiled in, so `flashlab
//! reproduce` works on a machine without the papers.

use std::sync::OnceLock;

/// The published figures as TOML text.
pub const PUBLISHED_TOML: &str = include_str!("../data/published.toml");

fn table() -> &'static toml::Table {
    static TABLE: OnceLock<toml::Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        PUBLISHED_TOML
            .parse()
            .expect("data/published.toml is valid TOML (tested)")
    })
}

/// A value at a dotted path such as `devices.enterprise_ssd_2010.seq_read_mb_s`.
pub fn value(path: &str) -> Option<&'static toml::Value> {
    let mut parts = path.split('.');
    let mut current = table().get(parts.next()?)?;
    for part in parts {
        current = current.as_table()?.get(part)?;
    }
    Some(current)
}

/// A number at a dotted path (integers are widened).
pub fn number(path: &str) -> Option<f64> {
    as_f64(value(path)?)
}

/// The `index`-th number of an array at a dotted path.
pub fn number_at(path: &str, index: usize) -> Option<f64> {
    as_f64(value(path)?.as_array()?.get(index)?)
}

/// All numbers of an array at a dotted path.
pub fn numbers(path: &str) -> Option<Vec<f64>> {
    value(path)?.as_array()?.iter().map(as_f64).collect()
}

/// A string at a dotted path.
pub fn text(path: &str) -> Option<&'static str> {
    value(path)?.as_str()
}

fn as_f64(value: &toml::Value) -> Option<f64> {
    match value {
        toml::Value::Integer(i) => Some(*i as f64),
        toml::Value::Float(f) => Some(*f),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_figures_parse_and_resolve() {
        assert_eq!(number("devices.hdd_seagate_7200_10.rpm"), Some(7200.0));
        assert_eq!(number("lee2008.table3_tpcb.ssd_log_write_ms"), Some(1.3));
        assert_eq!(
            number_at("devices.ssd_array_2010.seq_read_mb_s", 1),
            Some(672.0)
        );
        assert!(text("devices.enterprise_ssd_2010.source").is_some());
        assert_eq!(number("devices.no_such_device.rpm"), None);
    }
}
