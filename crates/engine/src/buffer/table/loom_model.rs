//! A model check of the hit protocol (BUF-13..15), and of installs that
//! skip the metadata lock (BUF-17), with loom.
//!
//! The real-thread test in `table.rs` races hits against remaps for a
//! while and meets the interleavings the host happens to produce. Here loom
//! runs every interleaving of the atomic operations of a few hits, unpins,
//! evictions and remaps, up to [`PREEMPTIONS_MAX`] preemptions each, and
//! lets every load see any value the C11 memory model allows for the
//! orderings the code asks for, which a real core shows only now and then.
//!
//! The writer plays the metadata lock's holder: it alone evicts and maps.
//! Each model asserts what a hit relies on:
//! - a pinned frame names the page the hit asked for, and stays Ready until
//!   the unpin (BUF-15);
//! - an eviction never succeeds under a pin, so a frame that is not Ready
//!   has an exact pin count (`map` asserts 0);
//! - the index's answer is a hint: a hit racing a backward shift may miss,
//!   never pin another page (BUF-14).
//!
//! Run: `cargo test --release -p flashlab-engine --features loom --lib
//! loom_model`. The feature swaps `table.rs`'s atomics for loom's, so only
//! these tests run under it.

use loom::sync::Arc;
use loom::thread;

use super::*;

/// Preemptions per execution that loom explores: the protocol's races
/// need two (a hit between two of the writer's steps, and back).
const PREEMPTIONS_MAX: usize = 3;

fn page(n: u32) -> PageId {
    PageId::new(1, n)
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(PREEMPTIONS_MAX);
    builder.check(f);
}

/// `frame` holds page `n`, Ready and unpinned, as after a finished load.
fn resident(hot: &Hot, frame: usize, n: u32) {
    hot.map(frame, page(n));
    hot.set_ready(frame);
    hot.unpin(frame);
}

/// The writer: evict `frame`, holding page `old`, if nobody pins it, and
/// load page `new` into it. True if the eviction won.
fn remap(hot: &Hot, frame: usize, old: u32, new: u32) -> bool {
    if !hot.unready_if_unpinned(frame) {
        return false;
    }
    assert_eq!(hot.pins(frame), 0, "BUF-15: a pin on a frame not Ready");
    hot.unmap(frame, page(old));
    resident(hot, frame, new);
    true
}

/// A hit of page `n`: if it pins a frame, that frame holds `n` and stays
/// Ready until the unpin.
fn hit(hot: &Hot, n: u32) -> Option<usize> {
    let frame = hot.pin_if_ready(page(n))?;
    let want = Some(key_of(page(n)));
    assert_eq!(
        hot.page_key(frame),
        want,
        "BUF-15: a hit pinned another page"
    );
    assert!(hot.is_ready(frame), "BUF-15: a pinned frame left Ready");
    thread::yield_now();
    assert_eq!(hot.page_key(frame), want, "BUF-15: evicted under a pin");
    hot.unpin(frame);
    Some(frame)
}

/// The writer's view after the race: where each page is.
fn assert_holds(hot: &Hot, frame: usize, n: u32) {
    assert_eq!(hot.pins(frame), 0, "BUF-1: a pin left on frame {frame}");
    assert_eq!(hot.page_key(frame), Some(key_of(page(n))));
    assert_eq!(hot.indexed(page(n)), Some(frame), "BUF-14");
}

#[test]
fn loom_model_a_hit_racing_an_eviction_pins_its_page_or_nothing() {
    model(|| {
        let hot = Arc::new(Hot::new(2));
        resident(&hot, 0, 1);
        let reader = {
            let hot = hot.clone();
            thread::spawn(move || (hit(&hot, 1), hit(&hot, 2)))
        };
        let evicted = remap(&hot, 0, 1, 2);
        let (old, new) = reader.join().unwrap();
        if evicted {
            assert_holds(&hot, 0, 2);
            assert_eq!(hot.indexed(page(1)), None);
        } else {
            // Only a pin stops the writer, so the hit of page 1 won.
            assert_eq!(old, Some(0));
            assert_eq!(new, None);
            assert_holds(&hot, 0, 1);
        }
    });
}

#[test]
fn loom_model_two_hits_and_an_eviction_keep_an_exact_pin_count() {
    model(|| {
        let hot = Arc::new(Hot::new(2));
        resident(&hot, 0, 1);
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let hot = hot.clone();
                thread::spawn(move || hit(&hot, 1))
            })
            .collect();
        let evicted = remap(&hot, 0, 1, 2);
        for reader in readers {
            reader.join().unwrap();
        }
        assert_holds(&hot, 0, if evicted { 2 } else { 1 });
    });
}

/// Pages whose index probes start at the same slot of `hot`'s index: a
/// cluster that removals shift back. Then pages outside it.
fn cluster_and_others(hot: &Hot) -> ([u32; 4], [u32; 2]) {
    let home = hot.index.home(key_of(page(1)));
    let mut same = (1..u32::MAX).filter(|&n| hot.index.home(key_of(page(n))) == home);
    let cluster = [0; 4].map(|_| same.next().expect("pages enough"));
    let mut other = (1..u32::MAX).filter(|n| !cluster.contains(n));
    let others = [0; 2].map(|_| other.next().expect("pages enough"));
    (cluster, others)
}

