use super::scratch::ScratchDir;
use super::*;

/// Chunks a mixed store keeps on the heap before the rest go to its file.
const MIXED_HEAP_CHUNKS: u64 = 8;

/// A store whose every chunk is in a scratch file in the temp directory.
fn in_scratch() -> SparseStore {
    let dir = ScratchDir::with_heap_budget(&std::env::temp_dir(), 0, 0).expect("temp dir");
    SparseStore::in_scratch(dir)
}

/// A store whose first chunks are on the heap and the rest in a file.
fn mixed() -> SparseStore {
    let budget = MIXED_HEAP_CHUNKS * CHUNK_BYTES as u64;
    let dir = ScratchDir::with_heap_budget(&std::env::temp_dir(), 0, budget).expect("temp dir");
    SparseStore::in_scratch(dir)
}

/// Each named test, run once per placement of the chunks: all on the
/// heap, all in a scratch file, and some of each.
macro_rules! on_every_placement {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn heap() {
                super::$name(super::SparseStore::in_memory)
            }
            #[test]
            fn scratch() {
                super::$name(super::in_scratch)
            }
            #[test]
            fn mixed() {
                super::$name(super::mixed)
            }
        }
    )*};
}

on_every_placement!(
    unwritten_reads_zero_and_writes_span_chunks,
    crash_restores_the_last_flushed_state,
    torn_write_keeps_only_its_prefix,
    kept_old_write_survives_under_dropped_new_one,
    orphan_stays_lost_under_a_later_durable_write,
    a_flush_covers_only_writes_issued_before_it_began,
    identical_rewrites_do_not_count_as_changes,
    crash_detailed_reports_offsets_and_fates,
    after_images_come_from_later_before_images,
    writes_to_fresh_bytes_keep_no_before_image,
    a_store_without_crash_model_remembers_nothing_and_reads_back_every_write,
    an_image_shares_chunks_until_either_side_writes_them,
    forget_frees_chunks_but_not_remembered_ones,
);

/// Each `(offset, len, byte)`: the store's `len` bytes at `offset` all
/// read `byte`.
fn assert_runs(store: &SparseStore, runs: &[(u64, usize, u8)]) {
    for &(offset, len, byte) in runs {
        let mut buf = vec![!byte; len];
        store.read(offset, &mut buf).unwrap();
        assert!(
            buf.iter().all(|&b| b == byte),
            "{len} bytes at {offset} are not all {byte}"
        );
    }
}

fn unwritten_reads_zero_and_writes_span_chunks(new: fn() -> SparseStore) {
    let mut store = new();
    let mut buf = vec![7u8; 100];
    store.read(10_000, &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 0));
    let data: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
    store.write(4000, &data).unwrap();
    let mut back = vec![0u8; 10_000];
    store.read(4000, &mut back).unwrap();
    assert_eq!(back, data);
}

fn crash_restores_the_last_flushed_state(new: fn() -> SparseStore) {
    let mut store = new();
    store.write(0, &[1u8; 512]).unwrap();
    store.flush();
    store.write(0, &[2u8; 512]).unwrap();
    store.write(256, &[3u8; 512]).unwrap();
    store.crash();
    assert_runs(&store, &[(0, 512, 1), (512, 512, 0)]);
}

fn torn_write_keeps_only_its_prefix(new: fn() -> SparseStore) {
    let mut store = new();
    store.write(0, &[9u8; 1024]).unwrap();
    store.crash_with(|_, _| CrashFate::Tear { bytes: 512 });
    assert_runs(&store, &[(0, 512, 9), (512, 512, 0)]);
}

fn kept_old_write_survives_under_dropped_new_one(new: fn() -> SparseStore) {
    let mut store = new();
    store.write(0, &[1u8; 512]).unwrap();
    store.write(0, &[2u8; 512]).unwrap();
    store.crash_with(|i, _| {
        if i == 0 {
            CrashFate::Keep
        } else {
            CrashFate::Drop
        }
    });
    assert_runs(&store, &[(0, 512, 1)]);
}

