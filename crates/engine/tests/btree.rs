//! B+tree against a model, and against garbage.
//!
//! The model test runs random sequences of inserts (upserts), deletes,
//! lookups and range scans with keys and values of varying sizes against a
//! `std::collections::BTreeMap`, on 2 KB pages (deep trees, many splits)
//! and 8 KB pages, running `check` after every batch (BTREE-2..6) and the
//! header check of `MemPages` (BTREE-7). The fuzz test feeds random and
//! corrupted pages to every operation: errors are expected, panics and
//! endless loops are not (BTREE-9).

use std::collections::BTreeMap;
use std::ops::Bound;

use flashlab_engine::Error;
use flashlab_engine::btree::testing::MemPages;
use flashlab_engine::btree::{BTree, max_entry_bytes};
use flashlab_engine::mtr::PageAccess;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Operations between two structural checks.
const BATCH_OPS: usize = 40;

#[derive(Clone, Debug)]
enum Op {
    Insert(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Get(Vec<u8>),
    Scan(Bound<Vec<u8>>, Bound<Vec<u8>>, usize),
}

/// Keys that collide often (tiny alphabet, short), share long prefixes
/// (long separators), or are arbitrary and long.
fn key(key_max_bytes: usize) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => prop::collection::vec(prop::sample::select(vec![0u8, 1, 0x7f, 0xff]), 0..5),
        3 => (0..key_max_bytes - 2, 0u16..400).prop_map(|(n, i)| [vec![b'p'; n], i.to_be_bytes().to_vec()].concat()),
        2 => prop::collection::vec(any::<u8>(), 0..key_max_bytes),
    ]
}

fn bound(key_max_bytes: usize) -> impl Strategy<Value = Bound<Vec<u8>>> {
    prop_oneof![
        1 => Just(Bound::Unbounded),
        2 => key(key_max_bytes).prop_map(Bound::Included),
        2 => key(key_max_bytes).prop_map(Bound::Excluded),
    ]
}

fn op(key_max_bytes: usize, value_max_bytes: usize) -> impl Strategy<Value = Op> {
    let value = prop::collection::vec(any::<u8>(), 0..value_max_bytes);
    prop_oneof![
        6 => (key(key_max_bytes), value).prop_map(|(k, v)| Op::Insert(k, v)),
        3 => key(key_max_bytes).prop_map(Op::Delete),
        2 => key(key_max_bytes).prop_map(Op::Get),
        1 => (bound(key_max_bytes), bound(key_max_bytes), 1usize..50).prop_map(|(l, u, n)| Op::Scan(l, u, n)),
    ]
}

