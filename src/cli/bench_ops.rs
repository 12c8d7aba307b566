//! `flashlab bench sort|hash-join|merge-join`: the temp-space operators.
//!
//! ```text
//! flashlab bench sort --real DIR --size 1GB --memory 64MB [--cluster 256KB] [--gnu-sort]
//! flashlab bench hash-join --real DIR --size 500MB --memory 64MB
//! flashlab bench merge-join --real DIR --size 500MB --memory 64MB
//! flashlab bench sort --temp-device ssd-2008 --size 200MB --memory 2MB   # simulated
//! ```
//!
//! In the real world, `sort` writes a file of `--size` bytes of 100-byte
//! records in `gensort -a`'s layout into a fresh subdirectory of DIR (not
//! timed), then times reading it, sorting it with its temp space in that
//! subdirectory, and writing the sorted file; it then checks the output as
//! valsort does (order, count, and a checksum equal to the input's). With
//! `--gnu-sort` it times `LC_ALL=C sort -S MEMORY -T DIR` on the same file,
//! checks its output the same way, and compares the two outputs byte for
//! byte (a stable sort on the 10-byte key and GNU sort's whole-line order
//! agree on these records, whose row numbers increase through the file).
//! The joins join two generated inputs of `--size` bytes whose keys match
//! one to one, checking that every key matched exactly once. Throughput is
//! input megabytes (2^20 bytes) per second. Everything is removed at the end.
//!
//! Without `--real` the same operators run in the simulated world with the
//! temp space on `--temp-device` (a preset), and times are virtual.

use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use flashlab_engine::temp::hash_join::HashJoinConfig;
use flashlab_engine::temp::tuple::{
    Checksum, KeyDist, RECORD_BYTES, SortRecords, TupleSource, Validator,
};
use flashlab_engine::temp::{
    ExternalSort, HashJoin, MergeJoin, MergeJoinConfig, PartitionLayout, SortConfig, SortKey,
    TempError, TempSpace,
};
use flashlab_lab::experiments::RunContext;
use flashlab_lab::experiments::lee2008_temp::{JoinKind, join_once, sort_with};
use flashlab_runtime::RealRuntime;
use serde::Serialize;

/// The workloads this module runs.
pub const WORKLOADS: [&str; 3] = ["sort", "hash-join", "merge-join"];

/// Cluster of a real-world sort when none is given: the largest allowed.
const SORT_CLUSTER_DEFAULT: &str = "256KB";

/// What `bench.rs` passes on.
pub struct OpsArgs {
    pub workload: String,
    pub real: Option<PathBuf>,
    pub size: Option<String>,
    pub memory: Option<String>,
    pub cluster: Option<String>,
    pub temp_device: String,
    pub gnu_sort: bool,
    /// Overlapped (forecast) temp reads, on unless `--no-overlap`.
    pub overlap: bool,
    pub seed: u64,
    pub json: bool,
}

/// Parse "1GB", "64MB", "256KB", "512B" or a plain number of bytes (binary
/// units: 1 KB = 1024 bytes).
pub fn parse_bytes(text: &str, what: &str) -> anyhow::Result<u64> {
    let t = text.trim().to_ascii_uppercase();
    let (number, scale) = [
        ("GB", 1u64 << 30),
        ("MB", 1 << 20),
        ("KB", 1 << 10),
        ("G", 1 << 30),
        ("M", 1 << 20),
        ("K", 1 << 10),
        ("B", 1),
    ]
    .iter()
    .find_map(|(suffix, scale)| t.strip_suffix(suffix).map(|n| (n.to_string(), *scale)))
    .unwrap_or((t.clone(), 1));
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("{what} '{text}' is not a size (try 1GB, 64MB, 256KB)"))?;
    let bytes = value * scale as f64;
    if !bytes.is_finite() || !(1.0..=1e15).contains(&bytes) {
        bail!("{what} '{text}' is out of range");
    }
    Ok(bytes as u64)
}

#[derive(Serialize)]
struct Report {
    workload: String,
    world: String,
    input_bytes: u64,
    memory_bytes: u64,
    cluster_bytes: u64,
    elapsed_s: f64,
    mb_per_s: f64,
    verified: String,
    detail: serde_json::Value,
    gnu_sort: Option<GnuSort>,
}

#[derive(Serialize)]
struct GnuSort {
    command: String,
    elapsed_s: f64,
    mb_per_s: f64,
    identical_output: bool,
}

