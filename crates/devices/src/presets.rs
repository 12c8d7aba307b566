//! The device presets, by name.
//!
//! One registry for every named device: the disks (`hdd-2008`,
//! `hdd-seagate-7200-7`, `hdd-2010`), the SSDs (`ssd-2008`,
//! `ssd-2008-poor-random`, `ssd-vertex-2009`, `ssd-2010`,
//! `ssd-array-2010`, `nvme-2024`) and `memory`. Each model's
//! [`DeviceModel::describe`] lists its parameters with the source of every
//! number; presets are calibrated from device-level figures only.

use std::sync::Arc;

use crate::device::DeviceRef;
use crate::error::DeviceError;
use crate::hdd::HddModel;
use crate::memory::MemoryDevice;
use crate::model::{DeviceModel, Parameter};
use crate::sim::SimDevice;
use crate::store::StoredDevice;

/// The zero-latency memory device's name.
pub const MEMORY: &str = "memory";
/// Capacity of a `memory` device when none is given (sparse: costs nothing
/// until written).
pub const MEMORY_CAPACITY_BYTES_DEFAULT: u64 = 64 << 30;

const HDD_NAMES: [&str; 3] = ["hdd-2008", "hdd-seagate-7200-7", "hdd-2010"];

/// Every modelled preset of the papers' devices, in listing order
/// (`memory` is not a model; the lee2007 flash presets are listed apart,
/// [`flash_names`]: the device characterization does not run them).
pub fn model_names() -> Vec<&'static str> {
    HDD_NAMES
        .iter()
        .chain(crate::ssd::presets::NAMES.iter())
        .copied()
        .collect()
}

/// lee2007's flash: the raw K9WAG08U1A (In-Page Logging's device) and SSDs
/// of one such chip behind a page-mapping and a block-mapping FTL.
pub fn flash_names() -> Vec<&'static str> {
    std::iter::once(crate::nand_device::K9WAG08U1A)
        .chain(crate::nand_device::FTL_PRESETS_K9WAG08U1A)
        .collect()
}

/// Whether `name` is a raw NAND preset (a [`crate::nand_device::NandDevice`]:
/// program-once, erase units; only a store made for it can use it).
pub fn is_raw_nand(name: &str) -> bool {
    name == crate::nand_device::K9WAG08U1A
}

/// Every name a device option accepts.
pub fn names() -> Vec<&'static str> {
    let mut names = model_names();
    names.extend(flash_names());
    names.push(MEMORY);
    names
}

fn unknown(name: &str) -> DeviceError {
    DeviceError::UnknownPreset {
        name: name.to_string(),
        known: names().join(", "),
    }
}

/// A fresh timing model of the preset called `name`, or of the device
/// described in the TOML file `name` names (see [`crate::spec`]).
pub fn build_model(name: &str) -> Result<Box<dyn DeviceModel>, DeviceError> {
    if name.ends_with(".toml") {
        return crate::spec::build_from_file(std::path::Path::new(name));
    }
    match name {
        "hdd-2008" => Ok(Box::new(HddModel::hdd_2008()?)),
        "hdd-seagate-7200-7" => Ok(Box::new(HddModel::hdd_7200_7()?)),
        "hdd-2010" => Ok(Box::new(HddModel::hdd_2010()?)),
        crate::nand_device::K9WAG08U1A => Ok(Box::new(crate::nand_device::NandModel::new(
            crate::nand_device::NandSpec::k9wag08u1a(),
        )?)),
        _ if let Some(ssd) = crate::nand_device::build_ftl_ssd(name) => {
            Ok(Box::new(ssd?) as Box<dyn DeviceModel>)
        }
        _ => crate::ssd::presets::build(name).unwrap_or_else(|| Err(unknown(name))),
    }
}

