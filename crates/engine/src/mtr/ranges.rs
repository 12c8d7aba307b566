//! Byte-range redo: where a page's image after a change differs from its
//! image before, and how a range list is applied back.
//!
//! A mini-transaction logs each page it wrote as the ranges of bytes that
//! changed ([`diff`]), or, for the first change after a checkpoint, as a
//! full-page image: the ranges of its body that are not zero
//! ([`nonzero_ranges`]), applied over a zeroed body. Recovery and page
//! repair apply them (`wal::record::apply_redo`, `wal::record::apply_ranges`,
//! beside the record format they read).
//!
//! A range ends before the first run of [`DIFF_GAP_BYTES_MIN`] unchanged
//! bytes: a shorter gap costs less inside a range than a range header
//! does. The result is exactly what a byte-by-byte scan gives (the tests
//! compare the two); the scan only goes faster where it can:
//! - in a diff against a before-image, unchanged spans of
//!   [`DIFF_SPAN_BYTES`] are skipped with one slice comparison, the C
//!   library's vectorised one; in any scan, unchanged blocks of
//!   [`DIFF_BLOCK_BYTES`] with one array comparison;
//! - inside a change, a block whose every word changed is taken in one
//!   step: a gap of [`DIFF_GAP_BYTES_MIN`] covers a whole word, so such a
//!   block holds none, and only the unchanged bytes at its two ends can
//!   start or finish one.
//!
//! The log's bytes therefore do not depend on how the scan is done, and
//! neither does any simulated result.

use crate::page::PAGE_BODY_OFFSET;

/// Gaps of unchanged bytes shorter than this are folded into one range:
/// a range header costs about as much.
const DIFF_GAP_BYTES_MIN: usize = 16;

/// MTR-1: a structure changed neither the page's size nor its header.
pub(super) fn check_header_kept(before: &[u8], after: &[u8]) {
    assert_eq!(before.len(), after.len(), "MTR-1: a page changed size");
    assert_eq!(
        before[..PAGE_BODY_OFFSET],
        after[..PAGE_BODY_OFFSET],
        "MTR-1: a structure changed the page header"
    );
}

/// The ranges where `after` differs from `before`, from `PAGE_BODY_OFFSET`
/// on (MTR-1: the header before it is the pool's).
pub fn diff(before: &[u8], after: &[u8]) -> Vec<(u32, Vec<u8>)> {
    check_header_kept(before, after);
    changed_ranges(Some(before), after)
}

/// Like [`diff`], for a before-image whose header is the pool's (a frame):
/// only the bodies are compared.
pub(super) fn diff_body(before: &[u8], after: &[u8]) -> Vec<(u32, Vec<u8>)> {
    assert_eq!(before.len(), after.len(), "MTR-1: a page changed size");
    changed_ranges(Some(before), after)
}

/// The ranges of a full-page image: where `after`'s body differs from a
/// zeroed body, as [`diff`] against a copy of `after` with its body zeroed
/// would give, without building that copy.
pub fn nonzero_ranges(after: &[u8]) -> Vec<(u32, Vec<u8>)> {
    changed_ranges(None, after)
}

/// The ranges of `after`, from `PAGE_BODY_OFFSET` on, where it differs from
/// `before` (`None`: from zeros), gaps of fewer than [`DIFF_GAP_BYTES_MIN`]
/// unchanged bytes folded into the ranges around them.
fn changed_ranges(before: Option<&[u8]>, after: &[u8]) -> Vec<(u32, Vec<u8>)> {
    changed_ranges_from(before, after, PAGE_BODY_OFFSET)
}

/// The diff of a page whose only change is `bytes` at `offset` of
/// `before` (MTR-13): the ranges a diff of the whole page would give, found
/// in the changed window alone (the bytes around it are unchanged, so no
/// range reaches past it, and the word steps line up with the start of
/// each range as in a whole-page diff).
pub(super) fn diff_in_place(before: &[u8], offset: usize, bytes: &[u8]) -> Vec<(u32, Vec<u8>)> {
    let window = &before[offset..offset + bytes.len()];
    let mut ranges = changed_ranges_from(Some(window), bytes, 0);
    for (start, _) in &mut ranges {
        *start += offset as u32;
    }
    ranges
}