/// Largest input of a sort or join (`--size`).
pub const INPUT_BYTES_MAX: u64 = 1 << 40;
/// How many times its input a real run may write to its directory at most
/// (input, temp runs, output, GNU sort's output).
const REAL_BYTES_PER_INPUT_BYTE: u64 = 4;
/// An input's size when `--size` is not given.
const SIZE_DEFAULT: &str = "100MB";

/// For a real run, --size within what the file system can hold; --memory
/// within this machine's memory.
fn check_sizes(size: u64, memory: u64, args: &OpsArgs) -> anyhow::Result<()> {
    if let Some(total) = flashlab_engine::config::machine_memory_bytes().filter(|&m| memory > m) {
        bail!("--memory {memory} bytes is more than this machine's {total} bytes of memory");
    }
    if let Some(dir) = &args.real {
        let needed = size.saturating_mul(REAL_BYTES_PER_INPUT_BYTE);
        if let Some(free) = super::free_bytes(dir).filter(|&free| needed > free) {
            bail!(
                "--size {size} bytes needs up to {needed} bytes in {}, which has {free} free",
                dir.display()
            );
        }
    }
    Ok(())
}

/// `--size`, or its default, within its limit.
fn input_bytes(size: Option<&str>) -> anyhow::Result<u64> {
    let size = parse_bytes(size.unwrap_or(SIZE_DEFAULT), "--size")?;
    if size > INPUT_BYTES_MAX {
        bail!("--size {size} bytes is more than the limit of {INPUT_BYTES_MAX}");
    }
    Ok(size)
}

/// Scratch space a simulated run of a temp-space operator needs for its
/// inputs, runs and output: as a real run's files.
pub fn scratch_need_bytes(size: Option<&str>) -> anyhow::Result<u64> {
    Ok(input_bytes(size)?
        .saturating_mul(REAL_BYTES_PER_INPUT_BYTE)
        .max(flashlab_lab::bench::SCRATCH_BYTES_MIN))
}

pub fn run(args: OpsArgs) -> anyhow::Result<()> {
    let size = input_bytes(args.size.as_deref())?;
    let memory = parse_bytes(args.memory.as_deref().unwrap_or("64MB"), "--memory")? as usize;
    check_sizes(size, memory as u64, &args)?;
    let records = size / RECORD_BYTES as u64;
    if records == 0 {
        bail!("--size {size} bytes holds no 100-byte record");
    }
    let cluster = match &args.cluster {
        Some(c) => parse_bytes(c, "--cluster")? as usize,
        None if args.workload == "hash-join" || args.workload == "merge-join" => {
            HashJoinConfig::single_pass_cluster_bytes(memory, records, RECORD_BYTES)
                .unwrap_or(64 << 10)
        }
        None => parse_bytes(SORT_CLUSTER_DEFAULT, "--cluster")? as usize,
    };
    let report = match &args.real {
        Some(dir) => real(&args, dir, records, memory, cluster)?,
        None => simulated(&args, records, memory, cluster)?,
    };
    if args.json {
        super::print_json(&report)?;
    } else {
        print(&report);
    }
    if report.verified != "ok" {
        bail!("VERIFICATION FAILED: {}", report.verified);
    }
    Ok(())
}

fn print(r: &Report) {
    println!("workload            {} ({} world)", r.workload, r.world);
    println!(
        "input               {:.1} MB{}",
        r.input_bytes as f64 / (1 << 20) as f64,
        if r.workload == "sort" {
            ""
        } else {
            " each, two inputs"
        }
    );
    println!(
        "memory / cluster    {:.1} MB / {} KB",
        r.memory_bytes as f64 / (1 << 20) as f64,
        r.cluster_bytes >> 10
    );
    println!("elapsed             {:.2} s", r.elapsed_s);
    println!("throughput          {:.1} MB/s", r.mb_per_s);
    println!("verified            {}", r.verified);
    if let Some(g) = &r.gnu_sort {
        println!(
            "GNU sort            {:.2} s, {:.1} MB/s ({})",
            g.elapsed_s, g.mb_per_s, g.command
        );
        println!(
            "outputs identical   {}",
            if g.identical_output { "yes" } else { "NO" }
        );
    }
    println!("detail              {}", r.detail);
}

