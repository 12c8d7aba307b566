//! Script-driven isolation tests, in the style of toydb's golden scripts.
//!
//! Each script line is `tN: command => expected`. Every transaction runs in
//! its own simulated task, so a command that waits for a lock shows up as
//! `blocked`; when a later command lets it finish, the line of that later
//! command also reports it (`...; t2: <result>`). The scripts pin down what
//! snapshot isolation prevents (dirty write, dirty read, lost update,
//! non-repeatable read, read skew) and the anomaly it allows (write skew),
//! and what read committed allows.

use std::collections::BTreeMap;
use std::sync::Arc;

use flashlab_engine::mvcc::Isolation;
use flashlab_engine::{Database, DbConfig, Table, TableSpec, Transaction};
use flashlab_runtime::{Mutex, Receiver, Rt, Sender, Sim, SimConfig, channel};

/// Virtual time a command is given before it counts as blocked.
const BLOCKED_AFTER_NS: u64 = 1_000_000;

struct Session {
    commands: Sender<String>,
    result: Arc<Mutex<Option<String>>>,
    pending: bool,
}

fn show(result: flashlab_engine::Result<Option<Vec<u8>>>) -> String {
    match result {
        Ok(Some(v)) => String::from_utf8_lossy(&v).into_owned(),
        Ok(None) => "none".into(),
        Err(flashlab_engine::Error::Serialization { .. }) => "error: serialization".into(),
        Err(e) => format!("error: {e}"),
    }
}

fn execute(db: &Database, table: &Table, txn: &mut Option<Transaction>, words: &[&str]) -> String {
    let ok = |r: flashlab_engine::Result<()>| show(r.map(|()| Some(b"ok".to_vec())));
    match (words, txn.as_mut()) {
        (["begin"], _) => {
            *txn = Some(db.begin().expect("begin"));
            "ok".into()
        }
        (["get", k], Some(t)) => show(t.get(table, k.as_bytes())),
        (["put", k, v], Some(t)) => ok(t.put(table, k.as_bytes(), v.as_bytes())),
        (["delete", k], Some(t)) => ok(t.delete(table, k.as_bytes()).map(|_| ())),
        (["commit"], Some(_)) => ok(txn.take().expect("txn").commit()),
        (["abort"], Some(_)) => ok(txn.take().expect("txn").abort()),
        _ => format!("bad command {words:?}"),
    }
}

fn session(rt: &Rt, db: &Database, table: &Table) -> Session {
    let (tx, rx): (Sender<String>, Receiver<String>) = channel(4);
    let result = Arc::new(Mutex::new(None));
    let (db, table, slot) = (db.clone(), table.clone(), result.clone());
    rt.spawn("session", move || {
        let mut txn = None;
        while let Some(command) = rx.recv() {
            let words: Vec<&str> = command.split_whitespace().collect();
            let out = execute(&db, &table, &mut txn, &words);
            *slot.lock() = Some(out);
        }
    });
    Session {
        commands: tx,
        result,
        pending: false,
    }
}

/// Run a script; return it with the actual results, for comparison.
fn run(script: &str, isolation: Isolation) -> (String, String) {
    let script = script.to_string();
    let (outcome, _) = Sim::run(SimConfig::default(), move |rt| {
        let mut config = DbConfig::simple("memory", "memory", 4096, 64 * 4096);
        config.mvcc.isolation = isolation;
        config.mvcc.page_bytes = 4096;
        let db = Database::open(&config).unwrap();
        let table = db.create_table(TableSpec::bytes("t")).unwrap();
        let mut sessions: BTreeMap<String, Session> = BTreeMap::new();
        let (mut expected, mut actual) = (String::new(), String::new());
        for line in script
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let (command, want) = line.split_once("=>").expect("line has =>");
            let (who, what) = command.split_once(':').expect("line names a session");
            let who = who.trim().to_string();
            if !sessions.contains_key(&who) {
                sessions.insert(who.clone(), session(&rt, &db, &table));
            }
            let s = sessions.get_mut(&who).unwrap();
            s.commands.send(what.trim().to_string()).unwrap();
            s.pending = true;
            rt.sleep(BLOCKED_AFTER_NS);
            let mut got = Vec::new();
            let this = sessions[&who].result.lock().take();
            match this {
                Some(r) => {
                    got.push(r);
                    sessions.get_mut(&who).unwrap().pending = false;
                }
                None => got.push("blocked".into()),
            }
            for (name, other) in sessions.iter_mut().filter(|(n, _)| **n != who) {
                if other.pending
                    && let Some(r) = other.result.lock().take()
                {
                    got.push(format!("{name}: {r}"));
                    other.pending = false;
                }
            }
            expected.push_str(&format!("{} => {}\n", command.trim(), want.trim()));
            actual.push_str(&format!("{} => {}\n", command.trim(), got.join("; ")));
        }
        (expected, actual)
    })
    .unwrap();
    outcome.finished().unwrap()
}

