//! Row locks with deadlock detection.
//!
//! Transactions lock rows in shared (read) or exclusive (write) mode and
//! hold them until they end (strict two-phase locking), which is what keeps
//! 64 concurrent TPC-B clients from losing an update. A transaction that
//! finds a row locked waits, as in the commercial servers the papers ran.
//! Before it waits, the lock manager adds its edges to the *waits-for
//! graph* and searches for a cycle through it; if waiting would close one,
//! the requester is the victim and gets a retryable deadlock error instead
//! (the cheapest choice: it has not started to wait). It is not wait-die,
//! which never waits for an older transaction: under TPC-B's hot branch
//! rows wait-die aborts and retries most transactions, burning CPU that the
//! papers' servers spend on useful work.
//!
//! Each locked row has its own FIFO queue of waiters, and each waiter its
//! own condition variable. A release grants the row to the waiters at the
//! front of its queue that no longer conflict, in arrival order, and wakes
//! only those; the others sleep on. One condition variable for the whole
//! table would make every release wake every waiter of every row to
//! re-check its request, and with many clients the host would spend its
//! time on wake-ups that find the lock still held. Grants in arrival
//! order also keep a stream of shared readers from starving a writer, and
//! keep the order of wake-ups deterministic in the simulated world.
//!
//! A request that is not already a holder queues behind every earlier
//! conflicting waiter (no barging); an upgrade (a shared holder asking for
//! exclusive) goes to the front, since the waiters behind it wait for it
//! anyway. The waits-for graph records, for each waiter, the conflicting
//! holders and the conflicting waiters ahead of it up to the nearest
//! exclusive one (LOCK-7), and is recomputed for a row whenever the row
//! changes, so the cycle search at the start of a wait
//! sees every edge (a waiter's edges only shrink while it waits, except
//! behind an upgrade, which is granted to a running transaction that has
//! no edges of its own yet).
//!
//! Invariants (LOCK-n):
//! 1. A row has either any number of shared holders or one exclusive holder.
//! 2. The waits-for graph has no cycle: a wait that would close one is
//!    refused with a deadlock error.
//! 3. Every lock a transaction holds is released when it ends; a
//!    transaction whose commit or rollback could not be logged ends only
//!    at recovery, and keeps its locks until then.
//! 4. Once the database has failed (WAL-4), every wait ends with the
//!    failure instead of waiting for locks that will never be released.
//! 5. A row is granted to its waiters in queue order: a waiter is granted
//!    only when it conflicts with no holder, and only after every waiter
//!    ahead of it was granted. A release wakes exactly the waiters it grants.
//! 6. A waiter is in its row's queue exactly while its transaction has an
//!    entry in the waits-for graph.
//! 7. A waiter's edges reach every conflicting waiter ahead of it, though
//!    they name only those up to the nearest exclusive waiter ahead: that
//!    one's edges reach every waiter ahead of it, by the same rule. So the
//!    graph has a row's queue as a chain, O(queue) edges where naming every
//!    conflicting waiter would take O(queue^2), and a cycle search finds a
//!    cycle exactly when it would with every conflicting waiter named.
//! 8. The rows are split over [`LOCK_SHARDS`] shards by a hash of the key,
//!    each behind its own mutex; a row's entry, its queue and its holders
//!    change only under its shard's lock. No task holds two shards' locks
//!    at once.
//! 9. Lock order: a shard, then the waits-for graph. The graph changes
//!    only under the lock of the shard whose row it describes, so it
//!    always holds every row's edges as of that row's last change; a cycle
//!    check and the insertion of the new waiter's edges are one step under
//!    the graph's lock.
//! 10. A granted waiter is marked granted under its shard's lock and
//!     woken after the releaser has let go of that lock; it returns
//!     without taking the lock again. (Woken under the lock, it would take
//!     the lock again only to see it was granted, spinning and yielding on
//!     a lock its waker still holds.)
//!
//! **Sharding.** A lock or a release takes one shard's mutex per row, and
//! the graph's mutex only when someone waits, so a client does not park
//! behind another's lock of an unrelated row, as it would with one mutex
//! for every row (docs/PERFORMANCE-HISTORY.md, "Lock table shards, hits
//! without the pool's lock, early lock release"). What a transaction holds
//! is kept by the transaction ([`HeldLocks`]), not in a table-wide index,
//! and released in key order, so the order of releases (and of the
//! simulated world's wake-ups) does not depend on the shards.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use flashlab_runtime::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::fast_hash::{FastHashMap, FastHasher};
use smallvec::SmallVec;

