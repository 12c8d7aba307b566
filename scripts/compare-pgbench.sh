#!/usr/bin/env bash
# flashlab's real TPC-B against PostgreSQL's pgbench (and SQLite at one
# client), back to back on the same file system, with durable commits on
# every side. Prints the TPS of each and the ratio per client count, then
# flashlab without fsync at 1 and 16 clients, with the cores it kept busy,
# and pgbench without fsync at 1 and 16 clients.
#
#   scripts/compare-pgbench.sh            # 1 4 16 64 clients, 10 s each
#   CLIENTS="1 16" DURATION=20 SCALE=16 WORK=/tmp scripts/compare-pgbench.sh
#
# Needs Debian's `postgresql` package (initdb, pg_ctl, pgbench; the cluster
# is initialised in a temporary directory under $WORK with the defaults:
# fsync on, synchronous_commit on, full_page_writes on; shared_buffers is
# set to flashlab's 512 MB pool) and, for SQLite, a C compiler and
# libsqlite3-dev (scripts/sqlite-tpcb.c; WAL, synchronous=FULL). flashlab
# runs with its defaults (sync durability, full-page images on), and again
# with early lock release (`--early-lock-release`, off by default; row locks
# freed at the commit record's append, before the force, as InnoDB does;
# PostgreSQL holds them through the force): the "ELR" columns.
# Run as root, the PostgreSQL commands run as the `postgres` user.
set -euo pipefail
cd "$(dirname "$0")/.."

CLIENTS=${CLIENTS:-"1 4 16 64"}
DURATION=${DURATION:-10}
SCALE=${SCALE:-16}
WORK=${WORK:-/tmp}
FLASHLAB=${FLASHLAB:-target/release/flashlab}
PORT=${PORT:-54329}

[ -x "$FLASHLAB" ] || cargo build --release
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [ -z "$PGBIN" ]; then
    echo "compare-pgbench: no PostgreSQL (apt-get install -y postgresql)" >&2
    exit 1
fi
AS=()
if [ "$(id -u)" = 0 ]; then AS=(runuser -u postgres --); fi