/// [`changed_ranges`] from byte `from` on.
fn changed_ranges_from(before: Option<&[u8]>, after: &[u8], from: usize) -> Vec<(u32, Vec<u8>)> {
    let n = after.len();
    let mut ranges: Vec<(u32, Vec<u8>)> = Vec::new();
    let mut i = from;
    while i < n {
        // Most of a page is unchanged: skip it by spans, blocks, words.
        i = first_difference(before, after, i);
        if i >= n {
            break;
        }
        let start = i;
        let end = end_of_change(before, after, i);
        ranges.push((start as u32, after[start..end].to_vec()));
        i = end;
    }
    ranges
}

/// One past the last changed byte of the range that starts with the
/// changed byte at `start`: the range ends before the first run of
/// [`DIFF_GAP_BYTES_MIN`] unchanged bytes, or at the page's end. Scans a
/// word at a time: within a word, the bytes equal before its first change
/// extend the current run of unchanged bytes, and those after its last
/// change begin the next one.
fn end_of_change(before: Option<&[u8]>, after: &[u8], start: usize) -> usize {
    let n = after.len();
    let mut end = start + 1;
    let mut same = 0;
    let mut j = end;
    while j + WORD_BYTES <= n && same < DIFF_GAP_BYTES_MIN {
        // A block whose every word changed holds no gap: a gap of
        // DIFF_GAP_BYTES_MIN bytes covers a whole word. Only the run that
        // ends at its first change and the one its last change begins count.
        if let Some(words) = changed_block(before, after, j) {
            let equal_first = (words[0].trailing_zeros() / 8) as usize;
            if same + equal_first >= DIFF_GAP_BYTES_MIN {
                return end;
            }
            let equal_last = (words[DIFF_BLOCK_WORDS - 1].leading_zeros() / 8) as usize;
            end = j + DIFF_BLOCK_BYTES - equal_last;
            same = equal_last;
            j += DIFF_BLOCK_BYTES;
            continue;
        }
        let differs = word_at(after, j) ^ before.map_or(0, |b| word_at(b, j));
        if differs == 0 {
            same += WORD_BYTES;
        } else {
            // Little-endian: low bytes come first.
            let equal_first = (differs.trailing_zeros() / 8) as usize;
            if same + equal_first >= DIFF_GAP_BYTES_MIN {
                return end;
            }
            let equal_last = (differs.leading_zeros() / 8) as usize;
            end = j + WORD_BYTES - equal_last;
            same = equal_last;
        }
        j += WORD_BYTES;
    }
    while j < n && same < DIFF_GAP_BYTES_MIN {
        if before.map_or(0, |b| b[j]) == after[j] {
            same += 1;
        } else {
            same = 0;
            end = j + 1;
        }
        j += 1;
    }
    end
}

/// Bytes compared at once by [`first_difference`] and [`end_of_change`].
const WORD_BYTES: usize = std::mem::size_of::<u64>();

/// Bytes [`first_difference`] skips at once while nothing changed, and
/// [`end_of_change`] takes at once while every word changes.
const DIFF_BLOCK_BYTES: usize = 32;

/// Bytes [`first_difference`] skips at once, with one comparison of two
/// slices, while nothing changed: most of a page a diff scans is unchanged.
const DIFF_SPAN_BYTES: usize = 256;

/// Words in a block of [`DIFF_BLOCK_BYTES`].
const DIFF_BLOCK_WORDS: usize = DIFF_BLOCK_BYTES / WORD_BYTES;
const _: () = assert!(
    DIFF_GAP_BYTES_MIN >= 2 * WORD_BYTES,
    "a gap covers a whole word, so a block of changed words holds none"
);