/// Run `script` after [`SETUP`] and compare every outcome with the one it
/// names.
fn check(script: &str, isolation: Isolation) {
    let (expected, actual) = run(&format!("{SETUP}{script}"), isolation);
    assert_eq!(
        actual, expected,
        "\n--- expected\n{expected}\n--- actual\n{actual}"
    );
}

const SETUP: &str = "
    t0: begin => ok
    t0: put x 1 => ok
    t0: put y 1 => ok
    t0: commit => ok
";

/// t1 reads x, then t2 sets it to 2 and commits: what t1 reads next
/// depends on its isolation level.
const T2_UPDATES_X_T1_READ: &str = "
    t1: begin => ok
    t1: get x => 1
    t2: begin => ok
    t2: put x 2 => ok
    t2: commit => ok
";

#[test]
fn dirty_write_is_prevented() {
    check(
        "
        t1: begin => ok
        t2: begin => ok
        t1: put x 10 => ok
        # t2 waits for t1's lock, then loses: first updater wins
        t2: put x 20 => blocked
        t1: commit => ok; t2: error: serialization
        t3: begin => ok
        t3: get x => 10
    ",
        Isolation::Snapshot,
    );
}

#[test]
fn dirty_read_is_prevented() {
    check(
        "
        t1: begin => ok
        t1: put x 10 => ok
        t2: begin => ok
        t2: get x => 1
        t1: abort => ok
        t2: get x => 1
    ",
        Isolation::Snapshot,
    );
}

#[test]
fn lost_update_is_prevented() {
    check(
        "
        t1: begin => ok
        t2: begin => ok
        t1: get x => 1
        t2: get x => 1
        t1: put x 2 => ok
        t1: commit => ok
        t2: put x 2 => error: serialization
    ",
        Isolation::Snapshot,
    );
}

#[test]
fn non_repeatable_read_is_prevented() {
    check(
        &format!(
            "{T2_UPDATES_X_T1_READ}
        t1: get x => 1
    "
        ),
        Isolation::Snapshot,
    );
}

#[test]
fn read_skew_is_prevented() {
    check(
        "
        t1: begin => ok
        t1: get x => 1
        t2: begin => ok
        t2: put x 0 => ok
        t2: put y 2 => ok
        t2: commit => ok
        # x + y stays 2 in t1's snapshot
        t1: get y => 1
    ",
        Isolation::Snapshot,
    );
}

#[test]
fn write_skew_is_allowed() {
    // Two doctors on call (x, y); each may leave if the other stays. Both
    // read both, each takes a different one off call, both commit: the
    // invariant x + y >= 1 is broken. Snapshot isolation allows this.
    check(
        "
        t1: begin => ok
        t2: begin => ok
        t1: get x => 1
        t1: get y => 1
        t2: get x => 1
        t2: get y => 1
        t1: put x 0 => ok
        t2: put y 0 => ok
        t1: commit => ok
        t2: commit => ok
        t3: begin => ok
        t3: get x => 0
        t3: get y => 0
    ",
        Isolation::Snapshot,
    );
}

#[test]
fn readers_and_writers_do_not_block_each_other() {
    check(
        "
        t1: begin => ok
        t1: put x 5 => ok
        t2: begin => ok
        t2: get x => 1
        t2: put y 7 => ok
        t1: get y => 1
        t1: commit => ok
        t2: commit => ok
    ",
        Isolation::Snapshot,
    );
}

#[test]
fn read_committed_allows_non_repeatable_reads_and_updates_the_latest() {
    check(
        &format!(
            "{T2_UPDATES_X_T1_READ}
        t1: get x => 2
        t1: put x 3 => ok
        t1: commit => ok
    "
        ),
        Isolation::ReadCommitted,
    );
}
