//! Creating a database, and creating tables.
//!
//! A new database is formatted through the log like everything else: the
//! space header of every data space and the catalog tree are written by
//! mini-transactions of no transaction (redo only), the log is forced, and a
//! first checkpoint is taken. A crash half-way leaves a log that recovery
//! redoes to the same formatted state.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::btree::BTree;
use crate::buffer::{BufferPool, LogForce};
use crate::config::DbConfig;
use crate::db::access::{LogCtx, TreeRef};
use crate::db::catalog::{
    CATALOG_ROOT, INDEXES_MAX, IndexDef, TABLE_PREFIX, TableDef, TableSpec, validate_name,
};
use crate::db::{DataSpace, Database, Devices, Table};
use crate::error::{Error, Result};
use crate::mtr::PageAccess;
use crate::page::PageId;
use crate::space::SpaceHeader;
use crate::store::{StoreMode, StoreOptions, open_store_with};
use crate::wal::Wal;

/// The buffer pools of a database, by page size.
pub(crate) type Pools = BTreeMap<usize, Arc<BufferPool>>;

/// Build the pools and data spaces of a configuration over its devices.
pub(crate) fn build_spaces(
    config: &DbConfig,
    devices: &Devices,
    wal: &Arc<Wal>,
    mode: StoreMode,
    created: bool,
) -> Result<(Vec<DataSpace>, Pools)> {
    let mut pools: BTreeMap<usize, Arc<BufferPool>> = BTreeMap::new();
    for space in &config.data {
        let largest = config
            .data
            .iter()
            .filter(|s| s.page_bytes == space.page_bytes)
            .map(|s| s.buffer_bytes)
            .max()
            .unwrap_or(space.buffer_bytes);
        if let std::collections::btree_map::Entry::Vacant(slot) = pools.entry(space.page_bytes) {
            let log: Arc<dyn LogForce> = wal.clone();
            let pool = BufferPool::new(space.page_bytes, largest, log)?;
            pool.set_read_ahead_bytes(config.read_ahead_bytes);
            if config.write_scheduler {
                pool.set_write_scheduler(Some(Default::default()));
            }
            slot.insert(Arc::new(pool));
        }
    }
    let mut spaces = Vec::new();
    for (i, (space, device)) in config.data.iter().zip(&devices.data).enumerate() {
        let pool = pools[&space.page_bytes].clone();
        let store = open_store_with(
            space.store,
            device.clone(),
            space.page_bytes,
            space.capacity_bytes,
            &space.name,
            mode,
            StoreOptions {
                log: Some(wal.clone()),
                ipl_log_segment_bytes: space.ipl_log_segment_bytes,
                ipl_no_commit_force: space.ipl_no_commit_force,
                ipl_no_selection: space.ipl_no_selection,
                log_structured: crate::store::LogStructuredOptions {
                    created,
                    ..space.log_structured()
                },
            },
        )?;
        pool.register_logged_space(i as u32, &space.name, store.clone())?;
        spaces.push(DataSpace {
            id: i as u32,
            allocation: flashlab_runtime::Latch::new(),
            name: space.name.clone(),
            pool,
            capacity_pages: store.info().capacity_pages,
            store,
        });
    }
    Ok((spaces, pools))
}

/// Format a new database on empty devices.
pub(crate) fn create(config: &DbConfig, devices: Devices) -> Result<Database> {
    let wal = Wal::create(
        devices.log.clone(),
        config.wal.clone(),
        0,
        config.log.capacity_bytes,
    )?;
    let (spaces, pools) = build_spaces(config, &devices, &wal, StoreMode::Create, false)?;
    let db = Database::from_parts(config, spaces, pools, wal, devices, 1, 1)?;
    for space in &db.inner.spaces {
        format_space(&db, space)?;
    }
    create_catalog(&db)?;
    db.flush()?;
    Ok(db)
}

/// Finish a creation that a crash cut short: the master record is written
/// first, so recovery may find spaces without a header or no catalog yet.
/// Format what is missing (REC-2 for creation). Once the database is
/// `created` (its first checkpoint is in the master record), a header or
/// catalog root that redo left all zeros is damage, never formatted anew
/// (REC-5).
pub(crate) fn finish_creation(db: &Database, created: bool) -> Result<bool> {
    let mut finished = false;
    for space in &db.inner.spaces {
        let page = space.pool.fetch(PageId::new(space.id, 0))?;
        let missing = page.read(|bytes| {
            SpaceHeader::decode(bytes, &space.name).is_err()
                && bytes[crate::page::PAGE_BODY_OFFSET..]
                    .iter()
                    .all(|&b| b == 0)
        });
        drop(page);
        if missing && created {
            return Err(zeroed_page(db, space, 0, "the space header"));
        }
        if missing {
            format_space(db, space)?;
            finished = true;
        }
    }
    let catalog = db.inner.spaces[0]
        .pool
        .fetch(PageId::new(0, CATALOG_ROOT))?;
    let no_catalog = catalog.read(|bytes| {
        bytes[crate::page::PAGE_BODY_OFFSET..]
            .iter()
            .all(|&b| b == 0)
    });
    drop(catalog);
    if no_catalog && created {
        return Err(zeroed_page(
            db,
            &db.inner.spaces[0],
            CATALOG_ROOT,
            "the catalog root",
        ));
    }
    if no_catalog {
        create_catalog(db)?;
        finished = true;
    }
    Ok(finished)
}

/// The catalog tree: its root lands on page 1 of space 0.
fn create_catalog(db: &Database) -> Result<()> {
    let mut mtr = db.inner.mtr(0)?;
    let catalog = BTree::create(&mut mtr)?;
    if catalog.root() != CATALOG_ROOT {
        return Err(Error::Open(format!(
            "catalog root landed on page {}",
            catalog.root()
        )));
    }
    mtr.commit(&db.inner.wal, 0, 0, None)?;
    Ok(())
}

