//! The `flashlab` program: outputs, and one-line errors with exit code 2
//! for bad input.

mod common;
use common::*;

#[test]
fn devices_lists_every_preset_with_sources() {
    let out = flashlab(&["devices", "--json"]);
    let json = success_json(&out);
    let names: Vec<&str> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    let mut presets = flashlab_devices::presets::model_names();
    presets.push(flashlab_devices::presets::MEMORY);
    assert_eq!(presets.len(), 10, "{presets:?}");
    for preset in presets {
        assert!(names.contains(&preset), "{preset} missing from {names:?}");
    }
}

/// `flashlab devices FILE` lists that device alone, every parameter with
/// its source in the file (the key that set it, or its default).
#[test]
fn devices_lists_a_device_file_with_its_keys() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "mine.toml",
        "kind = \"ssd\"\nname = \"mine\"\nchannels = 2\nchips_per_channel = 1\n\
         dies_per_chip = 1\nplanes_per_die = 2\nblocks_per_plane = 64\npage_bytes = 4096\n\
         erase_unit_bytes = 262144\nover_provisioning = 0.1\npage_read_us = 50.0\n\
         page_program_us = 500.0\nblock_erase_ms = 3.0\nchannel_mb_s = 200.0\n\
         host_mb_s = 300.0\nreads_first = true\nread_ahead_pages = 8\n\
         ftl = \"super-block\"\nerase_units_per_super_block = 2\n",
    );
    let out = flashlab(&["devices", &file]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("mine  ("), "{text}");
    let row = |name: &str| {
        let found = lines
            .iter()
            .find(|l| l.split_whitespace().next() == Some(name));
        found
            .unwrap_or_else(|| panic!("{name} not listed:\n{text}"))
            .to_string()
    };
    assert!(row("reads_first").contains("true"), "{text}");
    assert!(row("read_ahead_pages").ends_with("mine.toml: read_ahead_pages"));
    assert!(row("erase_units_per_super_block").contains(" 2 "), "{text}");
    assert!(row("log_super_blocks").ends_with("log_super_blocks not set, default"));
    for line in lines.iter().skip(1).filter(|l| !l.trim().is_empty()) {
        assert!(line.contains("device file"), "{line}");
    }
    assert!(!text.contains("hdd-2008"), "only the file's device: {text}");
}

#[test]
fn unknown_preset_is_bad_input() {
    assert_bad_input(
        &flashlab(&["characterize", "--device", "floppy"]),
        &["unknown device 'floppy'"],
    );
    assert_bad_input(
        &flashlab(&["replay", "--device", "floppy", "--synthetic", "10"]),
        &["floppy"],
    );
}

#[test]
fn characterize_json_has_the_documented_shape_and_is_deterministic() {
    let args = [
        "characterize",
        "--device",
        "hdd-2010",
        "--requests",
        "200",
        "--json",
    ];
    let a = flashlab(&args);
    assert!(a.status.success(), "{}", stderr(&a));
    let json: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
    assert_eq!(json["device"], "hdd-2010");
    for key in [
        "block_kb",
        "read_mb_s",
        "write_mb_s",
        "read_latency_ms",
        "write_latency_ms",
    ] {
        assert!(
            json["sequential"][0].get(key).is_some(),
            "sequential lacks {key}"
        );
    }
    for key in [
        "block_kb",
        "queue_depth",
        "read_iops",
        "write_iops",
        "read_latency_ms",
        "write_latency_ms",
    ] {
        assert!(json["random"][0].get(key).is_some(), "random lacks {key}");
    }
    let b = flashlab(&args);
    assert_eq!(a.stdout, b.stdout, "same seed, same figures");
}

