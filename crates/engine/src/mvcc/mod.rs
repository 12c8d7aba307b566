//! # Multiversion concurrency control with rollback segments
//!
//! lee2008 section 5: when a transaction updates or deletes a row, the
//! row's *before-image* goes to a rollback segment in the rollback space,
//! append-only, and the new version's header points to it. A reader whose
//! snapshot predates the current version follows the chain into the
//! rollback segments, one random read per version, until it finds the
//! version its snapshot may see. Readers take no locks, so readers never
//! block writers and writers never block readers; writers still lock rows
//! exclusively, and under snapshot isolation the first updater wins: a
//! transaction that would overwrite a version committed after its snapshot
//! fails with a retryable serialization error.
//!
//! Versions name their creator by transaction id (the version header's
//! flag bit). [`Versions`] maps transaction ids to their state: active, or
//! committed at a commit timestamp. Commit timestamps are handed out in
//! commit order when the commit record is appended; a commit becomes
//! *visible* only once it is durable, and a snapshot sees every commit up to
//! the *visible horizon*: the highest timestamp below which every commit is
//! visible. A transaction id no longer in the map, and every transaction
//! that committed before the database was opened, counts as committed
//! before every snapshot.
//!
//! Rollback segments ([`rollback`]) serve concurrency, not recovery: the log
//! alone recovers the database, and a restart (clean or not) starts with
//! empty rollback segments. No snapshot survives a restart, so no reader can
//! need a version from before it; time travel to before the restart fails
//! with "snapshot too old".
//!
//! Invariants (MVCC-n):
//! 1. A version created by an active transaction is visible only to that
//!    transaction.
//! 2. A snapshot at timestamp `s` sees exactly the versions committed at or
//!    before `s` (following chains as deep as needed).
//! 3. A version no snapshot and no retention window needs may be discarded;
//!    a read that needs a discarded version fails with "snapshot too old",
//!    never a wrong answer.
//! 4. Two transactions never both commit a change to one row that the
//!    other's snapshot did not see (first updater wins).
//! 5. Outside [`Versions`]' lock, every transaction id in its map is at or
//!    above `min_txn`: the map's first key, stored under the lock after
//!    the last change of each critical section. A creator below the
//!    `min_txn` its reader loads is not in the map, and reads as an old
//!    commit without the lock. This rests on three rules. First, an id
//!    is entered once, at its begin, and never again after it leaves the
//!    map (commits and ends change only the caller's own entry; a prune
//!    keeps every active one). Second, it is entered before any version
//!    naming it is written. Third, a reader finds a version's header
//!    under a page latch or pin taken after that write. The latches
//!    order the creator's entry (and the store of `min_txn` that followed
//!    it) before the reader's load, so the load returns that store or a
//!    later one, and a later one is above the creator only once the
//!    creator has left. Debug builds check the answer against the map.
//!
//! The map sits behind one lock that every transaction takes at its
//! begin, its commit and its end, and that visibility checks take for
//! recent creators. It is a host spin-then-park lock
//! ([`flashlab_runtime::hostlock`]), not a runtime lock: its critical
//! sections never block, and in the simulated world it adds no preemption
//! point. Checks of old creators (most rows of a large table) skip it
//! (MVCC-5), so cores do not trade the lock's cache line for them.

pub mod rollback;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use flashlab_runtime::hostlock::{HostMutex, HostMutexGuard};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// How much of others' work a transaction sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Isolation {
    /// One snapshot for the whole transaction; first updater wins. Write
    /// skew is possible.
    #[default]
    Snapshot,
    /// A fresh snapshot for every statement; an update waits for the row's
    /// lock and then changes the latest committed version.
    ReadCommitted,
}

/// MVCC settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MvccConfig {
    pub isolation: Isolation,
    /// Size of a rollback-segment extent (lee2008: 1 MB).
    pub extent_bytes: u64,
    /// Page size of the rollback space.
    pub page_bytes: usize,
    /// Keep versions at least this long after they were replaced, for time
    /// travel (Oracle's undo retention).
    pub retention_ns: u64,
    /// Buffer for rollback pages if no data space has their page size.
    pub buffer_bytes: u64,
    /// Model an *aged* rollback space: fresh extents are taken in a fixed
    /// pseudo-random order among the first `aged_span_bytes` of the space,
    /// as a server's segments take them from a free list shuffled by long
    /// use (lee2008 Figure 5: reads "clustered but randomly scattered"
    /// over about 1 GB). 0 (the default): in address order.
    pub aged_span_bytes: u64,
}

