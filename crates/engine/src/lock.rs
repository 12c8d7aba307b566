//! Row locks with wait-die.
//!
//! Transactions lock rows in shared (read) or exclusive (write) mode and
//! hold them until they end (strict two-phase locking), which is what keeps
//! 64 concurrent TPC-B clients from losing an update. Deadlocks are
//! prevented, not detected, by *wait-die* (Rosenkrantz et al. 1978): a
//! transaction's id is its age; an older transaction may wait for a younger
//! one, a younger one that would wait for an older one dies instead, with a
//! retryable error. Waits-for edges therefore always point from older to
//! younger, so no cycle can form.
//!
//! The lock table is one runtime mutex and one condition variable: a release
//! wakes every waiter and each re-checks its request. With a few dozen
//! clients that is cheaper than it sounds, and it keeps the order of
//! wake-ups deterministic in the simulated world.
//!
//! Invariants (LOCK-n):
//! 1. A row has either any number of shared holders or one exclusive holder.
//! 2. A transaction waits only for younger (larger id) transactions.
//! 3. Every lock a transaction holds is released when it ends.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use flashlab_runtime::{Condvar, Mutex};

use crate::error::{Error, Result};

/// Lock modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    Shared,
    Exclusive,
}

/// A lockable row: a table (or index) id and a key.
pub type LockKey = (u32, Vec<u8>);

#[derive(Default)]
struct Entry {
    /// Holders and their modes (LOCK-1).
    holders: BTreeMap<u64, LockMode>,
}

#[derive(Default)]
struct Table {
    rows: HashMap<LockKey, Entry>,
    /// What each transaction holds, to release it all at the end (LOCK-3).
    held: HashMap<u64, BTreeSet<LockKey>>,
    waits: u64,
    deaths: u64,
}

/// Counts of waits and wait-die aborts.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct LockStats {
    pub waits: u64,
    pub deaths: u64,
}

/// The lock table of a database.
#[derive(Default)]
pub struct LockManager {
    table: Mutex<Table>,
    released: Condvar,
}

enum Decision {
    Granted,
    Wait,
    Die,
}

fn decide(entry: Option<&Entry>, txn: u64, mode: LockMode) -> Decision {
    let Some(entry) = entry else {
        return Decision::Granted;
    };
    let conflicting: Vec<u64> = entry
        .holders
        .iter()
        .filter(|&(&holder, &held)| {
            holder != txn && (mode == LockMode::Exclusive || held == LockMode::Exclusive)
        })
        .map(|(&holder, _)| holder)
        .collect();
    if conflicting.is_empty() {
        return Decision::Granted;
    }
    // LOCK-2: wait only if older than every conflicting holder.
    if conflicting.iter().all(|&holder| txn < holder) {
        Decision::Wait
    } else {
        Decision::Die
    }
}

impl LockManager {
    pub fn new() -> LockManager {
        LockManager::default()
    }

    /// Lock `key` for `txn` in `mode`, waiting or dying as wait-die says.
    pub fn lock(&self, txn: u64, key: &LockKey, mode: LockMode) -> Result<()> {
        let mut table = self.table.lock();
        loop {
            match decide(table.rows.get(key), txn, mode) {
                Decision::Granted => {
                    let entry = table.rows.entry(key.clone()).or_default();
                    let held = entry.holders.entry(txn).or_insert(mode);
                    if mode == LockMode::Exclusive {
                        *held = LockMode::Exclusive;
                    }
                    debug_assert!(
                        entry.holders.len() == 1
                            || entry.holders.values().all(|&m| m == LockMode::Shared),
                        "LOCK-1"
                    );
                    table.held.entry(txn).or_default().insert(key.clone());
                    return Ok(());
                }
                Decision::Wait => {
                    table.waits += 1;
                    table = self.released.wait(table);
                }
                Decision::Die => {
                    table.deaths += 1;
                    return Err(Error::Deadlock { txn });
                }
            }
        }
    }

    /// Release everything `txn` holds (LOCK-3).
    pub fn release_all(&self, txn: u64) {
        let mut table = self.table.lock();
        let Some(keys) = table.held.remove(&txn) else {
            return;
        };
        for key in keys {
            if let Some(entry) = table.rows.get_mut(&key) {
                entry.holders.remove(&txn);
                if entry.holders.is_empty() {
                    table.rows.remove(&key);
                }
            }
        }
        drop(table);
        self.released.notify_all();
    }

    pub fn stats(&self) -> LockStats {
        let table = self.table.lock();
        LockStats {
            waits: table.waits,
            deaths: table.deaths,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use flashlab_runtime::{Sim, SimConfig};

    use super::*;

    fn key(k: &str) -> LockKey {
        (1, k.as_bytes().to_vec())
    }

    #[test]
    fn shared_locks_coexist_and_exclusive_conflicts() {
        Sim::run(SimConfig::default(), |_| {
            let locks = LockManager::new();
            locks.lock(1, &key("a"), LockMode::Shared).unwrap();
            locks.lock(2, &key("a"), LockMode::Shared).unwrap();
            // Younger 3 wants exclusive over older holders: dies.
            assert!(
                locks
                    .lock(3, &key("a"), LockMode::Exclusive)
                    .unwrap_err()
                    .is_retryable()
            );
            locks.release_all(2);
            // 1 upgrades: no other holder.
            locks.lock(1, &key("a"), LockMode::Exclusive).unwrap();
            assert_eq!(locks.stats().deaths, 1);
        })
        .unwrap();
    }

    #[test]
    fn older_waits_for_younger_until_release() {
        let order = Sim::run(SimConfig::default(), |rt| {
            let locks = Arc::new(LockManager::new());
            let log = Arc::new(Mutex::new(Vec::new()));
            locks.lock(5, &key("r"), LockMode::Exclusive).unwrap();
            let (l2, log2) = (locks.clone(), log.clone());
            let older = rt.spawn("older", move || {
                l2.lock(1, &key("r"), LockMode::Exclusive).unwrap();
                log2.lock().push("older got it");
            });
            rt.sleep(1_000);
            log.lock().push("younger releases");
            locks.release_all(5);
            older.join();
            let order = log.lock().clone();
            order
        })
        .unwrap()
        .0
        .finished()
        .unwrap();
        assert_eq!(order, vec!["younger releases", "older got it"]);
    }
}
