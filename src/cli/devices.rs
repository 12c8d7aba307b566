//! `flashlab devices [DEVICE] [--json]`: the device presets with their
//! sources, then the CPU profiles with theirs (text only; `--json` lists
//! the presets). With DEVICE (a preset's name or a device file), that
//! device alone.

use flashlab_devices::presets::{self, PresetInfo};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A preset's name or the path of a device file (.toml): list only
    /// that device's parameters and their sources.
    device: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let all = match &args.device {
        Some(name) => vec![one(name)?],
        None => presets::describe_all()?,
    };
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
    if args.device.is_none() {
        print!(
            "{}",
            flashlab_lab::calibrate::describe(flashlab_lab::calibrate::committed())
        );
    }
    Ok(())
}

/// The listing of the device called `name`, as [`presets::describe_all`]
/// gives each (`memory` is not a model, so it is taken from there).
fn one(name: &str) -> anyhow::Result<PresetInfo> {
    if name == presets::MEMORY {
        let all = presets::describe_all()?;
        let memory = all.into_iter().find(|i| i.name == name);
        return memory.ok_or_else(|| anyhow::anyhow!("describe_all lists no {name}"));
    }
    let model = presets::build_model(name)?;
    Ok(PresetInfo {
        name: model.name().to_string(),
        capacity_bytes: model.capacity_bytes(),
        sector_bytes: model.sector_bytes(),
        parameters: model.describe(),
    })
}