/// Lock modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    Shared,
    Exclusive,
}

/// A lockable row: a table (or index) id and a key.
pub type LockKey = (u32, Vec<u8>);

/// Where one waiting transaction sleeps until it is granted (or failed).
#[derive(Default)]
struct WaitSlot {
    wake: Condvar,
    granted: AtomicBool,
}

struct Waiter {
    txn: u64,
    mode: LockMode,
    slot: Arc<WaitSlot>,
}

/// The holders of a row and their modes, ascending by transaction: most
/// rows have one, kept inline without an allocation.
#[derive(Default)]
struct Holders(SmallVec<[(u64, LockMode); 1]>);

impl Holders {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn position(&self, txn: u64) -> Result<usize, usize> {
        self.0.binary_search_by_key(&txn, |&(holder, _)| holder)
    }

    fn contains(&self, txn: u64) -> bool {
        self.position(txn).is_ok()
    }

    /// Add `txn` in `mode`; one that holds the row already keeps its mode
    /// unless `mode` is exclusive (an upgrade).
    fn grant(&mut self, txn: u64, mode: LockMode) {
        match self.position(txn) {
            Ok(i) if mode == LockMode::Exclusive => self.0[i].1 = mode,
            Ok(_) => {}
            Err(i) => self.0.insert(i, (txn, mode)),
        }
    }

    fn remove(&mut self, txn: u64) {
        if let Ok(i) = self.position(txn) {
            self.0.remove(i);
        }
    }

    fn iter(&self) -> impl Iterator<Item = (u64, LockMode)> + '_ {
        self.0.iter().copied()
    }
}

#[derive(Default)]
struct Entry {
    /// Holders and their modes (LOCK-1).
    holders: Holders,
    /// Waiters in grant order (LOCK-5).
    queue: VecDeque<Waiter>,
}

impl Entry {
    fn is_unused(&self) -> bool {
        self.holders.is_empty() && self.queue.is_empty()
    }

    /// Record `txn` as a holder in `mode` (an exclusive grant upgrades).
    fn grant(&mut self, txn: u64, mode: LockMode) {
        self.holders.grant(txn, mode);
        debug_assert!(
            self.holders.0.len() == 1 || self.holders.iter().all(|(_, m)| m == LockMode::Shared),
            "LOCK-1"
        );
    }

    /// The waits-for edges of `txn` asking for `mode`: the conflicting
    /// holders and, unless it already holds the row, the conflicting waiters
    /// queued ahead of it (among the first `ahead` of the queue) up to and
    /// including the nearest exclusive one, which itself waits for every
    /// waiter ahead of it (LOCK-7). Empty exactly when the request conflicts
    /// with nothing, so it can be granted at once.
    fn blockers(&self, txn: u64, mode: LockMode, ahead: usize) -> Vec<u64> {
        let mut blockers = conflicts(&self.holders, txn, mode);
        if !self.holders.contains(txn) {
            for w in self.queue.iter().take(ahead).rev() {
                if w.txn == txn || !incompatible(mode, w.mode) {
                    continue;
                }
                blockers.push(w.txn);
                if w.mode == LockMode::Exclusive {
                    break;
                }
            }
        }
        blockers
    }