/// The differences (`after ^ before`) of the words of the block at `i`, if
/// every one of them changed (`None`: a block past the end, or one with an
/// unchanged word).
fn changed_block(before: Option<&[u8]>, after: &[u8], i: usize) -> Option<[u64; DIFF_BLOCK_WORDS]> {
    if i + DIFF_BLOCK_BYTES > after.len() {
        return None;
    }
    let words: [u64; DIFF_BLOCK_WORDS] = std::array::from_fn(|k| {
        let at = i + k * WORD_BYTES;
        word_at(after, at) ^ before.map_or(0, |b| word_at(b, at))
    });
    words.iter().all(|&w| w != 0).then_some(words)
}

/// True if the block of [`DIFF_BLOCK_BYTES`] at `i` is the same in both
/// (`None`: all zeros in `after`).
fn block_unchanged(before: Option<&[u8]>, after: &[u8], i: usize) -> bool {
    let block = |bytes: &[u8]| -> [u8; DIFF_BLOCK_BYTES] {
        bytes[i..i + DIFF_BLOCK_BYTES].try_into().expect("a block")
    };
    match before {
        Some(before) => block(before) == block(after),
        None => block(after) == [0; DIFF_BLOCK_BYTES],
    }
}

fn word_at(bytes: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(bytes[i..i + WORD_BYTES].try_into().expect("a word"))
}

