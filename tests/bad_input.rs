//! The bad-input table (issue 11): one row per class of bad input, with
//! the arguments, the expected exit code, a fragment the one-line error
//! must contain, and a check that nothing was written or left behind in
//! the working directory. Keep adding rows.

mod common;

use std::process::Command;

use common::{assert_bad_input, names, real_runtime};

/// A small valid SSD device file called `$name`, with `$extra` lines
/// after its required keys.
macro_rules! small_ssd {
    ($name:literal, $extra:literal) => {
        concat!(
            "kind = \"ssd\"\nname = \"",
            $name,
            "\"\nchannels = 2\nchips_per_channel = 1\ndies_per_chip = 1\n\
             planes_per_die = 1\nblocks_per_plane = 64\npage_bytes = 4096\n\
             erase_unit_bytes = 262144\nover_provisioning = 0.1\npage_read_us = 50.0\n\
             page_program_us = 500.0\nblock_erase_ms = 3.0\nchannel_mb_s = 200.0\n\
             host_mb_s = 300.0\n",
            $extra
        )
    };
}

/// One row: `args` run in a fresh directory holding `files` (name,
/// contents); `{dir}` in an argument is replaced by that directory.
struct Row {
    what: &'static str,
    args: &'static [&'static str],
    files: &'static [(&'static str, &'static str)],
    exit: i32,
    message: &'static [&'static str],
}

const FLASHLAB_HEADER: &str =
    "submit_ns,complete_ns,device,space,op,offset_bytes,len_bytes,latency_ns\n";