    /// Grant the front of the queue while it conflicts with no holder
    /// (LOCK-5); the granted waiters, to be told.
    fn grant_front(&mut self) -> Vec<(u64, Arc<WaitSlot>)> {
        let mut granted = Vec::new();
        while let Some(front) = self.queue.front() {
            if !conflicts(&self.holders, front.txn, front.mode).is_empty() {
                break;
            }
            let waiter = self.queue.pop_front().expect("front");
            self.grant(waiter.txn, waiter.mode);
            granted.push((waiter.txn, waiter.slot));
        }
        granted
    }

    /// The waits-for edges of every waiter still queued.
    fn edges(&self) -> Vec<(u64, Vec<u64>)> {
        self.queue
            .iter()
            .enumerate()
            .map(|(i, w)| (w.txn, self.blockers(w.txn, w.mode, i)))
            .collect()
    }
}

/// Granted waiters to wake (LOCK-10); most releases wake none or one.
type Wakes = SmallVec<[Arc<WaitSlot>; 2]>;

/// Wake granted waiters, with no shard's lock held (LOCK-10).
fn wake(wakes: Wakes) {
    for slot in wakes {
        slot.wake.notify_one();
    }
}

/// One shard of the lock table: the rows whose keys hash to it (LOCK-8).
#[derive(Default)]
struct Shard {
    rows: FastHashMap<LockKey, Entry>,
}

/// The waits-for graph: who each waiting transaction waits for (LOCK-2).
#[derive(Default)]
struct Graph {
    waits_for: BTreeMap<u64, Vec<u64>>,
}

impl Graph {
    /// True if `from` reaches `to` in the waits-for graph.
    fn reaches(&self, from: u64, to: u64) -> bool {
        let mut stack = vec![from];
        let mut seen = BTreeSet::new();
        while let Some(txn) = stack.pop() {
            if txn == to {
                return true;
            }
            if seen.insert(txn)
                && let Some(next) = self.waits_for.get(&txn)
            {
                stack.extend(next.iter().copied());
            }
        }
        false
    }
}

/// The rows a transaction locked, kept by the transaction itself so that
/// its end releases them without a table-wide index (LOCK-3). A key may
/// appear twice (a lock taken again, an upgrade); a release visits it once.
#[derive(Debug, Default)]
pub struct HeldLocks {
    keys: Vec<LockKey>,
}

impl HeldLocks {
    pub fn new() -> HeldLocks {
        HeldLocks::default()
    }

    /// Rows locked so far (a key taken twice counts twice).
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Keep `key`; the first one reserves room for
    /// [`HELD_LOCKS_RESERVED`], so a short transaction allocates once.
    fn keep(&mut self, key: LockKey) {
        if self.keys.capacity() == 0 {
            self.keys.reserve(HELD_LOCKS_RESERVED);
        }
        self.keys.push(key);
    }
}

/// Row locks a transaction's first lock makes room for: a TPC-B
/// transaction takes five, a TPC-C New-Order about thirty.
const HELD_LOCKS_RESERVED: usize = 8;

/// Counts of waits and deadlock aborts.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct LockStats {
    pub waits: u64,
    /// Requests refused because waiting would have closed a cycle.
    pub deaths: u64,
}

/// Shards of the lock table (LOCK-8): enough that 64 clients rarely meet
/// on one shard's mutex for rows they do not share.
pub const LOCK_SHARDS: usize = 64;

/// The lock table of a database.
pub struct LockManager {
    shards: Vec<Mutex<Shard>>,
    graph: Mutex<Graph>,
    /// Set once when the database fails (WAL-4): every wait ends with it.
    failed: OnceLock<String>,
    waits: AtomicU64,
    deaths: AtomicU64,
}

impl Default for LockManager {
    fn default() -> LockManager {
        LockManager {
            shards: (0..LOCK_SHARDS)
                .map(|_| Mutex::new(Shard::default()))
                .collect(),
            graph: Mutex::new(Graph::default()),
            failed: OnceLock::new(),
            waits: AtomicU64::new(0),
            deaths: AtomicU64::new(0),
        }
    }
}