impl Default for MvccConfig {
    fn default() -> Self {
        MvccConfig {
            isolation: Isolation::Snapshot,
            extent_bytes: 1 << 20,
            page_bytes: 8192,
            retention_ns: 0,
            buffer_bytes: 16 << 20,
            aged_span_bytes: 0,
        }
    }
}

/// The state of a transaction, as readers see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnState {
    Active,
    /// Committed at this timestamp (visible once at or below the horizon).
    Committed(u64),
    /// Rolled back when the horizon was at this timestamp. Its versions
    /// are undone, but a reader may still hold one it read before the undo:
    /// the entry stays (invisible to all) until every active snapshot is
    /// younger than the abort.
    Aborted(u64),
}

/// Most (commit timestamp, time) pairs kept for time travel by time.
const COMMIT_TIMES_MAX: usize = 1 << 20;

#[derive(Default)]
struct State {
    txns: BTreeMap<u64, TxnState>,
    /// Commit timestamps handed out but not yet visible, with the end of
    /// their commit record once appended.
    pending: BTreeMap<u64, Option<u64>>,
    /// Every commit at or below this is visible.
    horizon: u64,
    /// Highest timestamp handed out.
    last_ts: u64,
    /// Active snapshots: timestamp → count.
    snapshots: BTreeMap<u64, u32>,
    /// Oldest timestamp time travel may ask for (raised as versions are
    /// discarded; the first timestamp of this incarnation at open).
    oldest_ts: u64,
    /// (commit timestamp, virtual or wall-clock time) for `as of` a time.
    commit_times: VecDeque<(u64, u64)>,
}

/// Commits between two prunings of the transaction map.
const PRUNE_EVERY_COMMITS: u64 = 1024;

/// A value alone on its cache line (64 bytes on the x86 and ARM machines
/// this runs on).
#[repr(align(64))]
struct CacheLine<T>(T);

impl<T> std::ops::Deref for CacheLine<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Transaction states, snapshots and the visible horizon.
pub struct Versions {
    state: HostMutex<State>,
    /// The first key of `state.txns` (`u64::MAX` if empty), stored under
    /// the lock when it changes (MVCC-5). On a line of its own: readers
    /// load it without the lock, so the lock's word and the map's fields,
    /// written by every holder, must not share its line.
    min_txn: CacheLine<AtomicU64>,
    /// Transactions with ids below this committed before the database was
    /// opened.
    recovered_below: u64,
    retention_ns: u64,
}

impl crate::wal::CommitClock for Versions {
    fn assign(&self, txn: u64) -> u64 {
        let mut st = self.lock();
        st.last_ts += 1;
        let ts = st.last_ts;
        st.pending.insert(ts, None);
        st.txns.insert(txn, TxnState::Committed(ts));
        self.note_min(&st);
        ts
    }

    fn appended(&self, ts: u64, end_lsn: u64) {
        if let Some(end) = self.lock().pending.get_mut(&ts) {
            *end = Some(end_lsn);
        }
    }
}

impl Versions {
    /// `next_txn` and `next_ts` as recovery or creation left them; time
    /// travel reaches back `retention_ns`.
    pub fn new(next_txn: u64, next_ts: u64, retention_ns: u64) -> Versions {
        let horizon = next_ts.saturating_sub(1);
        Versions {
            state: HostMutex::new(State {
                horizon,
                last_ts: horizon,
                oldest_ts: horizon,
                ..State::default()
            }),
            min_txn: CacheLine(AtomicU64::new(u64::MAX)),
            recovered_below: next_txn,
            retention_ns,
        }
    }

