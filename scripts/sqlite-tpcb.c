/* TPC-B against SQLite, one client, for scripts/compare-pgbench.sh.
 *
 * The same transaction as pgbench's built-in TPC-B-like script and
 * flashlab's `bench tpcb`: update an account, read its balance, update its
 * teller and branch, insert a history row; commit. WAL journal mode with
 * synchronous=FULL (every commit is fsync'd), 100,000 accounts and 10
 * tellers per branch.
 *
 *   cc -O2 -o sqlite-tpcb scripts/sqlite-tpcb.c -lsqlite3
 *   ./sqlite-tpcb DB_FILE BRANCHES SECONDS
 *
 * Prints "tps N" on its last line.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void check(int rc, sqlite3 *db, const char *what) {
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
        fprintf(stderr, "sqlite-tpcb: %s: %s\n", what, sqlite3_errmsg(db));
        exit(1);
    }
}

static void exec(sqlite3 *db, const char *sql) {
    char *err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "sqlite-tpcb: %s: %s\n", sql, err);
        exit(1);
    }
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static sqlite3_stmt *prepare(sqlite3 *db, const char *sql) {
    sqlite3_stmt *s;
    check(sqlite3_prepare_v2(db, sql, -1, &s, NULL), db, sql);
    return s;
}

static void step(sqlite3 *db, sqlite3_stmt *s) {
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    }
    check(rc, db, "step");
    sqlite3_reset(s);
}

/* Insert rows 1 to n with `sql`: column 1 the row's id and, unless
 * `per_branch` is 0, column 2 its branch ((id - 1) / per_branch + 1). */
static void load(sqlite3 *db, const char *sql, long n, long per_branch) {
    sqlite3_stmt *ins = prepare(db, sql);
    for (long id = 1; id <= n; id++) {
        sqlite3_bind_int64(ins, 1, id);
        if (per_branch != 0)
            sqlite3_bind_int64(ins, 2, (id - 1) / per_branch + 1);
        step(db, ins);
    }
    sqlite3_finalize(ins);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: sqlite-tpcb DB_FILE BRANCHES SECONDS\n");
        return 2;
    }
    int branches = atoi(argv[2]);
    double seconds = atof(argv[3]);
    long accounts = 100000L * branches;
    int tellers = 10 * branches;
    sqlite3 *db;
    remove(argv[1]);
    check(sqlite3_open(argv[1], &db), db, "open");
    exec(db, "PRAGMA journal_mode=WAL");
    exec(db, "PRAGMA synchronous=FULL");
    exec(db, "PRAGMA cache_size=-524288"); /* 512 MB, as flashlab's pool */
    exec(db, "CREATE TABLE branches(bid INTEGER PRIMARY KEY, bbalance INTEGER, filler TEXT)");
    exec(db, "CREATE TABLE tellers(tid INTEGER PRIMARY KEY, bid INTEGER, tbalance INTEGER, filler TEXT)");
    exec(db, "CREATE TABLE accounts(aid INTEGER PRIMARY KEY, bid INTEGER, abalance INTEGER, filler TEXT)");
    exec(db, "CREATE TABLE history(tid INTEGER, bid INTEGER, aid INTEGER, delta INTEGER, mtime INTEGER, filler TEXT)");
    exec(db, "BEGIN");
    load(db, "INSERT INTO accounts VALUES(?, ?, 0, '                                                                                    ')", accounts, 100000);
    load(db, "INSERT INTO tellers VALUES(?, ?, 0, '')", tellers, 10);
    load(db, "INSERT INTO branches VALUES(?, 0, '')", branches, 0);
    exec(db, "COMMIT");
    exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");

    sqlite3_stmt *begin = prepare(db, "BEGIN");
    sqlite3_stmt *upd_a = prepare(db, "UPDATE accounts SET abalance = abalance + ?1 WHERE aid = ?2");
    sqlite3_stmt *sel_a = prepare(db, "SELECT abalance FROM accounts WHERE aid = ?1");
    sqlite3_stmt *upd_t = prepare(db, "UPDATE tellers SET tbalance = tbalance + ?1 WHERE tid = ?2");
    sqlite3_stmt *upd_b = prepare(db, "UPDATE branches SET bbalance = bbalance + ?1 WHERE bid = ?2");
    sqlite3_stmt *ins_h = prepare(db, "INSERT INTO history VALUES(?1, ?2, ?3, ?4, ?5, '')");
    sqlite3_stmt *commit = prepare(db, "COMMIT");
    srand(1);
    long done = 0;
    double start = now(), end = start + seconds;
    while (now() < end) {
        long aid = (long)(((double)rand() / RAND_MAX) * (accounts - 1)) + 1;
        int tid = rand() % tellers + 1;
        int bid = rand() % branches + 1;
        int delta = rand() % 10001 - 5000;
        step(db, begin);
        sqlite3_bind_int(upd_a, 1, delta);
        sqlite3_bind_int64(upd_a, 2, aid);
        step(db, upd_a);
        sqlite3_bind_int64(sel_a, 1, aid);
        step(db, sel_a);
        sqlite3_bind_int(upd_t, 1, delta);
        sqlite3_bind_int(upd_t, 2, tid);
        step(db, upd_t);
        sqlite3_bind_int(upd_b, 1, delta);
        sqlite3_bind_int(upd_b, 2, bid);
        step(db, upd_b);
        sqlite3_bind_int(ins_h, 1, tid);
        sqlite3_bind_int(ins_h, 2, bid);
        sqlite3_bind_int64(ins_h, 3, aid);
        sqlite3_bind_int(ins_h, 4, delta);
        sqlite3_bind_int64(ins_h, 5, (sqlite3_int64)time(NULL));
        step(db, ins_h);
        step(db, commit);
        done++;
    }
    double elapsed = now() - start;
    printf("transactions %ld in %.2f s\n", done, elapsed);
    printf("tps %.1f\n", done / elapsed);
    sqlite3_close(db);
    return 0;
}