/// True if a request in `wanted` mode cannot share with one in `other`.
fn incompatible(wanted: LockMode, other: LockMode) -> bool {
    wanted == LockMode::Exclusive || other == LockMode::Exclusive
}

/// The holders `txn` would have to wait for (none: no conflict).
fn conflicts(holders: &Holders, txn: u64, mode: LockMode) -> Vec<u64> {
    holders
        .iter()
        .filter(|&(holder, held)| holder != txn && incompatible(mode, held))
        .map(|(holder, _)| holder)
        .collect()
}

impl LockManager {
    pub fn new() -> LockManager {
        LockManager::default()
    }

    /// The shard that holds `key` (LOCK-8): a function of the key's bytes
    /// alone (HASH-1).
    fn shard_of(&self, key: &LockKey) -> &Mutex<Shard> {
        let mut hasher = FastHasher::default();
        key.hash(&mut hasher);
        // The high bits: the shard's map picks its buckets with the low ones.
        let at = (hasher.finish() >> 32) as usize % self.shards.len();
        &self.shards[at]
    }

    fn failure(&self) -> Option<Error> {
        self.failed.get().map(|why| Error::LogFailed(why.clone()))
    }

    /// Lock `key` for `txn` in `mode`, waiting in the row's queue while
    /// others hold it (LOCK-5), or failing with a retryable deadlock error
    /// if waiting would close a cycle (LOCK-2). A granted row is added to
    /// `held`, which the transaction gives back to [`LockManager::release_all`].
    pub fn lock(&self, txn: u64, held: &mut HeldLocks, key: LockKey, mode: LockMode) -> Result<()> {
        let result = self.lock_row(txn, held, key, mode);
        self.checked();
        result
    }

    /// [`LockManager::lock`] without the whole-state check.
    fn lock_row(&self, txn: u64, held: &mut HeldLocks, key: LockKey, mode: LockMode) -> Result<()> {
        let mut shard = self.shard_of(&key).lock();
        if let Some(e) = self.failure() {
            return Err(e);
        }
        let entry = shard.rows.entry(key.clone()).or_default();
        let holds = entry.holders.contains(txn);
        let blockers = entry.blockers(txn, mode, entry.queue.len());
        if blockers.is_empty() {
            entry.grant(txn, mode);
            if !holds {
                held.keep(key);
            }
            return Ok(());
        }
        {
            // Shard, then graph (LOCK-9): the check and the new edges are
            // one step, so of two waits that would close a cycle the
            // second sees the first's edges.
            let mut graph = self.graph.lock();
            if blockers.iter().any(|&holder| graph.reaches(holder, txn)) {
                drop(graph);
                self.deaths.fetch_add(1, Ordering::Relaxed);
                if shard.rows.get(&key).is_some_and(Entry::is_unused) {
                    shard.rows.remove(&key);
                }
                return Err(Error::Deadlock { txn });
            }
            graph.waits_for.insert(txn, blockers);
        }
        let slot = Arc::new(WaitSlot::default());
        let waiter = Waiter {
            txn,
            mode,
            slot: slot.clone(),
        };
        let entry = shard.rows.get_mut(&key).expect("row of a wait");
        // An upgrade goes first: the waiters behind it wait for it anyway.
        match holds {
            true => entry.queue.push_front(waiter),
            false => entry.queue.push_back(waiter),
        }
        self.waits.fetch_add(1, Ordering::Relaxed);
        self.wait_for_grant(shard, txn, &key, &slot)?;
        if !holds {
            held.keep(key);
        }
        Ok(())
    }

