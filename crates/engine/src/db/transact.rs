//! Transactions in a closure: [`Database::transact`] runs a body, commits
//! it, and runs it again when the engine says that may succeed (a deadlock
//! victim, a serialization failure, a log that is full for now), with a
//! growing pause between attempts and at most [`TRANSACT_ATTEMPTS_MAX`]
//! attempts. An error the body returns rolls the transaction back and, if
//! it is not retryable, is returned unchanged, as is any error no retry
//! can mend (a failed log, damage, a full space).

use flashlab_runtime::Rt;

use super::{Database, Transaction};
use crate::error::Result;

/// Most attempts [`Database::transact`] makes before it returns the last
/// retryable error.
pub const TRANSACT_ATTEMPTS_MAX: u32 = 16;
/// The pause before the second attempt; it doubles with each attempt.
const BACKOFF_FIRST_NS: u64 = 100_000;
/// The longest pause between two attempts.
const BACKOFF_MAX_NS: u64 = 100_000_000;

impl Database {
    /// Run `body` in a transaction and commit it, retrying on retryable
    /// errors; see the module documentation. Returns what `body` returned.
    pub fn transact<T>(&self, mut body: impl FnMut(&mut Transaction) -> Result<T>) -> Result<T> {
        let mut attempt = 1;
        loop {
            let mut txn = self.begin()?;
            let outcome = match body(&mut txn) {
                Ok(value) => txn.commit().map(|()| value),
                Err(e) => {
                    // The body's error is the one to report, whatever the
                    // rollback says.
                    let _ = txn.abort();
                    Err(e)
                }
            };
            match outcome {
                Err(e) if e.is_retryable() && attempt < TRANSACT_ATTEMPTS_MAX => {
                    backoff(attempt);
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// Run `body` in a read-only transaction of the latest committed state
    /// (its writes are refused) and end it.
    pub fn read<T>(&self, body: impl FnOnce(&mut Transaction) -> Result<T>) -> Result<T> {
        let mut txn = self.begin()?.read_only();
        let value = body(&mut txn);
        let _ = txn.abort();
        value
    }

    /// Run `body` in a read-only transaction that sees the database as of
    /// commit timestamp `ts` (time travel, within the rollback space's
    /// retention) and end it.
    pub fn read_as_of<T>(
        &self,
        ts: u64,
        body: impl FnOnce(&mut Transaction) -> Result<T>,
    ) -> Result<T> {
        let mut txn = self.begin_as_of(ts)?;
        let value = body(&mut txn);
        let _ = txn.abort();
        value
    }
}

/// Pause before attempt `attempt + 1`: exponential, capped, with jitter
/// from the runtime's random source, so two victims of one deadlock do not
/// meet again at once.
fn backoff(attempt: u32) {
    let rt = Rt::current();
    let base = BACKOFF_FIRST_NS
        .saturating_mul(1 << (attempt - 1).min(20))
        .min(BACKOFF_MAX_NS);
    let jitter = rt.random_u64() % (base / 2 + 1);
    rt.sleep(base / 2 + jitter);
}