fn simulated(
    args: &OpsArgs,
    records: u64,
    memory: usize,
    cluster: usize,
) -> anyhow::Result<Report> {
    let ctx = RunContext::new(false, args.seed);
    let started = Instant::now();
    let bytes = records * RECORD_BYTES as u64;
    let (elapsed_s, detail, input) = match args.workload.as_str() {
        "sort" => {
            let r = sort_with(
                &ctx,
                &args.temp_device,
                records,
                memory,
                cluster,
                args.overlap,
                false,
            )?;
            (r.elapsed_s, serde_json::to_value(&r)?, bytes)
        }
        other => {
            let kind = if other == "hash-join" {
                JoinKind::Hash(PartitionLayout::AppendLinked)
            } else {
                JoinKind::SortMerge
            };
            let r = join_once(
                &ctx,
                &args.temp_device,
                records,
                kind,
                memory,
                cluster,
                false,
            )?;
            (r.elapsed_s, serde_json::to_value(&r)?, 2 * bytes)
        }
    };
    let mut detail = detail;
    detail["host_seconds"] = serde_json::json!(started.elapsed().as_secs_f64());
    detail["temp_device"] = serde_json::json!(args.temp_device);
    Ok(Report {
        workload: args.workload.clone(),
        world: "simulated".into(),
        input_bytes: bytes,
        memory_bytes: memory as u64,
        cluster_bytes: cluster as u64,
        elapsed_s,
        mb_per_s: input as f64 / (1 << 20) as f64 / elapsed_s,
        verified: "ok".into(),
        detail,
        gnu_sort: None,
    })
}

/// Removes the bench's subdirectory whatever happens.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn real(
    args: &OpsArgs,
    dir: &Path,
    records: u64,
    memory: usize,
    cluster: usize,
) -> anyhow::Result<Report> {
    if !dir.is_dir() {
        bail!("--real {}: not an existing directory", dir.display());
    }
    let rt = RealRuntime::new(args.seed);
    let _enter = RealRuntime::enter(&rt);
    let scratch = Scratch(dir.join(format!("flashlab-bench-{}", std::process::id())));
    // Inputs, outputs and GNU sort's files all live in the scratch directory.
    let _on_signal = super::interrupt::remove_on_interrupt(&scratch.0);
    std::fs::create_dir_all(&scratch.0).with_context(|| format!("--real {}", dir.display()))?;
    let bytes = records * RECORD_BYTES as u64;
    // The temp file is sparse and unlinked at once; its cap is generous.
    let space = TempSpace::in_dir(&scratch.0, 4 * bytes + (1 << 30), false)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let run = RealRun {
        args,
        space: &space,
        records,
        memory,
        cluster,
    };
    match args.workload.as_str() {
        "sort" => run.sort(&scratch.0),
        _ => run.join(),
    }
}

/// One `--real` operator run: the options, the temp space in the scratch
/// directory, the records and the memory and cluster sizes.
#[derive(Clone, Copy)]
struct RealRun<'a> {
    args: &'a OpsArgs,
    space: &'a TempSpace,
    records: u64,
    memory: usize,
    cluster: usize,
}