fn orphan_stays_lost_under_a_later_durable_write(new: fn() -> SparseStore) {
    let mut store = new();
    store.write(0, &[1u8; 1024]).unwrap();
    store.flush();
    // A write covered by a failed flush...
    store.write(0, &[2u8; 1024]).unwrap();
    let mark = store.flush_mark();
    assert_eq!(store.fail_flush_through(mark), 1);
    // ...is not made durable by the next flush, but a newer write is.
    store.write(512, &[3u8; 512]).unwrap();
    store.flush();
    assert_eq!(store.orphaned_writes(), 1);
    let mut buf = vec![0u8; 1024];
    store.read(0, &mut buf).unwrap();
    assert!(buf[..512].iter().all(|&b| b == 2), "reads see the orphan");
    store.crash();
    store.read(0, &mut buf).unwrap();
    assert!(buf[..512].iter().all(|&b| b == 1), "the orphan is lost");
    assert!(
        buf[512..].iter().all(|&b| b == 3),
        "the durable write stays"
    );
}

fn a_flush_covers_only_writes_issued_before_it_began(new: fn() -> SparseStore) {
    let mut store = new();
    store.write(0, &[1u8; 512]).unwrap();
    let early = store.flush_mark();
    store.write(512, &[2u8; 512]).unwrap();
    let late = store.flush_mark();
    store.flush_through(late);
    store.flush_through(early); // the earlier flush ends last
    assert_eq!(store.unflushed_writes(), 0);
    store.write(1024, &[3u8; 512]).unwrap();
    let mark = store.flush_mark();
    store.write(1536, &[4u8; 512]).unwrap();
    store.flush_through(mark);
    store.crash();
    assert_runs(&store, &[(1024, 512, 3), (1536, 512, 0)]);
}

fn identical_rewrites_do_not_count_as_changes(new: fn() -> SparseStore) {
    let mut store = new();
    store.write(4096, &[5u8; 512]).unwrap();
    store.flush();
    assert_eq!(store.durable_end_bytes(), 4608);
    let mut sector = vec![5u8; 512];
    sector[300..].fill(6);
    store.write(4096, &sector).unwrap();
    assert!(!store.changed_since_durable(4096, 4096 + 300));
    assert!(store.changed_since_durable(4096, 4096 + 301));
}

fn crash_detailed_reports_offsets_and_fates(new: fn() -> SparseStore) {
    let mut store = new();
    store.write(0, &[1u8; 1024]).unwrap();
    store.write(2048, &[2u8; 1024]).unwrap();
    let fates = store.crash_detailed(|w| {
        if w.offset_bytes == 0 {
            CrashFate::Tear { bytes: 512 }
        } else {
            CrashFate::Keep
        }
    });
    assert_eq!(fates.len(), 2);
    assert_eq!(fates[1].write.offset_bytes, 2048);
    assert_eq!(fates[0].after, vec![1u8; 1024]);
    assert_eq!(fates[1].before, vec![0u8; 1024]);
    assert_eq!(store.durable_end_bytes(), 3072);
    assert_runs(&store, &[(0, 512, 1), (512, 512, 0)]);
}

fn after_images_come_from_later_before_images(new: fn() -> SparseStore) {
    let mut store = new();
    store.write(0, &[1u8; 1024]).unwrap();
    store.flush();
    store.write(0, &[2u8; 1024]).unwrap(); // before: 1s
    store.write(512, &[3u8; 1024]).unwrap(); // before: 2s then zeros
    store.write(0, &[4u8; 512]).unwrap(); // before: 2s
    let fates = store.crash_detailed(|w| match w.index {
        0 => CrashFate::Keep,
        _ => CrashFate::Drop,
    });
    assert_eq!(fates[0].after, vec![2u8; 1024]);
    let mut second = vec![3u8; 1024];
    assert_eq!(fates[1].after, second);
    second[..512].fill(2);
    second[512..].fill(0);
    assert_eq!(fates[1].before, second);
    assert_eq!(fates[2].after, vec![4u8; 512]);
    // Write 0 kept, write 1 dropped.
    assert_runs(&store, &[(0, 1024, 2), (1024, 512, 0)]);
}

