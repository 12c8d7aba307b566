//! Group commit: forces, their flush waiters and the flusher role
//! (WAL-2, WAL-4, WAL-11, WAL-13; the module documentation of [`super`]
//! tells the rule).

use super::*;

impl Wal {
    /// Return once the log is durable up to `lsn` (group commit; see the
    /// module documentation).
    pub fn flush_to(&self, lsn: u64) -> Result<()> {
        self.flush_for(lsn, false)
    }

    /// After a failure (WAL-4), give up the flusher role if it was handed
    /// to this task, and return the failure.
    pub(super) fn give_up_if_failed(st: &mut LogState, granted: bool) -> Result<()> {
        match &st.failed {
            Some(failure) => {
                let failure = failure.clone();
                st.flushing &= !granted;
                Err(Error::LogFailed(failure))
            }
            None => Ok(()),
        }
    }

    /// [`Wal::flush_to`]; `commit` if a committer waits for it (its
    /// flusher may wait for its group, WAL-13).
    fn flush_for(&self, lsn: u64, commit: bool) -> Result<()> {
        let group_wait = commit && self.config.group_wait && Rt::world_current() == World::Real;
        let mut st = self.state.lock();
        // Handed the flusher role by the end of the force before (WAL-11).
        let mut granted = false;
        loop {
            Self::give_up_if_failed(&mut st, granted)?;
            if st.flushed_lsn >= lsn {
                if granted {
                    st.flushing = false;
                    Self::wake_flush_waiters(&mut st);
                }
                return Ok(());
            }
            if granted || !st.flushing {
                break;
            }
            // A force is in flight: wait for it, covered or not.
            match self.wait_flush(st, lsn) {
                Some(woken) => (st, granted) = woken,
                None => return Ok(()), // covered
            }
        }
        st.flushing = true; // WAL-2: we are the flusher
        drop(st);
        if self.config.commit_delay_ns > 0 {
            Rt::current().sleep(self.config.commit_delay_ns);
        }
        if group_wait {
            let failed = || self.failed_seen.load(std::sync::atomic::Ordering::Acquire);
            self.group.wait(failed); // WAL-13
        }
        self.force()
    }

    /// The log sectors for stream bytes `data` starting at sector `first`.
    fn sectors(&self, first: u64, data: &[u8], durable_lsn: u64, out: &mut Vec<u8>) {
        let payload = self.layout.payload_bytes() as usize;
        out.clear();
        out.reserve(data.len().div_ceil(payload) * self.layout.sector_bytes as usize);
        for (k, chunk) in (first..).zip(data.chunks(payload)) {
            self.layout.encode_sector(k, durable_lsn, chunk, out);
        }
    }

