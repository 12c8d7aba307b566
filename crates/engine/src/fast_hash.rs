//! A fast hasher for the engine's in-memory tables (the buffer pool's page
//! index, the lock table).
//!
//! The standard library's default hasher (SipHash with a random key) resists
//! keys chosen to collide, which these tables do not need: their keys are
//! page ids and row keys the engine itself produces. This one mixes a word
//! at a time with one rotate, one xor and one multiply (the scheme of
//! `rustc-hash`'s FxHasher) and ends with MurmurHash3's finalizer (HASH-2),
//! a few cycles per key instead of a few dozen.
//!
//! Invariants (HASH-n):
//! 1. The hash of a key depends only on its bytes: the same key hashes the
//!    same in every process, so a table's iteration order (where one is
//!    iterated at all) is the same from run to run.
//! 2. Every input bit reaches the low bits of the hash, which pick the
//!    bucket: keys that differ in one byte anywhere spread over the table.

use std::hash::{BuildHasherDefault, Hasher};

/// The multiplier: odd, with its bits spread (from FxHasher).
const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;
/// Bytes mixed in at once.
const WORD_BYTES: usize = std::mem::size_of::<u64>();

/// See the module documentation.
#[derive(Clone, Copy, Default)]
pub struct FastHasher {
    hash: u64,
}

/// Builds [`FastHasher`]s, for `HashMap::with_hasher` and `default`.
pub type FastBuildHasher = BuildHasherDefault<FastHasher>;

/// A `HashMap` with the [`FastHasher`].
pub type FastHashMap<K, V> = std::collections::HashMap<K, V, FastBuildHasher>;

impl FastHasher {
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(WORD_BYTES);
        for word in &mut words {
            self.add(u64::from_le_bytes(word.try_into().expect("a word")));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; WORD_BYTES];
            last[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(last));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u16(&mut self, n: u16) {
        self.add(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        // HASH-2: fold the high bits into the low ones (MurmurHash3's
        // finalizer). A multiply carries a word's low bits up but never its
        // high bits down, and the table picks buckets by the low bits: keys
        // that differ only in their last bytes (big-endian row ids) would
        // otherwise all land in one bucket.
        let mut h = self.hash;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, Hash};

    #[test]
    fn keys_differing_in_their_last_byte_spread_over_the_low_bits() {
        // Big-endian row ids: only the last byte differs (HASH-2).
        let build = FastBuildHasher::default();
        let buckets: std::collections::BTreeSet<u64> = (0u64..256)
            .map(|i| build.hash_one((7u32, i.to_be_bytes().to_vec())) & 0xff)
            .collect();
        assert!(buckets.len() > 128, "{} of 256 buckets", buckets.len());
    }

    #[test]
    fn equal_keys_hash_equal_and_neighbours_differ() {
        let build = FastBuildHasher::default();
        let key = |k: &(u32, Vec<u8>)| build.hash_one(k);
        assert_eq!(key(&(1, b"abc".to_vec())), key(&(1, b"abc".to_vec())));
        assert_ne!(key(&(1, b"abc".to_vec())), key(&(2, b"abc".to_vec())));
        assert_ne!(key(&(1, b"abc".to_vec())), key(&(1, b"abd".to_vec())));
        // The length prefix keeps a trailing zero byte apart.
        assert_ne!(key(&(1, b"ab".to_vec())), key(&(1, b"ab\0".to_vec())));
        let mut h = FastHasher::default();
        42u64.hash(&mut h);
        assert_eq!(h.finish(), {
            let mut g = FastHasher::default();
            g.write_u64(42);
            g.finish()
        });
    }
}