    fn lock(&self) -> HostMutexGuard<'_, State> {
        self.state.lock()
    }

    /// Store the map's first key after a change, under the lock (MVCC-5);
    /// only when it moved, so that readers keep the line in their caches.
    fn note_min(&self, st: &State) {
        let first = st.txns.first_key_value().map_or(u64::MAX, |(&k, _)| k);
        if self.min_txn.load(Ordering::Relaxed) != first {
            self.min_txn.store(first, Ordering::Release);
        }
    }

    /// Enter `txn` as active (MVCC-5's rule one: once, at its begin).
    fn enter(&self, st: &mut State, txn: u64) {
        st.txns.insert(txn, TxnState::Active);
        self.note_min(st);
    }

    /// Register a snapshot at the visible horizon.
    fn snapshot_at_horizon(st: &mut State) -> u64 {
        let ts = st.horizon;
        *st.snapshots.entry(ts).or_insert(0) += 1;
        ts
    }

    pub fn begin_txn(&self, txn: u64) {
        self.enter(&mut self.lock(), txn);
    }

    /// [`Versions::begin_txn`] and [`Versions::snapshot`] under one
    /// acquisition of the lock: the transaction's snapshot timestamp.
    pub fn begin_with_snapshot(&self, txn: u64) -> u64 {
        let mut st = self.lock();
        self.enter(&mut st, txn);
        Self::snapshot_at_horizon(&mut st)
    }

    /// Every commit whose record ends at or before `durable_lsn` is
    /// durable: make them visible and advance the horizon. Timestamps follow
    /// log order (WAL-7), so a commit that returns is visible to the next
    /// snapshot.
    pub fn commits_durable_through(&self, durable_lsn: u64, now: u64) {
        let mut st = self.lock();
        let done: Vec<u64> = st
            .pending
            .iter()
            .take_while(|(_, end)| end.is_some_and(|end| end <= durable_lsn))
            .map(|(&ts, _)| ts)
            .collect();
        for &ts in &done {
            st.pending.remove(&ts);
            if st.commit_times.len() >= COMMIT_TIMES_MAX {
                st.commit_times.pop_front();
            }
            st.commit_times.push_back((ts, now));
        }
        let horizon = st
            .pending
            .first_key_value()
            .map_or(st.last_ts, |(&first, _)| first - 1);
        st.horizon = st.horizon.max(horizon);
        if done.iter().any(|ts| ts.is_multiple_of(PRUNE_EVERY_COMMITS)) {
            self.prune(&mut st, now);
        }
    }

    /// Forget committed transactions that every snapshot, present or
    /// allowed by the retention window, sees anyway; time travel to before
    /// the window fails from then on (MVCC-3).
    fn prune(&self, st: &mut State, now: u64) {
        let window_start = now.saturating_sub(self.retention_ns);
        let retained = st
            .commit_times
            .iter()
            .take_while(|&&(_, t)| t <= window_start)
            .last()
            .map_or(st.oldest_ts, |&(ts, _)| ts);
        let oldest_snapshot = st.snapshots.keys().next().copied().unwrap_or(st.horizon);
        let floor = retained.min(oldest_snapshot).min(st.horizon);
        st.oldest_ts = st.oldest_ts.max(floor);
        st.txns.retain(|_, state| match state {
            TxnState::Committed(c) => *c > floor,
            TxnState::Aborted(at) => *at >= oldest_snapshot,
            TxnState::Active => true,
        });
        self.note_min(st);
        while st.commit_times.front().is_some_and(|&(ts, _)| ts < floor) {
            st.commit_times.pop_front();
        }
    }

    /// The transaction rolled back (its versions are undone).
    pub fn end_aborted(&self, txn: u64) {
        let mut st = self.lock();
        let horizon = st.horizon;
        st.txns.insert(txn, TxnState::Aborted(horizon));
        self.note_min(&st);
    }

    /// A transaction that wrote nothing ended: forget it, and release its
    /// snapshot at `snapshot_ts` under the same acquisition of the lock.
    pub fn end_read_only(&self, txn: u64, snapshot_ts: u64) {
        let mut st = self.lock();
        st.txns.remove(&txn);
        self.note_min(&st);
        Self::release_snapshot_in(&mut st, snapshot_ts);
    }

    /// Take a snapshot at the visible horizon.
    pub fn snapshot(&self) -> u64 {
        Self::snapshot_at_horizon(&mut self.lock())
    }

    /// Take a snapshot in the past (time travel), if still retained.
    pub fn snapshot_as_of(&self, ts: u64) -> Result<u64> {
        let mut st = self.lock();
        if ts < st.oldest_ts {
            return Err(Error::SnapshotTooOld(format!(
                "timestamp {ts} is older than the oldest retained version (timestamp {})",
                st.oldest_ts
            )));
        }
        let ts = ts.min(st.horizon);
        *st.snapshots.entry(ts).or_insert(0) += 1;
        Ok(ts)
    }

    /// The commit timestamp current at time `at` (virtual or wall clock).
    pub fn ts_at_time(&self, at: u64) -> Result<u64> {
        let st = self.lock();
        let ts = st
            .commit_times
            .iter()
            .take_while(|&&(_, t)| t <= at)
            .last()
            .map(|&(ts, _)| ts);
        match ts {
            Some(ts) => Ok(ts),
            None if st.commit_times.front().is_none_or(|&(_, t)| at >= t) => Ok(st.horizon),
            None => Err(Error::SnapshotTooOld(format!(
                "no commit is retained from before time {at} ns"
            ))),
        }
    }

    pub fn release_snapshot(&self, ts: u64) {
        Self::release_snapshot_in(&mut self.lock(), ts);
    }

    fn release_snapshot_in(st: &mut State, ts: u64) {
        if let Some(count) = st.snapshots.get_mut(&ts) {
            *count -= 1;
            if *count == 0 {
                st.snapshots.remove(&ts);
            }
        }
    }

    /// The oldest active snapshot, or the horizon if none.
    pub fn oldest_snapshot(&self) -> u64 {
        let st = self.lock();
        st.snapshots.keys().next().copied().unwrap_or(st.horizon)
    }

    /// The state of the transaction that created a version.
    pub fn state(&self, txn: u64) -> TxnState {
        if txn < self.recovered_below {
            return TxnState::Committed(0);
        }
        // MVCC-5: below the map's first key, not in the map.
        if txn < self.min_txn.load(Ordering::Acquire) {
            debug_assert!(
                !self.lock().txns.contains_key(&txn),
                "MVCC-5: transaction {txn} is in the map, below its first key"
            );
            return TxnState::Committed(0);
        }
        self.lock()
            .txns
            .get(&txn)
            .copied()
            .unwrap_or(TxnState::Committed(0))
    }

    /// Is a version by `creator` visible to `reader` at snapshot `ts`?
    pub fn visible(&self, creator: u64, reader: u64, ts: u64) -> bool {
        if creator == reader {
            return true;
        }
        match self.state(creator) {
            TxnState::Active | TxnState::Aborted(_) => false,
            TxnState::Committed(c) => c <= ts,
        }
    }

    /// The next commit timestamp to hand out (for checkpoints).
    pub fn next_ts(&self) -> u64 {
        self.lock().last_ts + 1
    }

    /// The visible horizon.
    pub fn horizon(&self) -> u64 {
        self.lock().horizon
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn horizon_follows_the_durable_log() {
        use crate::wal::CommitClock;
        let v = Versions::new(10, 1, 0);
        v.begin_txn(10);
        v.begin_txn(11);
        let a = v.assign(10);
        v.appended(a, 100);
        let b = v.assign(11);
        v.appended(b, 200);
        v.commits_durable_through(150, 0);
        assert_eq!(v.horizon(), a, "a is durable, b is not");
        assert!(v.visible(10, 99, a) && !v.visible(11, 99, a));
        v.commits_durable_through(200, 0);
        assert_eq!(v.horizon(), b);
        assert!(v.visible(11, 99, b));
    }

    #[test]
    fn recovered_and_forgotten_transactions_are_old_commits() {
        let v = Versions::new(50, 7, 0);
        assert!(v.visible(3, 60, 6));
        v.begin_txn(51);
        assert!(!v.visible(51, 60, 100), "MVCC-1");
        assert!(v.visible(51, 51, 0), "a transaction sees its own versions");
    }

    /// MVCC-5: `min_txn` follows the map's first key through begins out of
    /// id order, ends, aborts and a prune that keeps an active entry, and
    /// the answer without the lock agrees with the map's on both sides.
    #[test]
    fn the_first_key_bound_follows_the_map() {
        use crate::wal::CommitClock;
        let v = Versions::new(100, 1, 0);
        let bound = |v: &Versions| v.min_txn.load(Ordering::Acquire);
        let in_map = |v: &Versions, txn: u64| v.lock().txns.get(&txn).copied();
        assert_eq!(bound(&v), u64::MAX);
        let ts = v.begin_with_snapshot(105);
        assert_eq!((bound(&v), ts), (105, 0));
        v.begin_txn(103);
        assert_eq!(bound(&v), 103, "a begin out of id order lowers it");
        assert_eq!(v.state(103), TxnState::Active);
        v.end_read_only(103, u64::MAX);
        assert_eq!(bound(&v), 105);
        assert_eq!(v.state(103), TxnState::Committed(0), "left: an old commit");
        v.begin_txn(104);
        v.end_aborted(104);
        assert_eq!(bound(&v), 104, "an aborted entry stays");
        assert!(matches!(v.state(104), TxnState::Aborted(_)));
        v.release_snapshot(ts);
        // 110 stays active across the prune; 105 and the rest commit.
        v.begin_txn(110);
        let c = v.assign(105);
        v.appended(c, 10);
        for txn in 111..111 + PRUNE_EVERY_COMMITS {
            v.begin_txn(txn);
            let ts = v.assign(txn);
            v.appended(ts, 10 + txn);
        }
        v.commits_durable_through(u64::MAX, 0);
        assert_eq!(bound(&v), 110, "the prune kept the active entry only");
        assert_eq!(in_map(&v, 104), None, "the prune forgot the abort");
        for txn in 100..111 + PRUNE_EVERY_COMMITS {
            let expected = in_map(&v, txn).unwrap_or(TxnState::Committed(0));
            assert_eq!(v.state(txn), expected, "transaction {txn}");
        }
        assert_eq!(v.state(110), TxnState::Active);
    }
}