tmp=$(mktemp -d "$WORK/compare-pgbench.XXXXXX")
chmod 755 "$tmp"
[ "$(id -u)" = 0 ] && chown postgres "$tmp"
cleanup() {
    "${AS[@]}" "$PGBIN/pg_ctl" -D "$tmp/pg" -m fast stop >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT

"${AS[@]}" "$PGBIN/initdb" -D "$tmp/pg" -A trust >/dev/null
"${AS[@]}" "$PGBIN/pg_ctl" -D "$tmp/pg" -l "$tmp/pg.log" -w start \
    -o "-k $tmp -p $PORT -c listen_addresses='' -c max_connections=200 -c shared_buffers=512MB" >/dev/null
PG=(-h "$tmp" -p "$PORT")
"${AS[@]}" "$PGBIN/createdb" "${PG[@]}" bench
"${AS[@]}" "$PGBIN/pgbench" "${PG[@]}" -i -q -s "$SCALE" bench >/dev/null 2>&1

echo "file system: $(df -T "$WORK" | awk 'NR == 2 {print $2, $1}'), $(nproc) cores, scale $SCALE ($((SCALE * 100000)) accounts), ${DURATION} s per run"
fsync_rate=$("${AS[@]}" "$PGBIN/pg_test_fsync" -s 2 -f "$tmp/fsync.test" 2>/dev/null |
    awk '/one 8kB write/ {one = 1} one && $1 == "fdatasync" {print $2; exit}')
echo "1/fdatasync (pg_test_fsync, one 8 kB write): ${fsync_rate:-?} per second"

flashlab_tps() {
    local dir="$tmp/flashlab"
    rm -rf "$dir"
    mkdir -p "$dir"
    "$FLASHLAB" bench tpcb --real "$dir" --clients "$1" --scale "$SCALE" \
        --duration "${DURATION}s" --progress 0 "${@:2}" | awk '$1 == "TPS" {print $2}'
    rm -rf "$dir"
}

# TPS and the cores the process used (CPU utilization x cores), no fsync.
flashlab_nosync() {
    local dir="$tmp/flashlab"
    rm -rf "$dir"
    mkdir -p "$dir"
    "$FLASHLAB" bench tpcb --real "$dir" --clients "$1" --scale "$SCALE" \
        --duration "${DURATION}s" --progress 0 --durability no-sync |
        awk -v n="$(nproc)" '$1 == "TPS" {t = $2} /^CPU utilization/ {u = $3} END {sub("%", "", u); printf "%s %.2f\n", t, u / 100 * n}'
    rm -rf "$dir"
}

pgbench_tps() {
    local jobs=$(( $1 < $(nproc) ? $1 : $(nproc) ))
    "${AS[@]}" "$PGBIN/pgbench" "${PG[@]}" -c "$1" -j "$jobs" -T "$DURATION" bench 2>/dev/null |
        awk '/^tps = / {print $3; exit}'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2fx", a / b}'; }
printf "%8s %12s %12s %12s %8s %8s\n" clients flashlab "flashlab ELR" pgbench ratio "ELR ratio"
for c in $CLIENTS; do
    f=$(flashlab_tps "$c")
    e=$(flashlab_tps "$c" --early-lock-release)
    p=$(pgbench_tps "$c")
    printf "%8s %12s %12s %12s %8s %8s\n" "$c" "$f" "$e" "$p" "$(ratio "$f" "$p")" "$(ratio "$e" "$p")"
done

read -r one one_cores < <(flashlab_nosync 1)
read -r sixteen sixteen_cores < <(flashlab_nosync 16)
echo "flashlab without fsync: 1 client $one TPS ($one_cores cores busy), 16 clients $sixteen TPS ($sixteen_cores cores busy): $(awk -v a="$sixteen" -v b="$one" 'BEGIN {printf "%.2fx", a / b}')"

# PostgreSQL without fsync, for the same scaling from 1 to 16 clients on
# this machine's cores (fsync and synchronous_commit off).
"${AS[@]}" "$PGBIN/pg_ctl" -D "$tmp/pg" -l "$tmp/pg.log" -w restart -m fast \
    -o "-k $tmp -p $PORT -c listen_addresses='' -c max_connections=200 -c shared_buffers=512MB -c fsync=off -c synchronous_commit=off" >/dev/null
pg_one=$(pgbench_tps 1)
pg_sixteen=$(pgbench_tps 16)
echo "pgbench without fsync: 1 client $pg_one TPS, 16 clients $pg_sixteen TPS: $(awk -v a="$pg_sixteen" -v b="$pg_one" 'BEGIN {printf "%.2fx", a / b}')"
"${AS[@]}" "$PGBIN/pg_ctl" -D "$tmp/pg" -l "$tmp/pg.log" -w restart -m fast \
    -o "-k $tmp -p $PORT -c listen_addresses='' -c max_connections=200 -c shared_buffers=512MB" >/dev/null

if command -v cc >/dev/null && [ -f /usr/include/sqlite3.h ]; then
    cc -O2 -o "$tmp/sqlite-tpcb" scripts/sqlite-tpcb.c -lsqlite3
    s=$("$tmp/sqlite-tpcb" "$tmp/sqlite.db" "$SCALE" "$DURATION" | awk '$1 == "tps" {print $2}')
    f=$(flashlab_tps 1)
    printf "SQLite at 1 client (WAL, synchronous=FULL): %s TPS; flashlab %s TPS: %s\n" "$s" "$f" \
        "$(awk -v f="$f" -v s="$s" 'BEGIN {printf "%.2fx", f / s}')"
    if [ -n "${fsync_rate:-}" ]; then
        echo "flashlab at 1 client: $(awk -v f="$f" -v r="$fsync_rate" 'BEGIN {printf "%.0f%%", 100 * f / r}') of 1/fdatasync"
    fi
fi