/// The first index at or after `from` where `after` differs from `before`
/// (`None`: from zeros), or `after.len()`.
fn first_difference(before: Option<&[u8]>, after: &[u8], from: usize) -> usize {
    let n = after.len();
    let mut i = from;
    // Unchanged spans are skipped whole by the C library's vectorised
    // comparison, then unchanged blocks: fixed-size arrays compare as
    // vectors, several words per instruction.
    if let Some(before) = before {
        while i + DIFF_SPAN_BYTES <= n
            && before[i..i + DIFF_SPAN_BYTES] == after[i..i + DIFF_SPAN_BYTES]
        {
            i += DIFF_SPAN_BYTES;
        }
    }
    while i + DIFF_BLOCK_BYTES <= n && block_unchanged(before, after, i) {
        i += DIFF_BLOCK_BYTES;
    }
    while i + WORD_BYTES <= n {
        let differs = word_at(after, i) ^ before.map_or(0, |b| word_at(b, i));
        if differs != 0 {
            // Little-endian: the lowest set bit is in the first differing byte.
            return i + (differs.trailing_zeros() / 8) as usize;
        }
        i += WORD_BYTES;
    }
    while i < n && before.map_or(0, |b| b[i]) == after[i] {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::PageId;
    use crate::wal::record::apply_ranges;

    #[test]
    fn diff_finds_changed_ranges_and_applies_back() {
        let before = vec![0u8; 4096];
        let mut after = before.clone();
        after[100] = 1;
        after[105] = 2; // within the gap: one range
        after[3000..3010].fill(7);
        let ranges = diff(&before, &after);
        assert_eq!(ranges.len(), 2);
        assert_eq!(ranges[0].0, 100);
        assert_eq!(ranges[0].1.len(), 6);
        let mut image = before.clone();
        apply_ranges(&mut image, &ranges, PageId::new(0, 1)).unwrap();
        assert_eq!(image, after);
    }

    /// The ranges byte by byte, for comparison.
    fn diff_bytewise(before: &[u8], after: &[u8]) -> Vec<(u32, Vec<u8>)> {
        let n = after.len();
        let mut ranges = Vec::new();
        let mut i = PAGE_BODY_OFFSET;
        while i < n {
            while i < n && before[i] == after[i] {
                i += 1;
            }
            if i >= n {
                break;
            }
            let (start, mut end, mut same, mut j) = (i, i + 1, 0, i + 1);
            while j < n && same < DIFF_GAP_BYTES_MIN {
                if before[j] == after[j] {
                    same += 1;
                } else {
                    same = 0;
                    end = j + 1;
                }
                j += 1;
            }
            ranges.push((start as u32, after[start..end].to_vec()));
            i = end;
        }
        ranges
    }

    /// A seeded xorshift: `next(bound)` is below `bound`.
    fn xorshift(seed: u64) -> impl FnMut(usize) -> usize {
        let mut state = seed;
        move |bound: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % bound as u64) as usize
        }
    }

    #[test]
    fn an_in_place_diff_matches_a_whole_page_one() {
        // MTR-13: the window's diff, shifted, is the whole page's, for
        // windows of every length and alignment and changes at every gap.
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        for _ in 0..2000 {
            let len = 4096;
            let before: Vec<u8> = (0..len).map(|_| next(3) as u8).collect();
            let window = 1 + next(300);
            let offset = PAGE_BODY_OFFSET + next(len - PAGE_BODY_OFFSET - window + 1);
            let mut bytes = before[offset..offset + window].to_vec();
            for _ in 0..next(8) {
                let at = next(window);
                bytes[at] = bytes[at].wrapping_add(1 + next(255) as u8);
            }
            let mut after = before.clone();
            after[offset..offset + window].copy_from_slice(&bytes);
            assert_eq!(
                diff_in_place(&before, offset, &bytes),
                diff(&before, &after),
                "window {window} at {offset}"
            );
        }
    }

    /// A range that reaches a block of changed words with 15 unchanged
    /// bytes behind it, and one more unchanged at the block's start, ends
    /// there: the gap is complete. The random rounds rarely build this.
    #[test]
    fn regression_a_gap_completed_at_a_changed_block_ends_the_range() {
        let before = vec![0u8; 4096];
        let mut after = before.clone();
        after[100] = 1;
        after[101] = 1; // the word from 101 leaves 7 unchanged bytes; the next word 8 more
        after[118..149].fill(1); // the block from 117 changes in every word, from its second byte
        assert_eq!(diff(&before, &after), diff_bytewise(&before, &after));
        assert_eq!(
            diff(&before, &after),
            vec![(100, vec![1, 1]), (118, vec![1; 31])]
        );
    }

    #[test]
    fn word_skipping_diff_matches_a_bytewise_one() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        for round in 0..200 {
            let len = [512, 4096, 4099][round % 3];
            let before: Vec<u8> = (0..len).map(|_| next(3) as u8).collect();
            let mut after = before.clone();
            // Runs of changes with gaps of every length around 16, and
            // (odd rounds) long dense runs, whose blocks have every word
            // changed.
            let (run_max, step_max) = match round % 2 {
                0 => (12, 2 * DIFF_GAP_BYTES_MIN),
                _ => (400, WORD_BYTES + 1),
            };
            for _ in 0..next(40) {
                let mut at = PAGE_BODY_OFFSET + next(len - PAGE_BODY_OFFSET);
                for _ in 0..next(run_max) {
                    if at < len {
                        after[at] = after[at].wrapping_add(1 + next(255) as u8);
                    }
                    at += 1 + next(step_max);
                }
            }
            assert_eq!(diff(&before, &after), diff_bytewise(&before, &after));
            let mut zero = after.clone();
            zero[PAGE_BODY_OFFSET..].fill(0);
            assert_eq!(nonzero_ranges(&after), diff_bytewise(&zero, &after));
        }
    }

    #[test]
    fn nonzero_ranges_match_a_diff_against_a_zeroed_body() {
        let mut after = vec![0u8; 4096];
        after[..PAGE_BODY_OFFSET].fill(9); // the header is never compared
        after[200] = 1;
        after[230] = 1; // 29 bytes on: a gap of its own
        after[1000..1100].fill(3);
        after[4095] = 5;
        let mut zero = after.clone();
        zero[PAGE_BODY_OFFSET..].fill(0);
        assert_eq!(nonzero_ranges(&after), diff(&zero, &after));
        assert_eq!(nonzero_ranges(&after).len(), 4);
    }

    #[test]
    fn ranges_outside_the_page_are_malformed() {
        let mut image = vec![0u8; 2048];
        assert!(apply_ranges(&mut image, &[(2040, vec![1; 16])], PageId::new(0, 1)).is_err());
        assert!(apply_ranges(&mut image, &[(4, vec![1; 4])], PageId::new(0, 1)).is_err());
    }
}