    /// Write and flush everything appended so far. The caller set `flushing`.
    fn force(&self) -> Result<()> {
        let mut st = self.state.lock();
        let write_start = st.buf_start_lsn;
        let write_end = st.end_lsn;
        let durable_lsn = st.flushed_lsn;
        let (mut data, mut sectors) = std::mem::take(&mut st.force_buffers);
        // The force takes the buffer whole and leaves in its place only the
        // bytes of its last, partial sector, which the next force writes
        // again (WAL-3): appenders wait for a copy of at most one sector
        // under this lock, not of everything appended since the last force.
        data.clear();
        std::mem::swap(&mut data, &mut st.buf);
        let keep_from = self.layout.sector_lsn(self.layout.sector_of(write_end));
        st.buf
            .extend_from_slice(&data[(keep_from - write_start) as usize..]);
        st.buf_start_lsn = keep_from;
        self.note_buffer_len(&st);
        st.writing_end_lsn = write_end;
        let commits = std::mem::take(&mut st.commits_pending);
        self.group.set_pending(0);
        let rewrite = write_start < st.last_write_end_lsn && !data.is_empty();
        drop(st);

        let first = self.layout.sector_of(write_start);
        let started_ns = Rt::now_ns_current();
        let (result, sectors_written) = self.write_chunks(first, &data, durable_lsn, &mut sectors);
        let elapsed_ns = Rt::now_ns_current() - started_ns;

        let mut st = self.state.lock();
        st.writing_end_lsn = 0;
        let data_is_empty = data.is_empty();
        let kept_max = self.config.buffer_bytes * FORCE_BUFFERS_KEPT_FACTOR;
        if data.capacity() <= kept_max && sectors.capacity() <= kept_max {
            st.force_buffers = (data, sectors);
        }
        // A flush of the log device that failed elsewhere meanwhile (the
        // master record's) may have covered this force's write and lost it:
        // this force's own flush proves nothing then (WAL-4).
        let result = match (result, &st.failed) {
            (Ok(()), Some(failure)) => Err(Error::LogFailed(failure.clone())),
            (result, _) => result,
        };
        if let Err(e) = result {
            let why = self.record_failure(&mut st, &e.to_string()); // WAL-4
            st.flushing = false;
            drop(st);
            self.failed_now(&why);
            return Err(Error::LogFailed(e.to_string()));
        }
        st.flushing = false;
        assert!(write_end <= st.end_lsn, "WAL-1");
        st.flushed_lsn = write_end;
        self.flushed_seen
            .store(write_end, std::sync::atomic::Ordering::Release);
        st.last_write_end_lsn = write_end;
        if !data_is_empty {
            st.stats.writes += 1;
            st.stats.sectors_written += sectors_written;
            st.stats.write_ns_total += elapsed_ns;
            st.stats.commits_forced += commits;
            st.stats.tail_rewrites += u64::from(rewrite);
        }
        Self::wake_flush_waiters(&mut st);
        if !data_is_empty {
            let left_waiting = st.flush_waiters.len() as u64 + u64::from(st.flushing);
            self.group.force_ended(commits, left_waiting, elapsed_ns);
        }
        self.check_state(&st);
        drop(st);
        Ok(())
    }