impl RealRun<'_> {
    fn sort(&self, scratch: &Path) -> anyhow::Result<Report> {
        let bytes = self.records * RECORD_BYTES as u64;
        let mb = bytes as f64 / (1 << 20) as f64;
        let input_path = scratch.join("input");
        let output_path = scratch.join("output");
        let t = Instant::now();
        write_sort_input(&input_path, self.args.seed, self.records)?;
        let generate_s = t.elapsed().as_secs_f64();
        let input_sum = validate(&input_path, self.records)?;

        let mut config = SortConfig::new(self.memory, self.cluster, SortKey::sort_benchmark());
        config.overlap = self.args.overlap;
        let sort = ExternalSort::new(self.space, config).map_err(|e| anyhow::anyhow!("{e}"))?;
        let t = Instant::now();
        let stats = {
            let mut input = FileRecords::open(&input_path, self.records)?;
            let mut stream = sort.sort(&mut input)?;
            let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(&output_path)?);
            while let Some(r) = stream.next_tuple()? {
                out.write_all(r)?;
            }
            out.flush()?;
            stream.finish()
        };
        let elapsed_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let out_sum = validate(&output_path, self.records)?;
        let validate_s = t.elapsed().as_secs_f64();
        let mut verified = check_sorted(&out_sum, &input_sum);
        if self.space.used_bytes() != 0 {
            verified = format!("temp space not freed ({} bytes)", self.space.used_bytes());
        }
        let gnu = match self.args.gnu_sort {
            true => {
                let paths = (input_path.as_path(), output_path.as_path());
                let (gnu, gnu_check) =
                    gnu_sort(scratch, paths, &input_sum, self.memory, self.records)?;
                if gnu_check != "ok" {
                    verified = format!("GNU sort's output: {gnu_check}");
                }
                Some(gnu)
            }
            false => None,
        };
        Ok(Report {
            workload: "sort".into(),
            world: "real".into(),
            input_bytes: bytes,
            memory_bytes: self.memory as u64,
            cluster_bytes: self.cluster as u64,
            elapsed_s,
            mb_per_s: mb / elapsed_s,
            verified,
            detail: serde_json::json!({
                "generate_input_s": generate_s,
                "validate_output_s": validate_s,
                "checksum": out_sum,
                "runs": stats.runs,
                "merge_steps": stats.merge_steps,
                "final_fan_in": stats.final_runs,
                "overlap": stats.overlap,
                "forecast": stats.forecast,
                "run_generation_s": stats.run_generation_ns as f64 / 1e9,
                "merge_s": (stats.intermediate_merge_ns + stats.final_merge_ns) as f64 / 1e9,
                "temp": self.space.stats(),
            }),
            gnu_sort: gnu,
        })
    }

    fn join(&self) -> anyhow::Result<Report> {
        let bytes = self.records * RECORD_BYTES as u64;
        let mut left = SortRecords::with_keys(
            self.args.seed,
            self.records,
            KeyDist::Permutation { salt: 1 },
        );
        let mut right = SortRecords::with_keys(
            self.args.seed + 1,
            self.records,
            KeyDist::Permutation { salt: 2 },
        )
        .starting_at(self.records);
        let mut matched = 0u64;
        let mut wrong = 0u64;
        let mut sum = Checksum::default();
        let mut sink = |a: &[u8], b: &[u8]| {
            matched += 1;
            if a[..10] != b[..10] {
                wrong += 1;
            }
            Validator::add_unordered(&mut sum, a);
            Validator::add_unordered(&mut sum, b);
            Ok(())
        };
        let key = SortKey::sort_benchmark;
        let t = Instant::now();
        let detail = if self.args.workload == "hash-join" {
            let mut config = HashJoinConfig::new(
                self.memory,
                self.cluster,
                PartitionLayout::AppendLinked,
                key(),
                key(),
            );
            config.overlap = self.args.overlap;
            let join = HashJoin::new(self.space, config).map_err(|e| anyhow::anyhow!("{e}"))?;
            serde_json::to_value(join.join(&mut left, &mut right, &mut sink)?)?
        } else {
            let mut config = MergeJoinConfig::new(self.memory, self.cluster, key(), key());
            config.overlap = self.args.overlap;
            let join = MergeJoin::new(self.space, config).map_err(|e| anyhow::anyhow!("{e}"))?;
            serde_json::to_value(join.join(&mut left, &mut right, &mut sink)?)?
        };
        let elapsed_s = t.elapsed().as_secs_f64();
        let verified = if matched != self.records || wrong != 0 {
            format!(
                "{matched} matches of {}, {wrong} with unequal keys",
                self.records
            )
        } else if self.space.used_bytes() != 0 {
            format!("temp space not freed ({} bytes)", self.space.used_bytes())
        } else {
            "ok".into()
        };
        Ok(Report {
            workload: self.args.workload.clone(),
            world: "real".into(),
            input_bytes: bytes,
            memory_bytes: self.memory as u64,
            cluster_bytes: self.cluster as u64,
            elapsed_s,
            mb_per_s: 2.0 * bytes as f64 / (1 << 20) as f64 / elapsed_s,
            verified,
            detail: serde_json::json!({"operator": detail, "pairs_checksum": sum, "temp": self.space.stats()}),
            gnu_sort: None,
        })
    }
}

/// 100-byte records read from a file in large chunks.
struct FileRecords {
    file: std::fs::File,
    buf: Vec<u8>,
    at: usize,
    end: usize,
    left: u64,
}

const FILE_CHUNK_BYTES: usize = 4 << 20;

impl FileRecords {
    fn open(path: &Path, records: u64) -> anyhow::Result<FileRecords> {
        Ok(FileRecords {
            file: std::fs::File::open(path).with_context(|| path.display().to_string())?,
            buf: vec![0u8; FILE_CHUNK_BYTES],
            at: 0,
            end: 0,
            left: records,
        })
    }
}

impl TupleSource for FileRecords {
    fn next_tuple(&mut self) -> Result<Option<&[u8]>, TempError> {
        if self.left == 0 {
            return Ok(None);
        }
        if self.end - self.at < RECORD_BYTES {
            let rest = self.end - self.at;
            self.buf.copy_within(self.at..self.end, 0);
            let mut filled = rest;
            while filled < RECORD_BYTES {
                let n = self
                    .file
                    .read(&mut self.buf[filled..])
                    .map_err(|e| TempError::Consumer(format!("input file: {e}")))?;
                if n == 0 {
                    return Err(TempError::Consumer("input file ends early".into()));
                }
                filled += n;
            }
            self.at = 0;
            self.end = filled;
        }
        let t = &self.buf[self.at..self.at + RECORD_BYTES];
        self.at += RECORD_BYTES;
        self.left -= 1;
        Ok(Some(t))
    }