/// REC-5: a page of an existing database that must hold `what` is zeros.
fn zeroed_page(db: &Database, space: &DataSpace, page_no: u32, what: &str) -> Error {
    let device = db.inner.devices.data[space.id as usize].name().to_string();
    Error::Damaged(format!(
        "{device}: data space '{}': page {page_no} ({what}, device offset {}) is all zeros, \
         but the database exists; nothing was changed",
        space.name,
        space.store.location_of(page_no)
    ))
}

/// Write the space header of a new data space.
fn format_space(db: &Database, space: &DataSpace) -> Result<()> {
    if space.capacity_pages < 2 {
        return Err(Error::Config(format!(
            "data space '{}' has room for fewer than 2 pages",
            space.name
        )));
    }
    let page = space.pool.fetch(PageId::new(space.id, 0))?;
    let empty = page.read(|bytes| {
        bytes[crate::page::PAGE_BODY_OFFSET..]
            .iter()
            .all(|&b| b == 0)
    });
    drop(page);
    if !empty {
        return Err(Error::Open(format!(
            "data space '{}' is not empty but the log has no master record: is the log device the right one?",
            space.name
        )));
    }
    let mut mtr = db.inner.mtr(space.id)?;
    let header = SpaceHeader::new(space.id, space.pool.page_bytes() as u32);
    header.encode(mtr.write(0)?);
    mtr.commit(&db.inner.wal, 0, 0, None)?;
    Ok(())
}

/// Create a table and its indexes, and record it in the catalog (durably).
pub(crate) fn create_table(db: &Database, spec: TableSpec) -> Result<Table> {
    let inner = &db.inner;
    validate_name(&spec.name)?;
    let _ddl = inner.ddl.lock();
    inner.check_log()?;
    if inner
        .catalog
        .read()
        .expect("catalog")
        .contains_key(&spec.name)
    {
        return Err(Error::Catalog(format!(
            "table '{}' already exists",
            spec.name
        )));
    }
    if spec.indexes.len() > INDEXES_MAX {
        return Err(Error::Catalog(format!(
            "at most {INDEXES_MAX} indexes per table"
        )));
    }
    let space = match &spec.space {
        Some(name) => inner
            .config
            .data_space(name)
            .ok_or_else(|| Error::Catalog(format!("no data space '{name}'")))?
            as u32,
        None => 0,
    };
    let indexes = resolve_indexes(&spec)?;
    let root = new_tree(db, space)?;
    let mut defs = Vec::new();
    for (name, columns) in indexes {
        defs.push(IndexDef {
            name,
            columns,
            root: new_tree(db, space)?,
            latch: Default::default(),
        });
    }
    let id = inner
        .catalog
        .read()
        .expect("catalog")
        .values()
        .map(|t| t.id)
        .max()
        .unwrap_or(0)
        + 1;
    let def = TableDef {
        id,
        name: spec.name.clone(),
        space,
        root,
        schema: spec.schema,
        indexes: defs,
        latch: Default::default(),
    };
    let catalog = TreeRef::at(0, CATALOG_ROOT);
    let (_, logged) = inner.tree_put(
        catalog,
        &def.key(),
        &def.encode(),
        &LogCtx {
            txn: 0,
            prev_lsn: 0,
        },
    )?;
    inner.make_durable(logged)?;
    let def = Arc::new(def);
    inner
        .catalog
        .write()
        .expect("catalog")
        .insert(spec.name, def.clone());
    Ok(Table { def })
}

fn resolve_indexes(spec: &TableSpec) -> Result<Vec<(String, Vec<usize>)>> {
    let mut out = Vec::new();
    for (name, columns) in &spec.indexes {
        validate_name(name)?;
        let schema = spec
            .schema
            .as_ref()
            .ok_or_else(|| Error::Catalog(format!("index '{name}' needs a typed table")))?;
        let positions = columns
            .iter()
            .map(|c| {
                schema
                    .column_index(c)
                    .ok_or_else(|| Error::Catalog(format!("index '{name}': no column '{c}'")))
            })
            .collect::<Result<Vec<_>>>()?;
        out.push((name.clone(), positions));
    }
    Ok(out)
}

fn new_tree(db: &Database, space: u32) -> Result<u32> {
    let mut mtr = db.inner.mtr(space)?;
    let tree = BTree::create(&mut mtr)?;
    mtr.commit(&db.inner.wal, 0, 0, None)?;
    Ok(tree.root())
}

/// Load the catalog tree into memory.
pub(crate) fn load_catalog(db: &Database) -> Result<()> {
    let inner = &db.inner;
    let mut mtr = inner.mtr(0)?;
    let mut defs = BTreeMap::new();
    let mut failure = None;
    // The table entries only: the catalog also holds the marks of bulk
    // loads under way (`LOAD_PREFIX`).
    let end = crate::row::prefix_end(TABLE_PREFIX).expect("the prefix ends below 0xFF");
    BTree::open(CATALOG_ROOT).scan(
        &mut mtr,
        std::ops::Bound::Included(TABLE_PREFIX),
        std::ops::Bound::Excluded(end.as_slice()),
        |_, v| {
            match TableDef::decode(v) {
                Ok(def) => {
                    defs.insert(def.name.clone(), Arc::new(def));
                }
                Err(e) => failure = Some(e),
            }
            Ok(failure.is_none())
        },
    )?;
    if let Some(e) = failure {
        return Err(e);
    }
    *inner.catalog.write().expect("catalog") = defs;
    Ok(())
}