fn as_ref(bound: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn scan(
    tree: &BTree,
    pages: &mut MemPages,
    lower: Bound<&[u8]>,
    upper: Bound<&[u8]>,
    limit: usize,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    tree.scan(pages, lower, upper, |k, v| {
        out.push((k.to_vec(), v.to_vec()));
        Ok(out.len() < limit)
    })
    .unwrap();
    out
}

fn model_scan(
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    lower: Bound<&[u8]>,
    upper: Bound<&[u8]>,
    limit: usize,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let inverted = matches!((lower, upper), (Bound::Included(l) | Bound::Excluded(l), Bound::Included(u) | Bound::Excluded(u)) if l > u);
    let empty =
        inverted || matches!((lower, upper), (Bound::Excluded(l), Bound::Excluded(u)) if l == u);
    if empty {
        return Vec::new(); // BTreeMap::range panics on these; the tree returns nothing
    }
    model
        .range::<[u8], _>((lower, upper))
        .take(limit)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn apply(tree: &BTree, pages: &mut MemPages, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, op: &Op) {
    let page_bytes = pages.page_bytes();
    match op {
        Op::Insert(k, v) if k.len() + v.len() > max_entry_bytes(page_bytes) => {
            let err = tree.insert(pages, k, v).unwrap_err();
            assert!(matches!(err, Error::TooLarge(_)), "{err}");
        }
        Op::Insert(k, v) => assert_eq!(
            tree.insert(pages, k, v).unwrap(),
            model.insert(k.clone(), v.clone())
        ),
        Op::Delete(k) => assert_eq!(tree.delete(pages, k).unwrap(), model.remove(k)),
        Op::Get(k) => assert_eq!(tree.get(pages, k).unwrap().as_ref(), model.get(k)),
        Op::Scan(l, u, n) => {
            let (l, u) = (as_ref(l), as_ref(u));
            assert_eq!(scan(tree, pages, l, u, *n), model_scan(model, l, u, *n));
        }
    }
}

fn run_model(page_bytes: usize, ops: &[Op]) {
    let mut pages = MemPages::new(page_bytes).unwrap();
    let tree = BTree::create(&mut pages).unwrap();
    let mut model = BTreeMap::new();
    for batch in ops.chunks(BATCH_OPS) {
        for op in batch {
            apply(&tree, &mut pages, &mut model, op);
        }
        let stats = tree.check(&mut pages).unwrap();
        assert_eq!(stats.entries, model.len() as u64);
        pages.check_headers().unwrap();
        let all = scan(
            &tree,
            &mut pages,
            Bound::Unbounded,
            Bound::Unbounded,
            usize::MAX,
        );
        assert_eq!(
            all,
            model_scan(&model, Bound::Unbounded, Bound::Unbounded, usize::MAX)
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn btree_matches_model_on_2k_pages(ops in prop::collection::vec(op(120, 360), 1..800)) {
        run_model(2048, &ops);
    }

    #[test]
    fn btree_matches_model_on_2k_pages_deep(ops in prop::collection::vec(op(120, 200), 2500..3000)) {
        run_model(2048, &ops);
    }

    #[test]
    fn btree_matches_model_on_8k_pages(ops in prop::collection::vec(op(400, 1600), 1..800)) {
        run_model(8192, &ops);
    }
}

#[test]
fn btree_large_random_workload_stays_consistent() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut pages = MemPages::new(2048).unwrap();
    let tree = BTree::create(&mut pages).unwrap();
    let root = tree.root();
    let mut model = BTreeMap::new();
    for round in 0..20 {
        for _ in 0..1000 {
            let key: Vec<u8> = (0..rng.random_range(1..40))
                .map(|_| rng.random_range(b'a'..=b'e'))
                .collect();
            if rng.random_bool(0.25) {
                assert_eq!(tree.delete(&mut pages, &key).unwrap(), model.remove(&key));
            } else {
                let value = vec![round as u8; rng.random_range(0..200)];
                assert_eq!(
                    tree.insert(&mut pages, &key, &value).unwrap(),
                    model.insert(key, value)
                );
            }
        }
        let stats = tree.check(&mut pages).unwrap();
        assert_eq!(stats.entries, model.len() as u64);
    }
    assert_eq!(tree.root(), root, "BTREE-1");
    let stats = tree.check(&mut pages).unwrap();
    assert!(stats.height >= 3, "{stats:?}");
    pages.check_headers().unwrap();
    // Delete everything: the tree keeps its pages (BTREE-8) and scans see nothing.
    for key in model.keys() {
        tree.delete(&mut pages, key).unwrap();
    }
    assert!(
        scan(
            &tree,
            &mut pages,
            Bound::Unbounded,
            Bound::Unbounded,
            usize::MAX
        )
        .is_empty()
    );
    let empty = tree.check(&mut pages).unwrap();
    assert_eq!(
        (empty.entries, empty.leaf_pages, empty.empty_leaves),
        (0, stats.leaf_pages, stats.leaf_pages)
    );
    let freed = tree.destroy(&mut pages).unwrap();
    assert_eq!(freed, stats.pages());
    assert_eq!(pages.free_count() as u64, freed);
}

#[test]
fn btree_works_through_dyn_page_access() {
    let mut pages = MemPages::new(8192).unwrap();
    let dyn_pages: &mut dyn PageAccess = &mut pages;
    let tree = BTree::create(dyn_pages).unwrap();
    tree.insert(dyn_pages, b"k", b"v").unwrap();
    assert_eq!(tree.get(dyn_pages, b"k").unwrap(), Some(b"v".to_vec()));
}

/// Run every operation on a possibly corrupt tree; only the absence of
/// panics (and termination) is checked.
fn exercise(pages: &mut MemPages, root: u32, rng: &mut ChaCha8Rng) {
    let tree = BTree::open(root);
    let key: Vec<u8> = (0..rng.random_range(0..8)).map(|_| rng.random()).collect();
    let _ = tree.check(pages);
    let _ = tree.get(pages, &key);
    let _ = tree.scan(pages, Bound::Included(&key), Bound::Unbounded, |_, _| {
        Ok(true)
    });
    let _ = tree.scan(pages, Bound::Unbounded, Bound::Unbounded, |_, _| Ok(true));
    let _ = tree.insert(pages, &key, &[1; 100]);
    let _ = tree.delete(pages, &key);
    let _ = tree.check(pages);
}

#[test]
fn btree_random_pages_give_errors_not_panics() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for _ in 0..300 {
        let mut raw: Vec<Vec<u8>> = (0..6)
            .map(|_| (0..2048).map(|_| rng.random()).collect())
            .collect();
        for page in &mut raw {
            // Plausible headers get further into the decoder.
            page[20] = rng.random_range(2..=3);
            page[24..26].copy_from_slice(&rng.random_range(0u16..40).to_le_bytes());
            page[26..28].copy_from_slice(&rng.random_range(0u16..3).to_le_bytes());
            page[28..32].copy_from_slice(&rng.random_range(100u32..2100).to_le_bytes());
            page[32..36].copy_from_slice(&rng.random_range(0u32..100).to_le_bytes());
            page[36..40].copy_from_slice(&rng.random_range(0u32..8).to_le_bytes());
        }
        let mut pages = MemPages::from_raw(2048, raw).unwrap();
        let root = rng.random_range(0..7);
        let err = BTree::open(root).check(&mut pages);
        assert!(err.is_err(), "random bytes pass the check");
        exercise(&mut pages, root, &mut rng);
    }
}

#[test]
fn btree_corrupted_trees_give_errors_not_panics() {
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    let mut clean = MemPages::new(2048).unwrap();
    let tree = BTree::create(&mut clean).unwrap();
    for i in 0u32..600 {
        let key = [&b"prefix-"[..], &i.wrapping_mul(40503).to_be_bytes()].concat();
        tree.insert(&mut clean, &key, &vec![i as u8; (i % 90) as usize])
            .unwrap();
    }
    tree.check(&mut clean).unwrap();
    let mut caught = 0;
    for _ in 0..2000 {
        let mut pages = clean.clone();
        for _ in 0..rng.random_range(1..4) {
            let page_no = rng.random_range(1..pages.page_count() as u32);
            let page = pages.raw_mut(page_no).unwrap();
            let at = rng.random_range(20..page.len());
            if rng.random_bool(0.5) {
                page[at] ^= 1 << rng.random_range(0..8); // one bit
            } else {
                let end = (at + rng.random_range(1..64)).min(page.len());
                rng.fill(&mut page[at..end]); // a run of garbage
            }
        }
        if BTree::open(tree.root()).check(&mut pages).is_err() {
            caught += 1;
        }
        exercise(&mut pages, tree.root(), &mut rng);
    }
    assert!(
        caught > 500,
        "check caught only {caught} of 2000 corruptions"
    );
}