    fn fixed_len(&self) -> Option<usize> {
        Some(RECORD_BYTES)
    }

    fn size_hint_bytes(&self) -> Option<u64> {
        Some(self.left * RECORD_BYTES as u64)
    }
}

/// valsort: order, count and checksum of a file of records.
fn validate(path: &Path, records: u64) -> anyhow::Result<Checksum> {
    let mut input = FileRecords::open(path, records)?;
    let mut v = Validator::new(SortKey::sort_benchmark());
    while let Some(t) = input.next_tuple()? {
        v.add(t)?;
    }
    let len = std::fs::metadata(path)?.len();
    if len != records * RECORD_BYTES as u64 {
        bail!(
            "{}: {len} bytes, expected {}",
            path.display(),
            records * RECORD_BYTES as u64
        );
    }
    Ok(v.sum)
}

fn files_identical(a: &Path, b: &Path) -> anyhow::Result<bool> {
    let mut fa = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(a)?);
    let mut fb = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(b)?);
    let mut ba = vec![0u8; 1 << 20];
    let mut bb = vec![0u8; 1 << 20];
    loop {
        let na = read_full(&mut fa, &mut ba)?;
        let nb = read_full(&mut fb, &mut bb)?;
        if na != nb || ba[..na] != bb[..nb] {
            return Ok(false);
        }
        if na == 0 {
            return Ok(true);
        }
    }
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        let k = r.read(&mut buf[n..])?;
        if k == 0 {
            break;
        }
        n += k;
    }
    Ok(n)
}

/// Write `records` generated records (the sort benchmark's, from `seed`)
/// to the file `path`.
fn write_sort_input(path: &Path, seed: u64, records: u64) -> anyhow::Result<()> {
    let mut generator = SortRecords::new(seed, records);
    let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    while let Some(r) = generator.next_tuple()? {
        out.write_all(r)?;
    }
    out.flush()?;
    Ok(())
}

/// Sort `input_path` with GNU sort in `memory` bytes, its temporary files
/// in `scratch`, and check its output against the input's checksum
/// (`input_sum`) and flashlab's output (`output_path`). Returns the
/// comparison and the check of GNU sort's output ("ok" if sorted and
/// whole).
fn gnu_sort(
    scratch: &Path,
    (input_path, output_path): (&Path, &Path),
    input_sum: &Checksum,
    memory: usize,
    records: u64,
) -> anyhow::Result<(GnuSort, String)> {
    let gnu_path = scratch.join("output-gnu");
    let memory_arg = format!("{}K", memory >> 10);
    let command = format!(
        "LC_ALL=C sort -S {memory_arg} -T {} -o OUTPUT INPUT",
        scratch.display()
    );
    let t = Instant::now();
    let child = std::process::Command::new("sort")
        .env("LC_ALL", "C")
        .arg("-S")
        .arg(&memory_arg)
        .arg("-T")
        .arg(scratch)
        .arg("-o")
        .arg(&gnu_path)
        .arg(input_path)
        .spawn()
        .context("running GNU sort")?;
    let status = {
        // A signal to flashlab alone (SIGTERM) also stops GNU sort.
        let _on_signal = super::interrupt::kill_on_interrupt(child.id());
        let mut child = child;
        child.wait().context("running GNU sort")?
    };
    let elapsed_s = t.elapsed().as_secs_f64();
    if !status.success() {
        bail!("GNU sort failed: {status}");
    }
    let mb = (records * RECORD_BYTES as u64) as f64 / (1 << 20) as f64;
    let gnu_check = check_sorted(&validate(&gnu_path, records)?, input_sum);
    let gnu = GnuSort {
        command,
        elapsed_s,
        mb_per_s: mb / elapsed_s,
        identical_output: files_identical(output_path, &gnu_path)?,
    };
    Ok((gnu, gnu_check))
}

fn check_sorted(out: &Checksum, input: &Checksum) -> String {
    if out.unordered != 0 {
        return format!("{} records out of order", out.unordered);
    }
    if out.tuples != input.tuples || out.crc_sum != input.crc_sum {
        return format!(
            "checksum differs: {} records, sum {:#x}; input {} records, sum {:#x}",
            out.tuples, out.crc_sum, input.tuples, input.crc_sum
        );
    }
    "ok".into()
}