    /// Sleep in the queue until a release grants the row, or the database
    /// fails (LOCK-4).
    fn wait_for_grant<'a>(
        &'a self,
        mut shard: flashlab_runtime::MutexGuard<'a, Shard>,
        txn: u64,
        key: &LockKey,
        slot: &WaitSlot,
    ) -> Result<()> {
        loop {
            if let Some(e) = self.failure() {
                if !slot.granted.load(Ordering::Acquire) {
                    self.leave_queue(&mut shard, txn, key);
                }
                return Err(e);
            }
            if slot.granted.load(Ordering::Acquire) {
                return Ok(());
            }
            // LOCK-10: a granted waiter returns without the shard's lock.
            slot.wake.wait_released(shard);
            if slot.granted.load(Ordering::Acquire) {
                return Ok(());
            }
            shard = self.shard_of(key).lock();
        }
    }

    /// After `key` changed (or to release `released`'s hold of it first):
    /// grant what can be granted, refresh the row's waits-for edges, drop
    /// the row if unused. Returns exactly the granted waiters, marked
    /// granted, for the caller to wake once it has let go of the shard
    /// (LOCK-10). The graph is locked only for a row with waiters.
    #[must_use = "granted waiters must be woken"]
    fn settle(&self, shard: &mut Shard, key: &LockKey, released: Option<u64>) -> Wakes {
        let mut wakes = Wakes::new();
        let Some(entry) = shard.rows.get_mut(key) else {
            return wakes;
        };
        if let Some(txn) = released {
            entry.holders.remove(txn);
        }
        let granted = entry.grant_front();
        let edges = entry.edges();
        if entry.is_unused() {
            shard.rows.remove(key);
        }
        if granted.is_empty() && edges.is_empty() {
            return wakes;
        }
        let mut graph = self.graph.lock();
        for (txn, slot) in granted {
            graph.waits_for.remove(&txn);
            slot.granted.store(true, Ordering::Release);
            wakes.push(slot);
        }
        graph.waits_for.extend(edges);
        wakes
    }

    /// A waiter leaves its queue without the lock (failure, LOCK-6).
    fn leave_queue(&self, shard: &mut Shard, txn: u64, key: &LockKey) {
        self.graph.lock().waits_for.remove(&txn);
        if let Some(entry) = shard.rows.get_mut(key) {
            entry.queue.retain(|w| w.txn != txn);
        }
        // Rare (the database failed): wake the granted under the lock.
        wake(self.settle(shard, key, None));
    }

    /// The database failed: wake every waiter with the error, and refuse
    /// every new wait (locks already held stay held until recovery). The
    /// failure is set before any shard is visited, and read under a shard's
    /// lock before each wait, so no waiter sleeps through it.
    pub fn fail(&self, why: &str) {
        let _ = self.failed.set(why.to_string());
        for shard in &self.shards {
            let shard = shard.lock();
            for entry in shard.rows.values() {
                for waiter in &entry.queue {
                    waiter.slot.wake.notify_one();
                }
            }
        }
    }

    /// Release everything `txn` holds (LOCK-3), granting each row to the
    /// waiters it unblocks (LOCK-5). Rows are released in key order, one
    /// shard lock at a time.
    pub fn release_all(&self, txn: u64, held: &mut HeldLocks) {
        let mut keys = std::mem::take(&mut held.keys);
        keys.sort_unstable();
        keys.dedup();
        for key in keys {
            let mut shard = self.shard_of(&key).lock();
            let wakes = self.settle(&mut shard, &key, Some(txn));
            drop(shard);
            wake(wakes);
        }
        self.checked();
    }

    /// In the simulated world's debug builds (the `crash` profile), check
    /// the whole table after a change, as `BufferPool::check` and
    /// `Wal::check` are run; a broken invariant is the engine's bug.
    fn checked(&self) {
        if !cfg!(debug_assertions) {
            return;
        }
        let simulated = flashlab_runtime::Rt::try_current()
            .is_some_and(|rt| rt.world() == flashlab_runtime::World::Simulated);
        if simulated && let Err(broken) = self.check() {
            panic!("lock table state broken: {broken}");
        }
    }

    pub fn stats(&self) -> LockStats {
        LockStats {
            waits: self.waits.load(Ordering::Relaxed),
            deaths: self.deaths.load(Ordering::Relaxed),
        }
    }

    /// Check the whole lock table against LOCK-1, 2, 5, 6 and 7: every
    /// row's holders, every queue's front, and the waits-for graph against
    /// the queues; for tests and the simulated world's checks. An
    /// upgrade granted since its waiter was queued may briefly sit at a
    /// queue's front (LOCK-10: it is marked granted before it is woken),
    /// which the check allows.
    ///
    /// [`LockManager::checked`] runs it after every change in the
    /// simulated world's debug builds.
    pub fn check(&self) -> std::result::Result<(), String> {
        // Looked at, not locked (`Mutex::inspect`): the check must not
        // change the schedule of the run it checks. A shard or the graph
        // held by a task mid-change means there is no consistent state to
        // see this time.
        let Some(shards) = self
            .shards
            .iter()
            .map(|s| s.inspect())
            .collect::<Option<Vec<_>>>()
        else {
            return Ok(());
        };
        let Some(graph) = self.graph.inspect() else {
            return Ok(());
        };
        let mut queued = BTreeSet::new();
        for shard in &shards {
            for (key, entry) in &shard.rows {
                check_entry(key, entry, &graph)?;
                queued.extend(entry.queue.iter().map(|w| w.txn));
            }
        }
        if let Some(txn) = graph.waits_for.keys().find(|t| !queued.contains(t)) {
            return Err(format!(
                "LOCK-6: transaction {txn} has waits-for edges but waits in no queue"
            ));
        }
        for &txn in graph.waits_for.keys() {
            let blockers = &graph.waits_for[&txn];
            if blockers.iter().any(|&b| graph.reaches(b, txn)) {
                return Err(format!(
                    "LOCK-2: the waits-for graph has a cycle through {txn}"
                ));
            }
        }
        Ok(())
    }
}

