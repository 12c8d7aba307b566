//! Time one petrov2010 run: the image load, the preload of fresh devices,
//! and the measured run. `cargo run --release --example petrov_cell -- W`
//! (W: simulated warehouses loaded and active).

use std::time::Instant;

use flashlab::lab::bench::{BenchOptions, bench, load_image};

fn main() {
    let w: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20);
    let page: usize = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(4096);
    let options = BenchOptions {
        workload: "tpcc".into(),
        clients: w * 10,
        cores: 4,
        cpu_ghz: 2.3,
        duration_ns: 12_000_000_000,
        warmup_ns: 6_000_000_000,
        data_device: "ssd-array-2010".into(),
        log_device: "ssd-array-2010".into(),
        rollback_device: "ssd-array-2010".into(),
        page_bytes: page,
        buffer_bytes: (640 << 20) / 100,
        log_bytes: Some(64 << 20),
        tpcc: flashlab_workloads::tpcc::TpccOptions {
            warehouses: w,
            items: 10_000,
            customers_per_district: 300,
            think: true,
            think_divisor: 10.0,
            connections: 20,
            ..Default::default()
        },
        progress_interval_ns: 0,
        ..BenchOptions::default()
    };
    let t = Instant::now();
    let image = load_image(&options).expect("image");
    println!("load {:.1} host s", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let r = bench(
        &BenchOptions {
            image: Some(image.clone()),
            ..options.clone()
        },
        |_| {},
    )
    .expect("run");
    let tpm = r.tpcc.as_ref().map_or(0.0, |t| t.tpm_total);
    println!(
        "run {:.1} host s: tpmTotal {:.0}, {} committed, {:.2} host ms per transaction",
        t.elapsed().as_secs_f64(),
        tpm,
        r.committed,
        1e3 * t.elapsed().as_secs_f64() / r.committed.max(1) as f64
    );
}