const ROWS: &[Row] = &[
    Row {
        what: "a buffer pool larger than the machine",
        args: &[
            "bench",
            "tpcb",
            "--buffer-mb",
            "1048576",
            "--duration",
            "1s",
        ],
        files: &[],
        exit: 2,
        message: &["--buffer-mb 1048576", "memory"],
    },
    Row {
        what: "a buffer pool beyond any limit",
        args: &["bench", "tpcb", "--buffer-mb", "18446744073709551615"],
        files: &[],
        exit: 2,
        message: &["--buffer-mb", "limit"],
    },
    Row {
        what: "buffer_bytes of 1 TB in a TOML file",
        args: &[
            "bench",
            "tpcb",
            "--config",
            "{dir}/big.toml",
            "--duration",
            "1s",
        ],
        files: &[(
            "big.toml",
            "[[data]]\nname = \"data\"\npage_bytes = 8192\nbuffer_bytes = 1099511627776\n\
             device = \"memory\"\n\n[log]\ndevice = \"memory\"\n",
        )],
        exit: 2,
        message: &["buffer", "memory"],
    },
    Row {
        what: "an SSD erase unit of more pages than the page FTL's victim key holds",
        args: &[
            "replay",
            "--device",
            "{dir}/bigblock.toml",
            "--synthetic",
            "10",
        ],
        files: &[(
            "bigblock.toml",
            "kind = \"ssd\"\nname = \"bigblock\"\nchannels = 2\nchips_per_channel = 1\n\
             dies_per_chip = 1\nplanes_per_die = 1\nblocks_per_plane = 8\npage_bytes = 512\n\
             erase_unit_bytes = 67108864\nover_provisioning = 0.1\npage_read_us = 50.0\n\
             page_program_us = 500.0\nblock_erase_ms = 3.0\nchannel_mb_s = 200.0\n\
             host_mb_s = 300.0\n",
        )],
        exit: 2,
        message: &["bigblock.toml", "131072 pages per block", "at most 65534"],
    },
    Row {
        what: "a synthetic replay of 10^12 requests",
        args: &[
            "replay",
            "--device",
            "ssd-2010",
            "--synthetic",
            "1000000000000",
        ],
        files: &[],
        exit: 2,
        message: &["--synthetic 1000000000000", "1000000000"],
    },
    Row {
        what: "a request larger than the device",
        args: &[
            "replay",
            "--device",
            "ssd-2010",
            "--synthetic",
            "10",
            "--block-kb",
            "1000000000",
        ],
        files: &[],
        exit: 2,
        message: &["--block-kb 1000000000"],
    },
    Row {
        what: "preconditioning writes beyond their limit",
        args: &[
            "characterize",
            "--device",
            "ssd-2010",
            "--speedup",
            "--precondition-mb",
            "2000000",
        ],
        files: &[],
        exit: 2,
        message: &["--precondition-mb 2000000", "PRECONDITION_MB_MAX"],
    },
    Row {
        what: "a generated trace of 10^11 requests",
        args: &[
            "trace",
            "generate",
            "--count",
            "100000000000",
            "--out",
            "{dir}/t.mqsim",
        ],
        files: &[],
        exit: 2,
        message: &["--count 100000000000"],
    },
    Row {
        what: "a span that overflows",
        args: &[
            "trace",
            "generate",
            "--count",
            "10",
            "--span-gb",
            "18446744073709551615",
            "--out",
            "{dir}/t.mqsim",
        ],
        files: &[],
        exit: 2,
        message: &["--span-gb"],
    },
    Row {
        what: "simulated contents in memory past --sim-memory's limit",
        args: &["--sim-memory", "2000000", "bench", "tpcb"],
        files: &[],
        exit: 2,
        message: &["--sim-memory 2000000", "1048576"],
    },
    Row {
        what: "reproduce at a scale it has no runs for",
        args: &["reproduce", "--scale", "1/7", "--out", "{dir}/report"],
        files: &[],
        exit: 2,
        message: &["--scale '1/7'", "1/100, 1/10"],
    },
    Row {
        what: "another scale for a unit that runs at one only",
        args: &[
            "reproduce",
            "--scale",
            "1/10",
            "--only",
            "lee2008-table2",
            "--out",
            "{dir}/report",
        ],
        files: &[],
        exit: 2,
        message: &["--scale 1/10", "petrov2010"],
    },
    Row {
        what: "a TPC-B scale of a million branches",
        args: &["bench", "tpcb", "--scale", "1000000", "--duration", "1s"],
        files: &[],
        exit: 2,
        message: &["--scale 1000000", "100000000"],
    },
    Row {
        what: "zero accounts per branch",
        args: &[
            "bench",
            "tpcb",
            "--accounts-per-branch",
            "0",
            "--duration",
            "1s",
        ],
        files: &[],
        exit: 2,
        message: &["--accounts-per-branch"],
    },
    Row {
        what: "seeds past the largest seed",
        args: &["simtest", "--first", "18446744073709551615", "--seeds", "2"],
        files: &[],
        exit: 2,
        message: &["--first 18446744073709551615"],
    },
    Row {
        what: "simtest on no threads",
        args: &["simtest", "--seeds", "2", "--jobs", "0"],
        files: &[],
        exit: 2,
        message: &["--jobs 0", "1 to 64"],
    },
    Row {
        what: "simtest on more threads than the limit",
        args: &["simtest", "--seeds", "2", "--jobs", "65"],
        files: &[],
        exit: 2,
        message: &["--jobs 65"],
    },
    Row {
        what: "a sort input beyond the limit",
        args: &["bench", "sort", "--size", "2000GB"],
        files: &[],
        exit: 2,
        message: &["--size", "limit"],
    },
    Row {
        what: "an operator budget beyond the machine's memory",
        args: &["bench", "sort", "--size", "1GB", "--memory", "100000GB"],
        files: &[],
        exit: 2,
        message: &["--memory", "memory"],
    },
    Row {
        what: "a real sort larger than the file system",
        args: &["bench", "sort", "--real", "{dir}", "--size", "1000GB"],
        files: &[],
        exit: 2,
        message: &["--size", "free"],
    },
    Row {
        what: "a repair of a directory that is no database (no lock file left)",
        args: &["check", "--repair", "{dir}"],
        files: &[("notes.txt", "mine")],
        exit: 2,
        message: &["not a flashlab database"],
    },
    Row {
        what: "a characterization file beyond the limit",
        args: &[
            "characterize",
            "--file",
            "{dir}/cf",
            "--file-mb",
            "100000000",
        ],
        files: &[],
        exit: 2,
        message: &["--file-mb 100000000", "1048576"],
    },
    Row {
        what: "an empty characterization file",
        args: &["characterize", "--file", "{dir}/cf", "--file-mb", "0"],
        files: &[],
        exit: 2,
        message: &["--file-mb 0"],
    },
    Row {
        what: "a query of a directory that is no database",
        args: &["query", "{dir}", "--table", "kv"],
        files: &[],
        exit: 2,
        message: &["not a flashlab database"],
    },
    // Issue 42: limits on files read, costs and times.
    Row {
        what: "a configuration file that never ends",
        args: &["bench", "update-commit", "--config", "/dev/zero"],
        files: &[],
        exit: 2,
        message: &["/dev/zero", "limit of 1048576 bytes"],
    },
    Row {
        what: "a CPU cost that would overflow",
        args: &["bench", "update-commit", "--config", "{dir}/cpu.toml"],
        files: &[(
            "cpu.toml",
            "[[data]]\nname = \"data\"\npage_bytes = 8192\ndevice = \"memory\"\n\n\
             [log]\ndevice = \"memory\"\n\n[cpu]\ncommit_ns = 18446744073709551615\n",
        )],
        exit: 2,
        message: &["cpu.toml", "[cpu] commit_ns", "limit"],
    },
    Row {
        what: "a page cleaner that keeps more than every frame clean",
        args: &["bench", "update-commit", "--config", "{dir}/clean.toml"],
        files: &[(
            "clean.toml",
            "[[data]]\nname = \"data\"\npage_bytes = 8192\ndevice = \"memory\"\n\n\
             [log]\ndevice = \"memory\"\n\n[buffer]\nclean_target = 1.5\n",
        )],
        exit: 2,
        message: &["clean.toml", "[buffer] clean_target"],
    },
    Row {
        what: "a page cleaner batch of no pages",
        args: &["bench", "update-commit", "--config", "{dir}/batch.toml"],
        files: &[(
            "batch.toml",
            "[[data]]\nname = \"data\"\npage_bytes = 8192\ndevice = \"memory\"\n\n\
             [log]\ndevice = \"memory\"\n\n[buffer]\ncleaner_batch_pages = 0\n",
        )],
        exit: 2,
        message: &["batch.toml", "[buffer] cleaner_batch_pages"],
    },
    Row {
        what: "the background writer's key the page cleaner replaced",
        args: &["bench", "update-commit", "--config", "{dir}/old.toml"],
        files: &[(
            "old.toml",
            "[[data]]\nname = \"data\"\npage_bytes = 8192\ndevice = \"memory\"\n\n\
             [log]\ndevice = \"memory\"\n\n[buffer]\nwriter_interval_ns = 5\n",
        )],
        exit: 2,
        message: &["old.toml", "writer_interval_ns"],
    },
    Row {
        what: "a configuration error names the file as well as the space",
        args: &["bench", "update-commit", "--config", "{dir}/buf.toml"],
        files: &[(
            "buf.toml",
            "[[data]]\nname = \"tables\"\npage_bytes = 8192\nbuffer_bytes = 8192\n\
             device = \"memory\"\n\n[log]\ndevice = \"memory\"\n",
        )],
        exit: 2,
        message: &["buf.toml", "data space 'tables'"],
    },
    Row {
        what: "a device time that would overflow",
        args: &["bench", "tpcb", "--log-device", "{dir}/slow.toml"],
        files: &[(
            "slow.toml",
            small_ssd!("slow", "controller_overhead_us = 1e12\n"),
        )],
        exit: 2,
        message: &["slow.toml", "controller_overhead_us", "limit"],
    },
    // Issue 49: every controller option is a device-file key, and a key
    // the file misspells or a value it cannot take names the key.
    Row {
        what: "devices with a device name that is no preset",
        args: &["devices", "no-such-device"],
        files: &[],
        exit: 2,
        message: &["unknown device 'no-such-device'"],
    },
    Row {
        what: "a misspelt key in a device file",
        args: &["devices", "{dir}/typo.toml"],
        files: &[(
            "typo.toml",
            "kind = \"ssd\"\nname = \"t\"\nreads_frist = true\n",
        )],
        exit: 2,
        message: &["typo.toml", "reads_frist"],
    },
    Row {
        what: "a read-ahead beyond its limit in a device file",
        args: &["devices", "{dir}/ahead.toml"],
        files: &[(
            "ahead.toml",
            small_ssd!("ahead", "read_ahead_pages = 1000000\n"),
        )],
        exit: 2,
        message: &["ahead.toml", "read_ahead_pages", "65536"],
    },
    Row {
        what: "log blocks for an FTL without them in a device file",
        args: &["devices", "{dir}/logs.toml"],
        files: &[(
            "logs.toml",
            small_ssd!("logs", "log_blocks = 0\nftl = \"bast\"\n"),
        )],
        exit: 2,
        message: &["logs.toml", "log_blocks"],
    },
    // Issue 42: messages that name the option the user gave.
    Row {
        what: "more warehouses than default terminals allow",
        args: &["bench", "tpcc", "--warehouses", "1001"],
        files: &[],
        exit: 2,
        message: &["--warehouses 1001", "terminals"],
    },
    Row {
        what: "a configured data space too small for TPC-C",
        args: &["bench", "tpcc", "--config", "{dir}/stock.toml"],
        files: &[(
            "stock.toml",
            "[[data]]\nname = \"data\"\npage_bytes = 8192\ndevice = \"memory\"\n\n\
             [[data]]\nname = \"stock\"\npage_bytes = 2048\ndevice = \"memory\"\n\n\
             [log]\ndevice = \"memory\"\n",
        )],
        exit: 2,
        message: &["--config", "data space 'stock'", "2048"],
    },
    Row {
        what: "raw NAND as the log device",
        args: &["bench", "tpcb", "--log-device", "nand-k9wag08u1a"],
        files: &[],
        exit: 2,
        message: &["--log-device nand-k9wag08u1a", "raw NAND"],
    },
    Row {
        what: "raw NAND as the rollback device",
        args: &["bench", "tpcb", "--rollback-device", "nand-k9wag08u1a"],
        files: &[],
        exit: 2,
        message: &["--rollback-device nand-k9wag08u1a", "raw NAND"],
    },
    Row {
        what: "an acks path in no directory leaves no scratch directory",
        args: &[
            "bench",
            "tpcb",
            "--real",
            "{dir}",
            "--acks",
            "{dir}/no/such/acks",
        ],
        files: &[],
        exit: 2,
        message: &["--acks", "no directory"],
    },
    Row {
        what: "an unreadable config file is named once",
        args: &["bench", "tpcb", "--config", "{dir}/missing.toml"],
        files: &[],
        exit: 2,
        message: &["missing.toml", "No such file or directory"],
    },
    Row {
        what: "an unknown CPU profile is named with the known ones",
        args: &["bench", "tpcb", "--cpu-profile", "oracle9"],
        files: &[],
        exit: 2,
        message: &["--cpu-profile oracle9", "lee2008", "petrov2010"],
    },
    Row {
        what: "a CPU profile for the real world",
        args: &[
            "bench",
            "tpcb",
            "--real",
            "{dir}/db",
            "--cpu-profile",
            "lee2008",
        ],
        files: &[],
        exit: 2,
        message: &["--cpu-profile", "--real"],
    },
    // Issue 42: a flag of another workload, or without the flag it needs.
    Row {
        what: "--think-divisor without --think",
        args: &["bench", "tpcc", "--think-divisor", "3"],
        files: &[],
        exit: 2,
        message: &["--think-divisor", "--think"],
    },
    Row {
        what: "--scale on tpcc",
        args: &["bench", "tpcc", "--scale", "3"],
        files: &[],
        exit: 2,
        message: &["--scale", "tpcc"],
    },
    Row {
        what: "--warehouses on tpcb",
        args: &["bench", "tpcb", "--warehouses", "3"],
        files: &[],
        exit: 2,
        message: &["--warehouses", "tpcb"],
    },
    Row {
        what: "--accounts-per-branch on update-commit",
        args: &["bench", "update-commit", "--accounts-per-branch", "5"],
        files: &[],
        exit: 2,
        message: &["--accounts-per-branch", "update-commit"],
    },
    Row {
        what: "--size on tpcb",
        args: &["bench", "tpcb", "--size", "1GB"],
        files: &[],
        exit: 2,
        message: &["--size", "tpcb"],
    },
    Row {
        what: "--seeds with --seed",
        args: &["simtest", "--seed", "3", "--seeds", "10"],
        files: &[],
        exit: 2,
        message: &["--seeds", "--seed"],
    },
    Row {
        what: "--first with --seed",
        args: &["simtest", "--seed", "3", "--first", "10"],
        files: &[],
        exit: 2,
        message: &["--first", "--seed"],
    },
];