/// A device of the simulated world: `memory`, or a preset model with data.
pub fn open_simulated(name: &str) -> Result<DeviceRef, DeviceError> {
    if name == MEMORY {
        return Ok(Arc::new(MemoryDevice::new(
            MEMORY,
            MEMORY_CAPACITY_BYTES_DEFAULT,
        )));
    }
    if is_raw_nand(name) {
        return Ok(Arc::new(crate::nand_device::NandDevice::simulated(
            crate::nand_device::NandSpec::k9wag08u1a(),
        )?));
    }
    Ok(Arc::new(SimDevice::new(build_model(name)?)))
}

/// [`open_simulated`] for a run that never crashes its devices (an
/// experiment): its store remembers no write for a crash to undo, so it
/// holds no before-images however long it goes without a flush (STORE-6).
pub fn open_simulated_never_crashing(name: &str) -> Result<DeviceRef, DeviceError> {
    let device = open_simulated_stored(name, None)?;
    device.store().lock().expect("store").turn_off_crash_model();
    Ok(device)
}

/// A device of the simulated world whose contents can be imaged
/// ([`crate::store::SparseStore::image`]) and that starts from `image` if
/// given: a database loaded once serves many runs, each on fresh devices
/// (see [`SimDevice::preloaded`]).
pub fn open_simulated_stored(
    name: &str,
    image: Option<crate::store::SparseStore>,
) -> Result<Arc<dyn crate::store::StoredDevice>, DeviceError> {
    if name == MEMORY {
        let device = MemoryDevice::new(MEMORY, MEMORY_CAPACITY_BYTES_DEFAULT);
        if let Some(image) = image {
            *device.store().lock().expect("store") = image;
        }
        return Ok(Arc::new(device));
    }
    if is_raw_nand(name) {
        let spec = crate::nand_device::NandSpec::k9wag08u1a();
        let model = Box::new(crate::nand_device::NandModel::new(spec.clone())?);
        let inner: Arc<dyn crate::store::StoredDevice> = match image {
            Some(image) => Arc::new(SimDevice::preloaded(model, image)),
            None => Arc::new(SimDevice::new(model)),
        };
        return Ok(Arc::new(crate::nand_device::NandDevice::new(spec, inner)?));
    }
    let model = build_model(name)?;
    Ok(match image {
        Some(image) => Arc::new(SimDevice::preloaded(model, image)),
        None => Arc::new(SimDevice::new(model)),
    })
}

/// What `flashlab devices` shows of one preset.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PresetInfo {
    pub name: String,
    pub capacity_bytes: u64,
    pub sector_bytes: u32,
    pub parameters: Vec<Parameter>,
}

/// Every preset with its parameters and their sources.
pub fn describe_all() -> Result<Vec<PresetInfo>, DeviceError> {
    let mut out = Vec::new();
    for name in model_names().into_iter().chain(flash_names()) {
        let model = build_model(name)?;
        out.push(PresetInfo {
            name: name.to_string(),
            capacity_bytes: model.capacity_bytes(),
            sector_bytes: model.sector_bytes(),
            parameters: model.describe(),
        });
    }
    out.push(PresetInfo {
        name: MEMORY.to_string(),
        capacity_bytes: MEMORY_CAPACITY_BYTES_DEFAULT,
        sector_bytes: crate::memory::MEMORY_SECTOR_BYTES,
        parameters: vec![Parameter::new(
            "latency",
            "0",
            "no latency: data the papers keep cached in memory",
        )],
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_preset_names_the_known_ones() {
        let err = build_model("floppy").err().expect("unknown");
        let text = err.to_string();
        assert!(
            text.contains("unknown device 'floppy'") && text.contains("hdd-2008"),
            "{text}"
        );
    }

    #[test]
    fn every_preset_builds_and_describes_its_sources() {
        for info in describe_all().unwrap() {
            assert!(info.capacity_bytes > 0, "{}", info.name);
            assert!(!info.parameters.is_empty(), "{}", info.name);
            for p in &info.parameters {
                assert!(
                    !p.source.is_empty(),
                    "{}: {} has no source",
                    info.name,
                    p.name
                );
            }
        }
    }
}