fn writes_to_fresh_bytes_keep_no_before_image(new: fn() -> SparseStore) {
    let mut store = new();
    store.write(0, &[1u8; 8192]).unwrap();
    assert!(store.unflushed[0].before.is_none());
    store.write(4096, &[2u8; 512]).unwrap();
    assert!(store.unflushed[1].before.is_some());
    assert!(store.changed_since_durable(0, 1));
    store.flush();
    assert!(!store.changed_since_durable(0, 8192));
}

fn a_store_without_crash_model_remembers_nothing_and_reads_back_every_write(
    new: fn() -> SparseStore,
) {
    let mut store = new();
    store.turn_off_crash_model();
    // A whole chunk, a part of one, and an overwrite across two.
    store.write(0, &[1u8; CHUNK_BYTES]).unwrap();
    store.write(CHUNK_BYTES as u64 + 100, &[2u8; 50]).unwrap();
    store.write(CHUNK_BYTES as u64 - 10, &[3u8; 20]).unwrap();
    assert_eq!(store.unflushed_writes(), 0);
    assert_eq!(store.unflushed_bytes, 0);
    assert_eq!(store.durable_end_bytes(), CHUNK_BYTES as u64 + 150);
    let mut buf = vec![9u8; 2 * CHUNK_BYTES];
    store.read(0, &mut buf).unwrap();
    let mut want = vec![0u8; 2 * CHUNK_BYTES];
    want[..CHUNK_BYTES].fill(1);
    want[CHUNK_BYTES + 100..CHUNK_BYTES + 150].fill(2);
    want[CHUNK_BYTES - 10..CHUNK_BYTES + 10].fill(3);
    assert_eq!(buf, want);
    store.flush();
    assert_eq!(store.unflushed_writes(), 0);
}

/// A store whose crash model is off, one write made.
fn written_without_crash_model() -> SparseStore {
    let mut store = SparseStore::new();
    store.turn_off_crash_model();
    store.write(0, &[1u8; 512]).unwrap();
    store
}

#[test]
#[should_panic(expected = "STORE-6")]
fn a_store_without_crash_model_refuses_an_image() {
    let _ = written_without_crash_model().image();
}

#[test]
#[should_panic(expected = "STORE-6")]
fn a_store_without_crash_model_refuses_a_crash() {
    written_without_crash_model().crash();
}

fn an_image_shares_chunks_until_either_side_writes_them(new: fn() -> SparseStore) {
    let mut store = new();
    store.write(0, &[1u8; 2 * CHUNK_BYTES]).unwrap();
    store.flush();
    let mut image = store.image().expect("flushed");
    // Each side's writes stay its own.
    store.write(100, &[2u8; 10]).unwrap();
    image.write(CHUNK_BYTES as u64 + 100, &[3u8; 10]).unwrap();
    image.forget(0, 50);
    let read = |s: &SparseStore, at: u64| {
        let mut byte = [9u8; 1];
        s.read(at, &mut byte).unwrap();
        byte[0]
    };
    assert_eq!((read(&store, 100), read(&image, 100)), (2, 1));
    assert_eq!(
        (
            read(&store, CHUNK_BYTES as u64 + 100),
            read(&image, CHUNK_BYTES as u64 + 100)
        ),
        (1, 3)
    );
    assert_eq!((read(&store, 0), read(&image, 0)), (1, 0));
    // A crash of the original rolls back only its own write.
    store.crash();
    assert_eq!(read(&store, 100), 1);
    assert_eq!(read(&image, CHUNK_BYTES as u64 + 100), 3);
}

