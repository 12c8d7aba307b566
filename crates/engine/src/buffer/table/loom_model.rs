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

/// An install into an open frame (BUF-17) racing a write-back of it: the
/// frame is dirty from LSN 10, one task installs the change ending at LSN
/// 20 while another claims, copies and finishes a write-back. Whichever
/// order loom picks, the install is in the image written or the frame
/// stays dirty from LSN 20 (BUF-7): it is never lost. The page's bytes are
/// one number here, its LSN, behind loom's reader-writer lock as a frame's
/// are behind its data lock; the metadata is the pool's own, behind loom's
/// mutex.
#[test]
fn loom_model_an_install_racing_a_write_back_is_written_or_stays_dirty() {
    use super::super::meta::Meta;
    use loom::sync::{Mutex, RwLock};

    model(|| {
        let hot = std::sync::Arc::new(Hot::new(1));
        let meta = Arc::new(Mutex::new(Meta::new(1, hot.clone(), true)));
        let data = Arc::new(RwLock::new(10_u64));
        {
            let mut meta = meta.lock().unwrap();
            meta.map(0, page(1)); // pinned once: the installer's pin
            meta.loaded(0, true);
            meta.note_install(0, 10, 10, false);
            assert_eq!(hot.open_state(0), (true, false), "BUF-17: not opened");
        }
        let installer = {
            let (hot, meta, data) = (hot.clone(), meta.clone(), data.clone());
            thread::spawn(move || {
                let mut bytes = data.write().unwrap();
                *bytes = 20;
                if !hot.install_if_open(0, 20, false) {
                    meta.lock().unwrap().note_install(0, 20, 20, false);
                }
            })
        };
        meta.lock().unwrap().claim_write(0);
        let written = {
            let bytes = data.read().unwrap();
            meta.lock().unwrap().note_copy(0, *bytes);
            *bytes
        };
        meta.lock().unwrap().finish_write(0, Some(written));
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
            assert_eq!(frame.rec_lsn, 20, "BUF-7: the wrong rec_lsn");
        }
        assert_eq!(hot.page_lsn(0), 20);
        meta.check().unwrap();
    });
}