/// One row of [`LockManager::check`]: LOCK-1, LOCK-5, LOCK-6, LOCK-7.
fn check_entry(key: &LockKey, entry: &Entry, graph: &Graph) -> std::result::Result<(), String> {
    let exclusive = entry.holders.iter().any(|(_, m)| m == LockMode::Exclusive);
    if exclusive && entry.holders.0.len() > 1 {
        return Err(format!(
            "LOCK-1: row {key:?} has an exclusive holder beside others"
        ));
    }
    if entry.is_unused() {
        return Err(format!("row {key:?} is kept with no holder and no waiter"));
    }
    if let Some(front) = entry.queue.front()
        && !front.slot.granted.load(Ordering::Acquire)
        && conflicts(&entry.holders, front.txn, front.mode).is_empty()
    {
        return Err(format!(
            "LOCK-5: transaction {} waits at the front of row {key:?} with no conflict",
            front.txn
        ));
    }
    for (i, waiter) in entry.queue.iter().enumerate() {
        let Some(edges) = graph.waits_for.get(&waiter.txn) else {
            return Err(format!(
                "LOCK-6: transaction {} waits for row {key:?} without waits-for edges",
                waiter.txn
            ));
        };
        // An upgrade queued in front after this waiter's edges were set
        // is the one edge they may lack (see the module's essay).
        let expected = entry.blockers(waiter.txn, waiter.mode, i);
        let upgrading =
            |t: &u64| entry.holders.contains(*t) && entry.queue.iter().any(|w| w.txn == *t);
        let missing = expected.iter().any(|t| !edges.contains(t) && !upgrading(t));
        let extra = edges.iter().any(|t| !expected.contains(t));
        if missing || extra {
            return Err(format!(
                "LOCK-7: transaction {}'s edges {edges:?} for row {key:?} should be {expected:?}",
                waiter.txn
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use flashlab_runtime::{Rt, Sim, SimConfig};

    use super::*;

    fn key(k: &str) -> LockKey {
        (1, k.as_bytes().to_vec())
    }

    /// `f` in the simulated world on an empty lock table; what it returns,
    /// once it finished.
    fn with_locks<T: Send + 'static>(f: impl FnOnce(Rt, Arc<Locks>) -> T + Send + 'static) -> T {
        Sim::run(SimConfig::default(), |rt| f(rt, Arc::new(Locks::new())))
            .unwrap()
            .0
            .finished()
            .unwrap()
    }

    /// The lock manager with each test transaction's held rows (a
    /// transaction keeps them itself in the engine).
    #[derive(Default)]
    struct Locks {
        manager: LockManager,
        held: std::sync::Mutex<BTreeMap<u64, HeldLocks>>,
    }

    impl Locks {
        fn new() -> Locks {
            Locks::default()
        }

        fn lock(&self, txn: u64, key: &LockKey, mode: LockMode) -> Result<()> {
            let mut held = self.held.lock().unwrap().remove(&txn).unwrap_or_default();
            let result = self.manager.lock(txn, &mut held, key.clone(), mode);
            self.held.lock().unwrap().insert(txn, held);
            result
        }

        fn release_all(&self, txn: u64) {
            let mut held = self.held.lock().unwrap().remove(&txn).unwrap_or_default();
            self.manager.release_all(txn, &mut held);
        }

        fn stats(&self) -> LockStats {
            self.manager.stats()
        }
    }

    #[test]
    fn shared_locks_coexist_and_exclusive_conflicts() {
        with_locks(|_, locks| {
            locks.lock(1, &key("a"), LockMode::Shared).unwrap();
            locks.lock(2, &key("a"), LockMode::Shared).unwrap();
            locks.release_all(2);
            // 1 upgrades: no other holder.
            locks.lock(1, &key("a"), LockMode::Exclusive).unwrap();
            assert_eq!(locks.stats().deaths, 0);
        });
    }

    #[test]
    fn a_wait_that_would_close_a_cycle_is_refused() {
        with_locks(|rt, locks| {
            locks.lock(1, &key("a"), LockMode::Exclusive).unwrap();
            locks.lock(2, &key("b"), LockMode::Exclusive).unwrap();
            let l2 = locks.clone();
            // 2 waits for 1 (on a) ...
            let waiter = rt.spawn("t2", move || l2.lock(2, &key("a"), LockMode::Exclusive));
            rt.sleep(1_000);
            // ... so 1 waiting for 2 (on b) would close the cycle.
            let err = locks.lock(1, &key("b"), LockMode::Exclusive).unwrap_err();
            assert!(err.is_retryable(), "{err}");
            assert_eq!(locks.stats().deaths, 1);
            locks.release_all(1);
            waiter.join().unwrap();
        });
    }

    #[test]
    fn older_waits_for_younger_until_release() {
        let order = with_locks(|rt, locks| {
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
            log.lock().clone()
        });
        assert_eq!(order, vec!["younger releases", "older got it"]);
    }

    /// LOCK-5: grants follow arrival order; a reader that arrives after a
    /// waiting writer does not overtake it, and one release wakes every
    /// compatible waiter at the front at once.
    #[test]
    fn grants_follow_arrival_order_without_barging() {
        let order = with_locks(|rt, locks| {
            let log = Arc::new(Mutex::new(Vec::new()));
            locks.lock(1, &key("r"), LockMode::Shared).unwrap();
            let mut tasks = Vec::new();
            for (txn, mode) in [
                (2, LockMode::Exclusive),
                (3, LockMode::Shared),
                (4, LockMode::Shared),
            ] {
                let (locks, log) = (locks.clone(), log.clone());
                tasks.push(rt.spawn("waiter", move || {
                    locks.lock(txn, &key("r"), mode).unwrap();
                    log.lock().push(txn);
                    rt_sleep_and_release(&locks, txn);
                }));
                rt.sleep(1_000);
            }
            assert!(log.lock().is_empty(), "3 and 4 queue behind the writer 2");
            locks.release_all(1);
            for task in tasks {
                task.join();
            }
            assert_eq!(locks.stats().waits, 3);
            log.lock().clone()
        });
        assert_eq!(order, vec![2, 3, 4]);
    }

    /// Keys on `n` different shards (LOCK-8).
    fn keys_on_distinct_shards(locks: &Locks, n: usize) -> Vec<LockKey> {
        let mut seen = Vec::new();
        let mut keys = Vec::new();
        for i in 0.. {
            let k = key(&format!("row{i}"));
            let shard: *const Mutex<Shard> = locks.manager.shard_of(&k);
            if !seen.contains(&shard) {
                seen.push(shard);
                keys.push(k);
            }
            if keys.len() == n {
                break;
            }
        }
        keys
    }

    /// LOCK-9: a cycle through rows of three shards is found, though each
    /// wait saw only its own shard's rows; and a failure wakes the waiters
    /// of every shard.
    #[test]
    fn a_cycle_across_shards_is_refused_and_a_failure_wakes_every_shard() {
        with_locks(|rt, locks| {
            let k = keys_on_distinct_shards(&locks, 3);
            for (txn, row) in [(1, &k[0]), (2, &k[1]), (3, &k[2])] {
                locks.lock(txn, row, LockMode::Exclusive).unwrap();
            }
            // 1 waits for 2, 2 waits for 3 ...
            let mut waiters = Vec::new();
            for (txn, row) in [(1, k[1].clone()), (2, k[2].clone())] {
                let locks = locks.clone();
                waiters
                    .push(rt.spawn("waiter", move || locks.lock(txn, &row, LockMode::Exclusive)));
                rt.sleep(1_000);
            }
            // ... so 3 waiting for 1 closes the cycle.
            let err = locks.lock(3, &k[0], LockMode::Exclusive).unwrap_err();
            assert!(matches!(err, Error::Deadlock { txn: 3 }), "{err}");
            assert_eq!(locks.stats().deaths, 1);
            locks.manager.fail("the log device failed");
            for waiter in waiters {
                let err = waiter.join().unwrap_err();
                assert!(matches!(err, Error::LogFailed(_)), "{err}");
            }
            let err = locks.lock(4, &key("new"), LockMode::Shared).unwrap_err();
            assert!(matches!(err, Error::LogFailed(_)), "{err}");
        });
    }

    fn rt_sleep_and_release(locks: &Locks, txn: u64) {
        flashlab_runtime::Rt::current().sleep(1_000);
        locks.release_all(txn);
    }

    /// The whole-state check passes on a table with waiters, and names the
    /// invariant a broken table breaks.
    #[test]
    fn the_whole_state_check_sees_a_broken_table() {
        Sim::run(SimConfig::default(), |_| broken_tables_are_seen())
            .unwrap()
            .0
            .finished()
            .unwrap();
    }

    fn broken_tables_are_seen() {
        let mut entry = Entry::default();
        entry.holders.0.push((1, LockMode::Exclusive));
        entry.holders.0.push((2, LockMode::Exclusive));
        let err = check_of_one_row("a", entry);
        assert!(err.contains("LOCK-1"), "{err}");
        let mut entry = Entry::default();
        entry.holders.0.push((1, LockMode::Shared));
        entry.queue.push_back(Waiter {
            txn: 2,
            mode: LockMode::Shared,
            slot: Arc::new(WaitSlot::default()),
        });
        let err = check_of_one_row("b", entry);
        assert!(err.contains("LOCK-5"), "{err}");
    }

    /// What the whole-state check says of a table whose one row, `row`,
    /// is `entry`.
    fn check_of_one_row(row: &str, entry: Entry) -> String {
        let manager = LockManager::new();
        manager
            .shard_of(&key(row))
            .try_lock()
            .unwrap()
            .rows
            .insert(key(row), entry);
        manager.check().unwrap_err()
    }
}