fn forget_frees_chunks_but_not_remembered_ones(new: fn() -> SparseStore) {
    let mut store = new();
    store.write(0, &[1u8; 4 * CHUNK_BYTES]).unwrap();
    store.flush();
    store.write(3 * CHUNK_BYTES as u64, &[2u8; 512]).unwrap();
    assert_eq!(store.held_bytes(), 4 * CHUNK_BYTES as u64);
    // Half of chunk 0 is zeroed, chunks 1 and 2 freed, chunk 3 kept:
    // an unflushed write needs its bytes.
    store.forget(2048, 4 * CHUNK_BYTES as u64 - 2048);
    assert_eq!(store.held_bytes(), 2 * CHUNK_BYTES as u64);
    let chunk3 = 3 * CHUNK_BYTES as u64;
    assert_runs(&store, &[(0, 2048, 1), (2048, 2048, 0), (chunk3, 512, 2)]);
    store.crash();
    // The remembered write rolls back.
    assert_runs(&store, &[(chunk3, 4096, 1)]);
}

/// One step of [`every_placement_agrees_on_every_byte`].
#[derive(Clone, Debug)]
enum Step {
    Write {
        at: u64,
        len: u64,
        byte: u8,
    },
    Forget {
        at: u64,
        len: u64,
    },
    Flush,
    /// Image the store, write to both sides, and go on with one of them.
    Image {
        keep_image: bool,
        at: u64,
        byte: u8,
    },
    Crash {
        keep_every: usize,
    },
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    // Offsets within 16 chunks, so steps overlap each other often.
    let at = 0..16 * CHUNK_BYTES as u64;
    prop_oneof![
        4 => (at.clone(), 1..3 * CHUNK_BYTES as u64, any::<u8>())
            .prop_map(|(at, len, byte)| Step::Write { at, len, byte }),
        1 => (at.clone(), 1..4 * CHUNK_BYTES as u64).prop_map(|(at, len)| Step::Forget { at, len }),
        2 => Just(Step::Flush),
        1 => (any::<bool>(), at, any::<u8>())
            .prop_map(|(keep_image, at, byte)| Step::Image { keep_image, at, byte }),
        1 => (1..4usize).prop_map(|keep_every| Step::Crash { keep_every }),
    ]
}

/// Apply `step` to `store`; an image is taken only of a flushed store.
fn apply(store: &mut SparseStore, step: &Step) {
    match *step {
        Step::Write { at, len, byte } => store.write(at, &vec![byte; len as usize]).unwrap(),
        Step::Forget { at, len } => store.forget(at, len),
        Step::Flush => store.flush(),
        Step::Image {
            keep_image,
            at,
            byte,
        } => {
            store.flush();
            let mut image = store.image().expect("flushed");
            image.write(at, &[byte; 100]).unwrap();
            store.write(at + 50, &[!byte; 100]).unwrap();
            if keep_image {
                *store = image;
            }
        }
        Step::Crash { keep_every } => store.crash_with(|i, _| {
            if i % keep_every == 0 {
                CrashFate::Keep
            } else {
                CrashFate::Tear { bytes: 512 }
            }
        }),
    }
}

proptest::proptest! {
    /// Stores on the heap, in a file and mixed, given the same steps,
    /// read the same bytes, hold the same chunks and preload the same runs.
    #[test]
    fn every_placement_agrees_on_every_byte(steps in proptest::collection::vec(step(), 1..40)) {
        let images = steps.iter().filter(|s| matches!(s, Step::Image { .. })).count();
        proptest::prop_assume!(images <= LAYERS_MAX);
        let mut stores = [SparseStore::in_memory(), in_scratch(), mixed()];
        for step in &steps {
            for store in &mut stores {
                apply(store, step);
            }
        }
        let span = 20 * CHUNK_BYTES;
        let mut heap = vec![1u8; span];
        stores[0].read(0, &mut heap).unwrap();
        for other in &stores[1..] {
            let mut bytes = vec![2u8; span];
            other.read(0, &mut bytes).unwrap();
            proptest::prop_assert!(heap == bytes, "the bytes differ");
            proptest::prop_assert_eq!(stores[0].written_runs(), other.written_runs());
            proptest::prop_assert_eq!(stores[0].held_bytes(), other.held_bytes());
            proptest::prop_assert_eq!(stores[0].durable_end_bytes(), other.durable_end_bytes());
        }
    }
}