fn run(row: &Row) {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in row.files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let before = names(dir.path());
    let d = dir.path().display().to_string();
    let args: Vec<String> = row.args.iter().map(|a| a.replace("{dir}", &d)).collect();
    let out = Command::new(env!("CARGO_BIN_EXE_flashlab"))
        .args(&args)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(row.exit), "{}: {args:?}", row.what);
    assert_bad_input(&out, row.message);
    assert_eq!(names(dir.path()), before, "{}: files left behind", row.what);
}

#[test]
fn every_row_of_the_bad_input_table_is_refused_cleanly() {
    for row in ROWS {
        run(row);
    }
}

#[test]
fn a_trace_line_past_the_limit_is_refused_and_echoes_are_cut() {
    let dir = tempfile::tempdir().unwrap();
    // A file with no line break after the header: 1 MB of one "line".
    let long = format!("{FLASHLAB_HEADER}{}", "7".repeat(1 << 20));
    std::fs::write(dir.path().join("long.csv"), long).unwrap();
    // A field of 10,000 characters.
    let wide = format!(
        "{FLASHLAB_HEADER}{},0,d,data,write,0,512,0\n",
        "x".repeat(10_000)
    );
    std::fs::write(dir.path().join("wide.csv"), wide).unwrap();
    for (file, fragment) in [
        ("long.csv", "longer than 65536 bytes"),
        ("wide.csv", "submit_ns"),
    ] {
        let path = dir.path().join(file).display().to_string();
        let out = common::flashlab(&["replay", "--device", "ssd-2010", "--trace", &path]);
        assert_bad_input(&out, &[file, fragment]);
        let err = common::stderr(&out);
        assert!(
            err.len() < 400,
            "{} bytes of error: {}",
            err.len(),
            &err[..400]
        );
    }
}

