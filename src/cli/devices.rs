//! `flashlab devices [--json]`: the device presets with their sources, then
//! the CPU profiles with theirs (text only; `--json` lists the presets).

use flashlab_devices::presets;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let all = presets::describe_all()?;
    if args.json {
        return super::print_json(&all);
    }
    for info in all {
        println!(
            "{}  ({:.1} GB, {}-byte sectors)",
            info.name,
            info.capacity_bytes as f64 / 1e9,
            info.sector_bytes
        );
        for p in info.parameters {
            println!("    {:<28} {:<22} {}", p.name, p.value, p.source);
        }
        println!();
    }
    print!(
        "{}",
        flashlab_lab::calibrate::describe(flashlab_lab::calibrate::committed())
    );
    Ok(())
}