    /// Wait, as one of the log's flush waiters, until a force or master
    /// write wakes this task (WAL-11); `lsn` is what it needs durable. True
    /// with the guard if the flusher role was handed to this task.
    ///
    /// In the real world, the waiter that will take the flusher role next
    /// (the first one the force in flight does not cover) first spins for
    /// up to [`FLUSH_HEIR_SPIN_NS`], yielding, before it sleeps: a sleeping
    /// heir must be woken by the kernel before the next force can start.
    ///
    /// `None` when the waiter was woken because the log is durable past
    /// `lsn`: it returns without taking the log's lock again (after a
    /// force, every covered committer would otherwise queue on the lock
    /// just to see that). Otherwise the lock again, and whether the
    /// flusher role was handed over.
    pub(super) fn wait_flush<'a>(
        &'a self,
        mut st: flashlab_runtime::MutexGuard<'a, LogState>,
        lsn: u64,
    ) -> Option<(flashlab_runtime::MutexGuard<'a, LogState>, bool)> {
        use std::sync::atomic::Ordering;
        let slot = Arc::new(FlushSlot::default());
        st.flush_waiters.push_back((lsn, slot.clone()));
        // Every queued waiter still needs a force (the end of a force takes
        // out those it covered), so the heir is the first in the queue.
        let heir = st.flush_waiters.len() == 1;
        let real = Rt::world_current() == World::Real;
        // A few other waiters spin too, so that they run their next
        // transaction at once, in time for the next group (WAL-13).
        let spinner = real
            && !heir
            && self.config.group_wait
            && self.group.paying()
            && self
                .spinners
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                    (n < FLUSH_SPINNERS_MAX).then_some(n + 1)
                })
                .is_ok();
        if heir && real || spinner {
            drop(st);
            let started = std::time::Instant::now();
            while !slot.woken.load(Ordering::Acquire)
                && started.elapsed().as_nanos() < u128::from(FLUSH_HEIR_SPIN_NS)
            {
                std::thread::yield_now();
            }
            if spinner {
                self.spinners.fetch_sub(1, Ordering::AcqRel);
            }
            if slot.covered.load(Ordering::Acquire) {
                return None;
            }
            st = self.state.lock();
            if slot.woken.load(Ordering::Acquire) {
                return Some((st, slot.granted.load(Ordering::Acquire)));
            }
        }
        slot.wake.wait_released(st);
        if slot.covered.load(Ordering::Acquire) {
            return None;
        }
        Some((self.state.lock(), slot.granted.load(Ordering::Acquire)))
    }

    /// The flusher role is free (WAL-11): wake the waiters the log now
    /// covers, and hand the role to the first one it does not cover, in
    /// arrival order, so that a task that keeps committing cannot take it
    /// again and again before a waiting master-record write (which once
    /// held a checkpoint back until a bulk load ended). The others sleep
    /// on: the next force's end wakes them. After a failure, wake everyone
    /// and hand nothing.
    pub(super) fn wake_flush_waiters(st: &mut LogState) {
        use std::sync::atomic::Ordering;
        let (flushed, failed) = (st.flushed_lsn, st.failed.is_some());
        let mut role_free = !st.flushing && !failed;
        let mut handed = false;
        st.flush_waiters.retain(|(lsn, slot)| {
            if failed || *lsn <= flushed {
                slot.covered.store(!failed, Ordering::Release);
                slot.woken.store(true, Ordering::Release);
                slot.wake.notify_one();
                return false;
            }
            if role_free {
                role_free = false;
                handed = true;
                slot.granted.store(true, Ordering::Release);
                slot.woken.store(true, Ordering::Release);
                slot.wake.notify_one();
                return false;
            }
            true
        });
        st.flushing |= handed; // WAL-2: the role now belongs to the woken task
    }

    /// Write the stream bytes `data` as sectors from sector `first` on, at
    /// most [`FORCE_SECTORS_MAX`] sectors per write and flush: each chunk's
    /// sectors carry the durable LSN the chunks before it reached, which
    /// bounds how far past its end recovery must look. Returns the result
    /// and the sectors written.
    fn write_chunks(
        &self,
        first: u64,
        data: &[u8],
        mut durable_lsn: u64,
        sectors: &mut Vec<u8>,
    ) -> (Result<()>, u64) {
        let payload = self.layout.payload_bytes() as usize;
        let mut written = 0;
        for (i, chunk) in data
            .chunks(FORCE_SECTORS_MAX as usize * payload)
            .enumerate()
        {
            let k = first + i as u64 * FORCE_SECTORS_MAX;
            self.sectors(k, chunk, durable_lsn, sectors);
            if let Err(e) = self.write_and_sync(k, sectors) {
                return (Err(e), written);
            }
            written += sectors.len() as u64 / self.layout.sector_bytes;
            durable_lsn = durable_lsn.max(self.layout.sector_lsn(k) + chunk.len() as u64);
        }
        (Ok(()), written)
    }

    /// Write `sectors` from sector `first` on (in two parts if they wrap
    /// around the region), then flush.
    fn write_and_sync(&self, first: u64, sectors: &[u8]) -> Result<()> {
        if sectors.is_empty() {
            return Ok(());
        }
        let l = &self.layout;
        let to_region_end = ((l.sectors - first % l.sectors) * l.sector_bytes) as usize;
        let (a, b) = sectors.split_at(to_region_end.min(sectors.len()));
        self.device.write(l.offset_of_sector(first), a)?;
        if !b.is_empty() {
            self.device.write(l.region_start, b)?;
        }
        // Even under no-sync a force is made durable: the buffer pool's
        // write-ahead rule relies on it. No-sync only skips the wait.
        // Never flush again after a failed flush (WAL-4).
        if let Some(failure) = self.failed() {
            return Err(Error::LogFailed(failure));
        }
        self.device.flush()?;
        Ok(())
    }

    /// Force everything appended so far.
    pub fn flush_all(&self) -> Result<()> {
        let end = self.end_lsn();
        self.flush_to(end)
    }

    /// Wait for a commit record ending at `end_lsn` as the durability level says.
    pub fn commit_wait(&self, end_lsn: u64) -> Result<()> {
        match self.config.durability {
            Durability::Sync => self.flush_for(end_lsn, true),
            Durability::NoSync => Ok(()),
        }
    }
}