/// A bad line of an MQSim trace is bad input naming the line.
#[test]
fn a_bad_trace_line_is_bad_input_naming_the_line() {
    // (case, device, trace, what the error names)
    let cases: [(&str, &str, &str, &[&str]); 2] = [
        (
            "a malformed line",
            "ssd-2010",
            "0 0 0 8 1\n1000 0 8 x 0\n",
            &["t.mqsim:2"],
        ),
        (
            "a request beyond the capacity",
            "ssd-2008",
            "0 0 0 8 1\n1000 0 999999999999 8 0\n",
            &["line 2", "capacity"],
        ),
    ];
    for (case, device, text, needles) in cases {
        // Shown with the failure of the case it names.
        println!("case: {case}");
        let (_dir, trace) = temp_file("t.mqsim", text);
        assert_bad_input(
            &flashlab(&[
                "replay", "--device", device, "--trace", &trace, "--format", "mqsim",
            ]),
            needles,
        );
    }
}

#[test]
fn impossible_geometry_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let spec = "kind = \"ssd\"\nname = \"bad\"\nchannels = 0\nchips_per_channel = 1\ndies_per_chip = 1\nplanes_per_die = 1\nblocks_per_plane = 8\npage_bytes = 4096\nerase_unit_bytes = 262144\nover_provisioning = 0.1\npage_read_us = 50.0\npage_program_us = 500.0\nblock_erase_ms = 3.0\nchannel_mb_s = 100.0\nhost_mb_s = 100.0\n";
    let zero = write(dir.path(), "zero.toml", spec);
    assert_bad_input(
        &flashlab(&["characterize", "--device", &zero]),
        &["zero.toml", "zero channels"],
    );
    let big = write(
        dir.path(),
        "big.toml",
        &spec
            .replace("channels = 0", "channels = 1")
            .replace("262144", "2048"),
    );
    assert_bad_input(
        &flashlab(&["characterize", "--device", &big]),
        &["big.toml", "larger than the erase unit"],
    );
}

#[test]
fn replay_json_keys_and_every_request_accounted_for() {
    let out = flashlab(&[
        "replay",
        "--device",
        "ssd-2010",
        "--synthetic",
        "20000",
        "--json",
    ]);
    let json = success_json(&out);
    assert_eq!(json["requests"], 20000);
    for key in ["iops", "latency_us", "waf", "gc_runs", "erases"] {
        assert!(json.get(key).is_some(), "no {key}");
    }
    for key in ["mean", "p50", "p99", "max"] {
        assert!(json["latency_us"].get(key).is_some(), "no latency_us.{key}");
    }
}

#[test]
fn trace_generate_convert_replay_and_plot() {
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name).display().to_string();
    succeed(&[
        "trace",
        "generate",
        "--count",
        "500",
        "--to",
        "flashlab",
        "--out",
        &d("g.csv"),
    ]);
    succeed(&[
        "trace",
        "convert",
        &d("g.csv"),
        "--to",
        "mqsim",
        "--out",
        &d("g.mqsim"),
    ]);
    let replay_latency = |trace: &str, format: &[&str]| {
        let replay = ["replay", "--device", "ssd-2010", "--trace", trace, "--json"];
        success_json(&flashlab(&[&replay[..], format].concat()))["latency_us"].clone()
    };
    assert_eq!(
        replay_latency(&d("g.csv"), &[]),
        replay_latency(&d("g.mqsim"), &["--format", "mqsim"]),
        "the same requests in two formats replay alike"
    );
    succeed(&["plot", &d("g.csv"), "--out", &d("g.svg")]);
    let svg = std::fs::read_to_string(d("g.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.len() > 1000);
    assert_bad_input(
        &flashlab(&["plot", &d("g.csv"), "--out", &d("g.gif")]),
        &["g.gif"],
    );
}

#[test]
fn check_passes_a_healthy_database_and_fails_a_damaged_one() {
    let (dir, db_dir) = temp_database();
    let out = flashlab(&["check", &db_dir]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("ok"));
    // Flip a byte of page 2 of the data file: a checksum mismatch.
    let data = dir.path().join("data.data");
    let mut bytes = std::fs::read(&data).unwrap();
    bytes[2 * 4096 + 100] ^= 0x40;
    std::fs::write(&data, &bytes).unwrap();
    let out = flashlab(&["check", &db_dir]);
    assert_ne!(out.status.code(), Some(0));
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        text.contains("page 2") && text.contains("checksum"),
        "{text}"
    );
}