/// Two removals shift a cluster back twice, so one slot holds two entries
/// in turn: a hit may read the first's key and the second's frame. The
/// pin word's page name turns that hint away.
#[test]
fn loom_model_a_hit_during_a_backward_shift_pins_only_its_page() {
    model(|| {
        let hot = Arc::new(Hot::new(4));
        let (cluster, fresh) = cluster_and_others(&hot);
        for (frame, &n) in cluster.iter().enumerate() {
            resident(&hot, frame, n);
        }
        let [_, _, third, fourth] = cluster;
        let reader = {
            let hot = hot.clone();
            // Either may miss while the cluster shifts; neither may pin
            // anything but its own page.
            thread::spawn(move || (hit(&hot, third), hit(&hot, fourth)))
        };
        for frame in 0..2 {
            assert!(remap(&hot, frame, cluster[frame], fresh[frame]));
        }
        let (third_at, fourth_at) = reader.join().unwrap();
        assert!(third_at.is_none() || third_at == Some(2));
        assert!(fourth_at.is_none() || fourth_at == Some(3));
        assert_holds(&hot, 0, fresh[0]);
        assert_holds(&hot, 1, fresh[1]);
        assert_holds(&hot, 2, third);
        assert_holds(&hot, 3, fourth);
    });
}

/// The pool's metadata, behind loom's mutex, with page 1 in frame 0: Ready,
/// pinned once (the installer's pin), dirty from the change logged from
/// LSN 5 to 10, and so open to installs (BUF-17).
fn dirty_from_ten(hot: &std::sync::Arc<Hot>) -> Arc<loom::sync::Mutex<super::super::meta::Meta>> {
    use super::super::meta::Meta;
    let mut meta = Meta::new(1, hot.clone(), true);
    meta.map(0, page(1));
    meta.loaded(0, true);
    meta.note_install(0, 5, 10, false);
    assert_eq!(hot.open_state(0), (true, false), "BUF-17: not opened");
    Arc::new(loom::sync::Mutex::new(meta))
}

/// An install as `PageRef::install_with` does it: the page's bytes (here
/// one number, its page LSN) changed under the data lock held exclusively,
/// counted without the metadata lock if the frame is open.
fn install(
    hot: &Hot,
    meta: &loom::sync::Mutex<super::super::meta::Meta>,
    data: &loom::sync::RwLock<u64>,
    (record_lsn, lsn): (u64, u64),
) {
    let mut bytes = data.write().unwrap();
    *bytes = lsn;
    if !hot.install_if_open(0, lsn, false) {
        meta.lock().unwrap().note_install(0, record_lsn, lsn, false);
    }
}

/// A write-back as `copy_for_write` and `finish_write` do it: claim, copy
/// under the data lock shared, finish (`written` false: the write failed).
/// Returns the page LSN of the image copied.
fn write_back(
    meta: &loom::sync::Mutex<super::super::meta::Meta>,
    data: &loom::sync::RwLock<u64>,
    written: bool,
) -> u64 {
    meta.lock().unwrap().claim_write(0);
    let copied = {
        let bytes = data.read().unwrap();
        meta.lock().unwrap().note_copy(0, *bytes);
        *bytes
    };
    meta.lock()
        .unwrap()
        .finish_write(0, written.then_some(copied));
    copied
}

/// An install into an open frame (BUF-17) racing a write-back of it: one
/// task installs the change logged from LSN 15 to 20 while another claims,
/// copies and finishes a write-back. Whichever order loom picks, the
/// install is in the image written or the frame stays dirty from LSN 15,
/// where its record starts (BUF-7): it is never lost. The metadata is the
/// pool's own; loom's mutex and reader-writer lock stand for the metadata
/// lock and the frame's data lock.
#[test]
fn loom_model_an_install_racing_a_write_back_is_written_or_stays_dirty() {
    model(|| {
        let hot = std::sync::Arc::new(Hot::new(1));
        let meta = dirty_from_ten(&hot);
        let data = Arc::new(loom::sync::RwLock::new(10_u64));
        let installer = {
            let (hot, meta, data) = (hot.clone(), meta.clone(), data.clone());
            thread::spawn(move || install(&hot, &meta, &data, (15, 20)))
        };
        let written = write_back(&meta, &data, true);
        installer.join().unwrap();

        let meta = meta.lock().unwrap();
        let frame = &meta.frames[0];
        if written == 20 {
            assert!(
                !frame.dirty,
                "BUF-7: the written image left the frame dirty"
            );
        } else {
            assert!(frame.dirty, "BUF-7: an install lost by a write-back");
            assert_eq!(frame.rec_lsn, 15, "BUF-7: the wrong rec_lsn");
        }
        assert_eq!(hot.page_lsn(0), 20);
        meta.check().unwrap();
    });
}

/// Two installs, the second after the first, racing a write-back that
/// fails or succeeds: the frame ends dirty from the start of the first
/// change the image written lacks, or clean if it has both; a failed write
/// leaves it dirty from LSN 5, as before the write (BUF-7, BUF-17).
#[test]
fn loom_model_two_installs_and_a_write_back_keep_the_earliest_unwritten_change() {
    for written_ok in [true, false] {
        model(move || {
            let hot = std::sync::Arc::new(Hot::new(1));
            let meta = dirty_from_ten(&hot);
            let data = Arc::new(loom::sync::RwLock::new(10_u64));
            let installer = {
                let (hot, meta, data) = (hot.clone(), meta.clone(), data.clone());
                thread::spawn(move || {
                    install(&hot, &meta, &data, (15, 20));
                    install(&hot, &meta, &data, (25, 30));
                })
            };
            let written = write_back(&meta, &data, written_ok);
            installer.join().unwrap();

            let meta = meta.lock().unwrap();
            let frame = &meta.frames[0];
            let want = match (written_ok, written) {
                (false, _) => Some(5),
                (true, 10) => Some(15),
                (true, 20) => Some(25),
                (true, _) => None,
            };
            assert_eq!(
                frame.dirty.then_some(frame.rec_lsn),
                want,
                "BUF-7: image of LSN {written} written ({written_ok})"
            );
            assert_eq!(hot.open_state(0).0, frame.dirty, "BUF-17");
            meta.check().unwrap();
        });
    }
}
