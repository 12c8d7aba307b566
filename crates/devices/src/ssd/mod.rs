//! # NAND-flash SSD model
//!
//! An SSD is NAND chips behind a controller. The host sees sectors; the chips
//! see pages (the unit of read and program) grouped in erase units ("blocks",
//! the unit of erase). A page can be programmed only once between erases, so
//! an overwrite goes to a fresh page and the old one becomes invalid; the
//! *flash translation layer* ([`ftl`]) keeps the logical-to-physical map and,
//! when free blocks run short, reclaims space by garbage collection (page
//! mapping) or merges (block and hybrid log-block mapping). That hidden work
//! is why random small writes cost more than sequential ones, the effect the
//! papers measure.
//!
//! This module models:
//! - [`geometry::Geometry`]: channels, chips per channel (ways), dies per
//!   chip, planes per die, blocks per plane, pages per block, page size, and
//!   over-provisioning;
//! - [`geometry::Timing`]: page read, page program, block erase, per-channel
//!   bus rate, host interface rate, controller overhead;
//! - the controller ([`controller`]): a write buffer, striping of pages over
//!   dies, optional cache program and per-page costs of random writes, and
//!   the timelines of every die, channel and the host link, on which the
//!   FTL's flash operations are scheduled into idle gaps ([`timeline`]);
//! - the FTLs: page mapping with greedy or cost-benefit GC, block mapping,
//!   BAST and FAST hybrid log-block mapping, and the super-block scheme of
//!   lee2008 section 2.2;
//! - [`array::ArrayModel`]: RAID-0 over several SSDs behind a RAID
//!   controller with a write-back cache and read-ahead (petrov2010 Table
//!   3);
//! - [`presets`]: the SSDs of the papers, and a current NVMe drive.

pub mod array;
pub mod controller;
pub mod ftl;
pub mod geometry;
pub mod presets;
pub mod timeline;

pub use controller::SsdModel;
pub use geometry::{Geometry, Timing};