#[test]
fn truncated_or_missing_files_and_unknown_versions_are_bad_input() {
    let (dir, db_dir) = temp_database();
    let log = dir.path().join("log.wal");
    let len = std::fs::metadata(&log).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    assert_bad_input(&flashlab(&["check", &db_dir]), &["log.wal", "truncated"]);
    std::fs::remove_file(&log).unwrap();
    assert_bad_input(&flashlab(&["check", &db_dir]), &["log.wal", "missing"]);
    let manifest = dir.path().join("flashlab.manifest");
    let text = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace("format_version = 1", "format_version = 9");
    std::fs::write(&manifest, text).unwrap();
    assert_bad_input(
        &flashlab(&["check", &db_dir]),
        &["flashlab.manifest", "version 9"],
    );
    let empty = tempfile::tempdir().unwrap();
    assert_bad_input(
        &flashlab(&["check", &empty.path().display().to_string()]),
        &["not a flashlab database"],
    );
}

/// The offsets of the log's master-record copies in `log.wal` (log
/// sectors 0 and 1, whatever the sector size).
fn master_copies(log: &[u8]) -> Vec<usize> {
    (0..log.len().min(1 << 16))
        .step_by(512)
        .filter(|&at| log[at..].starts_with(b"FLSHLOG\0"))
        .collect()
}

/// Both master-record copies damaged, and a log of format 2 (whose
/// checksum left out the version): `check` names each, exits 2, and writes
/// nothing. (A directory's log is checked before the open, `db::roles`;
/// devices opened directly meet WAL-14.)
#[test]
fn a_log_without_a_valid_master_record_is_refused_naming_why() {
    let (dir, db_dir) = temp_database();
    let log = dir.path().join("log.wal");
    let healthy = std::fs::read(&log).unwrap();
    let copies = master_copies(&healthy);
    assert_eq!(copies.len(), 2, "two master copies");
    let mut damaged = healthy.clone();
    for &at in &copies {
        damaged[at + 300] ^= 0x04;
    }
    std::fs::write(&log, &damaged).unwrap();
    assert_bad_input(
        &flashlab(&["check", &db_dir]),
        &[
            "log.wal",
            "neither copy of the log's master record is valid",
        ],
    );
    assert_eq!(std::fs::read(&log).unwrap(), damaged, "check wrote the log");
    // Format 2: version 2, sealed over bytes 16..512 only.
    let mut old = healthy.clone();
    for &at in &copies {
        old[at + 8..at + 12].copy_from_slice(&2u32.to_le_bytes());
        let crc = crc32c::crc32c(&old[at + 16..at + 512]);
        old[at + 12..at + 16].copy_from_slice(&crc.to_le_bytes());
    }
    std::fs::write(&log, &old).unwrap();
    assert_bad_input(
        &flashlab(&["check", &db_dir]),
        &["log format version 2 is not supported"],
    );
}

#[test]
fn query_reads_a_table_and_refuses_time_travel_past_a_restart() {
    let (_dir, db_dir) = temp_database();
    let out = flashlab(&[
        "query", &db_dir, "--table", "kv", "--prefix", "0001", "--json",
    ]);
    let json = success_json(&out);
    assert_eq!(json["total"], 10);
    assert_bad_input(
        &flashlab(&["query", &db_dir, "--table", "kv", "--as-of", "0"]),
        &["snapshot too old"],
    );
    assert_bad_input(
        &flashlab(&["query", &db_dir, "--table", "nope"]),
        &["no table 'nope'"],
    );
}