#[test]
fn an_image_of_an_image_adds_no_layer_and_forgetting_over_a_layer_reads_zeros() {
    let mut store = in_scratch();
    store.write(0, &[1u8; 2 * CHUNK_BYTES]).unwrap();
    store.flush();
    let mut image = store.image().expect("flushed");
    // Many images of one image (a study's runs) share its one layer.
    for _ in 0..2 * LAYERS_MAX {
        let mut run = image.image().expect("flushed");
        run.write(10, &[2u8; 10]).unwrap();
    }
    image.forget(0, CHUNK_BYTES as u64);
    assert_runs(
        &image,
        &[(0, CHUNK_BYTES, 0), (CHUNK_BYTES as u64, CHUNK_BYTES, 1)],
    );
    assert_runs(&store, &[(0, 2 * CHUNK_BYTES, 1)]);
    assert_eq!(
        image.written_runs(),
        vec![(CHUNK_BYTES as u64, CHUNK_BYTES as u64)]
    );
}

#[test]
fn scratch_files_leave_no_name_behind_and_a_full_disk_is_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let scratch = ScratchDir::with_heap_budget(dir.path(), 0, 0).unwrap();
    let mut store = SparseStore::in_scratch(scratch);
    store.write(0, &[7u8; 3 * CHUNK_BYTES]).unwrap();
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(
        names.is_empty(),
        "scratch files are unlinked at creation: {names:?}"
    );
    assert_runs(&store, &[(0, 3 * CHUNK_BYTES, 7)]);
    let refused = ScratchDir::open(dir.path(), u64::MAX).unwrap_err();
    let message = refused.to_string();
    assert!(
        message.contains("--sim-dir") && message.contains("GB free") && !message.contains('\n'),
        "{message}"
    );
    let missing = ScratchDir::open(&dir.path().join("absent"), 0).unwrap_err();
    assert!(missing.to_string().contains("absent"), "{missing}");
}

/// Stale names the regression test below leaves in the way.
const STALE_NAMES: u64 = 32;
const _: () = assert!(STALE_NAMES < super::scratch::NAME_ATTEMPTS_MAX as u64);

/// Regression: each directory once numbered its own files, so two opened
/// on one path by concurrent tests chose the same name and one failed.
#[test]
fn two_directories_on_one_path_never_choose_the_same_name() {
    let dir = tempfile::tempdir().unwrap();
    let first = ScratchDir::with_heap_budget(dir.path(), 0, 0).unwrap();
    let second = ScratchDir::with_heap_budget(dir.path(), 0, 0).unwrap();
    let held: Vec<_> = (0..8)
        .flat_map(|_| [first.create_file(), second.create_file()])
        .collect::<Result<_, _>>()
        .expect("every name is new");
    assert_eq!(held.len(), 16);
    let leftover = format!(
        "{}{}-",
        super::scratch::SCRATCH_FILE_PREFIX,
        std::process::id()
    );
    // Names left by a dead process with this id over the next numbers
    // (more than concurrent tests take meanwhile, fewer than the attempts
    // allowed): the new file steps over them.
    let next = super::scratch::peek_next_file_number();
    for n in next..next + STALE_NAMES {
        std::fs::write(dir.path().join(format!("{leftover}{n}")), b"stale").unwrap();
    }
    first
        .create_file()
        .expect("names left by a dead process are stepped over");
}