#[test]
fn query_finds_integer_keys_and_an_unknown_table_lists_the_tables() {
    use flashlab::engine::row::{Column, Schema, Type, Value};
    use flashlab::engine::{Database, DbConfig, TableSpec};
    let dir = tempfile::tempdir().unwrap();
    {
        let _rt = real_runtime(1);
        let mut config = DbConfig::simple("file", "file", 4096, 1 << 20);
        config.data[0].capacity_bytes = Some(4 << 20);
        config.log.capacity_bytes = Some(4 << 20);
        let db = Database::open_or_create_dir(dir.path(), &config).unwrap();
        let schema = Schema::new(
            vec![
                Column::new("id", Type::Int64),
                Column::new("balance", Type::Decimal { scale: 2 }),
            ],
            vec![0],
        )
        .unwrap();
        let t = db
            .create_table(TableSpec::typed("accounts", schema))
            .unwrap();
        db.create_table(TableSpec::bytes("notes")).unwrap();
        let mut txn = db.begin().unwrap();
        for id in [1, -7, 42] {
            txn.put_row(&t, &[Value::Int(id), Value::Decimal(id * 100)])
                .unwrap();
        }
        txn.commit().unwrap();
        db.close().unwrap();
    }
    let d = dir.path().display().to_string();
    for (key, found) in [("42", 1), ("-7", 1), ("5", 0)] {
        let out = common::flashlab(&["query", &d, "--table", "accounts", "--key", key, "--json"]);
        let json = common::success_json(&out);
        assert_eq!(json["total"], found, "--key {key}");
    }
    let out = common::flashlab(&["query", &d, "--table", "accounts", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let keys: Vec<&str> = json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[0].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["-7", "1", "42"], "keys shown as --key takes them");
    assert_bad_input(
        &common::flashlab(&["query", &d, "--table", "accounts", "--key", "forty"]),
        &["'forty' is not a value of column id"],
    );
    assert_bad_input(
        &common::flashlab(&["query", &d, "--table", "nope"]),
        &["'nope'", "tables: accounts, notes"],
    );
    // Rows as column=value, not Rust's debug format; JSON rows as objects.
    let out = common::flashlab(&["query", &d, "--table", "accounts"]);
    let text = common::stdout(&out);
    assert!(text.contains("42\tid=42, balance=42.00"), "{text}");
    assert!(!text.contains("Int("), "{text}");
    let row = &json["rows"][0][1];
    assert_eq!(row["id"], -7);
    assert_eq!(row["balance"], "-7.00");
}

/// Every option of every command says what it is for in `-h`.
#[test]
fn every_option_has_help_text() {
    let commands = [
        "reproduce",
        "bench",
        "devices",
        "characterize",
        "replay",
        "trace convert",
        "trace summary",
        "trace generate",
        "plot",
        "check",
        "query",
        "simtest",
        "calibrate",
    ];
    for command in commands {
        let mut args: Vec<&str> = command.split(' ').collect();
        args.push("-h");
        let help = common::stdout(&common::flashlab(&args));
        let lines: Vec<&str> = help.lines().collect();
        let indent = |l: &str| l.len() - l.trim_start().len();
        for (i, line) in lines.iter().enumerate() {
            let option = line.trim_start();
            if !option.starts_with("--") || option.starts_with("--help") {
                continue;
            }
            // The description follows on the same line, or (when clap
            // lays long help out below the flags) on the next, indented.
            let same_line = option
                .split_once("  ")
                .is_some_and(|(_, d)| !d.trim().is_empty());
            let below = lines.get(i + 1).is_some_and(|next| {
                !next.trim().is_empty()
                    && !next.trim_start().starts_with('-')
                    && indent(next) > indent(line)
            });
            assert!(same_line || below, "{command}: no help for '{option}'");
        }
    }
}