/// `bench tpcc`'s bad input: one line naming the option, exit 2, and
/// nothing written in the `--real` directory.
#[test]
fn tpcc_bad_input_is_one_line_naming_the_option() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let rows: [(&[&str], &str); 32] = [
        (
            &["--ipl-commit-force", "maybe"],
            "--ipl-commit-force 'maybe'",
        ),
        (&["--ipl-selection", "maybe"], "--ipl-selection 'maybe'"),
        (
            &["--ipl-selection", "off"],
            "--ipl-selection off needs --data-store ipl",
        ),
        (
            &["--ipl-commit-force", "off"],
            "--ipl-commit-force off needs --data-store ipl",
        ),
        (&["--warehouses", "0"], "--warehouses"),
        (&["--data-store", "bogus"], "--data-store 'bogus'"),
        (&["--write-scheduler", "maybe"], "--write-scheduler 'maybe'"),
        (
            &["--data-store", "log-structured", "--write-through", "maybe"],
            "--write-through 'maybe'",
        ),
        (
            &["--write-through", "on"],
            "--write-through need --data-store log-structured",
        ),
        (
            &["--data-store", "ipl"],
            "--data-store ipl needs a raw NAND",
        ),
        (
            &["--data-device", "nand-k9wag08u1a"],
            "--data-device nand-k9wag08u1a is raw NAND",
        ),
        (
            &[
                "--data-store",
                "ipl",
                "--data-device",
                "nand-k9wag08u1a",
                "--ipl-log-segment-kb",
                "12",
            ],
            "--ipl-log-segment-kb 12",
        ),
        (
            &["--ipl-log-segment-kb", "8"],
            "--ipl-log-segment-kb needs --data-store ipl",
        ),
        (
            &["--data-store", "log-structured", "--cleaning", "lazy"],
            "--cleaning 'lazy'",
        ),
        (
            &["--data-store", "log-structured", "--segment-bytes", "12345"],
            "--segment-bytes 12345",
        ),
        (
            &[
                "--data-store",
                "log-structured",
                "--segment-bytes",
                "1073741824",
            ],
            "--segment-bytes 1073741824",
        ),
        (
            &["--cleaning", "greedy"],
            "--segment-bytes, --cleaning and --write-through",
        ),
        (&["--warehouses", "100000"], "--warehouses"),
        (&["--mix", "45,43,4,4,5"], "--mix"),
        (&["--mix", "50,50"], "--mix"),
        (&["--page-bytes", "2048"], "--page-bytes"),
        (&["--terminals", "0"], "--terminals"),
        (&["--items", "0"], "--items"),
        (
            &["--customers-per-district", "5000"],
            "--customers-per-district",
        ),
        (&["--terminals", "5", "--clients", "5"], "--clients"),
        (
            &["--table-page-bytes", "stock=3000"],
            "--table-page-bytes stock=3000",
        ),
        (
            &["--table-page-bytes", "stock"],
            "--table-page-bytes 'stock'",
        ),
        (
            &["--table-page-bytes", "stocks=4096"],
            "no TPC-C table 'stocks'",
        ),
        (
            &["--table-page-bytes", "customer=2048"],
            "too small for customer rows",
        ),
        (&["--active-warehouses", "2"], "--active-warehouses 2"),
        (&["--think", "--think-divisor", "0"], "--think-divisor 0"),
        (&["--connections", "1000000"], "--connections 1000000"),
    ];
    for (extra, option) in rows {
        for real in [false, true] {
            let mut args = vec!["bench", "tpcc", "--duration", "1s"];
            if real {
                args.extend(["--real", d]);
            }
            args.extend_from_slice(extra);
            assert_bad_input(&flashlab(&args), &[option]);
        }
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing written"
    );
}

/// A simulated TPC-C run of 3 s (1 s of warm-up) at a small scale: 1,000
/// items, 100 customers a district.
const SMALL_TPCC: [&str; 10] = [
    "bench",
    "tpcc",
    "--items",
    "1000",
    "--customers-per-district",
    "100",
    "--duration",
    "3s",
    "--warmup",
    "1s",
];

/// `bench tpcc` with its data space In-Page Logging on raw NAND: TPC-C
/// runs consistent, and the store's counters are reported.
#[test]
fn tpcc_bench_runs_on_an_ipl_space() {
    let ipl = [
        "--data-store",
        "ipl",
        "--data-device",
        "nand-k9wag08u1a",
        "--ipl-log-segment-kb",
        "4",
        "--buffer-mb",
        "1",
        "--json",
    ];
    let out = flashlab(&[&SMALL_TPCC[..], &ipl].concat());
    let json = success_json(&out);
    assert_eq!(json["consistency"], "ok");
    assert!(json["tpcc"]["tpmc"].as_f64().unwrap() > 0.0);
    let store = &json["data_stores"][0];
    assert_eq!(store["store"], "ipl");
    let counter = |name: &str| {
        store["counters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c[0] == name)
            .unwrap_or_else(|| panic!("no counter {name}"))[1]
            .as_f64()
            .unwrap()
    };
    assert!(counter("sector_writes") > 0.0);
    assert!(counter("merges") > 0.0);
    assert!(counter("avg_record_bytes") > 0.0);
    assert!(
        counter("commit_groups") > 0.0,
        "commits force their sectors"
    );
}

/// A small simulated `bench tpcc --json`: tpmC, the five types, consistency.
#[test]
fn tpcc_bench_reports_tpmc_and_the_five_types() {
    let pages = [
        "--warehouses",
        "2",
        "--table-page-bytes",
        "stock=4096",
        "--table-page-bytes",
        "order_line=16384",
        "--json",
    ];
    let out = flashlab(&[&SMALL_TPCC[..], &pages].concat());
    let json = success_json(&out);
    assert_eq!(json["consistency"], "ok");
    assert_eq!(json["clients"], 20, "10 terminals per warehouse");
    let tpcc = &json["tpcc"];
    assert!(tpcc["tpmc"].as_f64().unwrap() > 0.0);
    assert!(tpcc["tpm_total"].as_f64().unwrap() > tpcc["tpmc"].as_f64().unwrap());
    let types: Vec<&str> = tpcc["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "new-order",
            "payment",
            "order-status",
            "delivery",
            "stock-level"
        ]
    );
    assert!(tpcc["transactions"][0]["latency_ms"]["p90"].is_number());
}

/// A TPC-C run of one second at a tiny scale.
const TINY_TPCC: [&str; 12] = [
    "--warehouses",
    "1",
    "--items",
    "500",
    "--customers-per-district",
    "50",
    "--terminals",
    "4",
    "--duration",
    "1s",
    "--warmup",
    "0s",
];

/// `bench tpcc --real DIR` at a tiny scale: consistent, and the fresh
/// database directory is removed afterwards.
#[test]
fn tpcc_bench_runs_in_the_real_world() {
    let dir = tempfile::tempdir().unwrap();
    let real = ["bench", "tpcc", "--real", dir.path().to_str().unwrap()];
    let out = flashlab(&[&real[..], &TINY_TPCC, &["--json"]].concat());
    let json = success_json(&out);
    assert_eq!(
        (json["world"].as_str(), json["consistency"].as_str()),
        (Some("real"), Some("ok"))
    );
    assert!(json["tpcc"]["tpmc"].as_f64().unwrap() > 0.0);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// `bench tpcc --data-store log-structured` in both worlds (issue 15):
/// consistent, and the data store's report names the store and counts
/// fewer write requests than pages (pages go out in partial segments; a
/// 1 MB buffer makes the run write pages back).
#[test]
fn tpcc_bench_runs_on_a_log_structured_data_space_in_both_worlds() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().to_str().unwrap().to_string();
    for world in [None, Some(real.as_str())] {
        let mut args = vec!["bench", "tpcc"];
        args.extend(TINY_TPCC);
        args.extend([
            "--page-bytes",
            "4096",
            "--buffer-mb",
            "1",
            "--data-store",
            "log-structured",
            "--segment-bytes",
            "262144",
            "--cleaning",
            "cost-benefit",
            "--json",
        ]);
        if let Some(real) = world {
            args.extend(["--real", real]);
        }
        let out = flashlab(&args);
        assert!(out.status.success(), "{world:?}: {}", stderr(&out));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["consistency"], "ok", "{world:?}");
        assert!(json["tpcc"]["tpmc"].as_f64().unwrap() > 0.0);
        let store = &json["data_stores"][0];
        assert_eq!(store["store"], "log-structured");
        let stats = &store["stats"];
        let (writes, pages) = (
            stats["device_writes"].as_u64().unwrap(),
            stats["pages_written"].as_u64().unwrap(),
        );
        assert!(pages > 0 && writes < pages, "{world:?}: {stats}");
    }
}
