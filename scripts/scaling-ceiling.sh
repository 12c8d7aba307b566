#!/usr/bin/env bash
# How far can real TPC-B without fsync scale on this machine? Issue 17 asks
# 16 clients to reach 1.6 times the TPS of one client. This script measures
# that ratio beside a ceiling that owes nothing to the engine's sharing:
# two separate flashlab processes, one client each, on separate databases,
# run at the same time. They share no lock, no latch and no cache line of
# the engine; what holds their sum below twice one client is the machine
# (its cores, caches and memory) and the work each process does beside its
# client (the background writer, the log's writes).
#
#   scripts/scaling-ceiling.sh                 # 10 s per run, scale 16
#   DURATION=20 SCALE=16 WORK=/tmp PAIRS=3 scripts/scaling-ceiling.sh
#
# Prints each run's TPS and, per pair, the ratios to one client alone:
# "two processes" (the ceiling) and "16 clients" (one process).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10}
SCALE=${SCALE:-16}
WORK=${WORK:-/tmp}
PAIRS=${PAIRS:-2}
FLASHLAB=${FLASHLAB:-target/release/flashlab}

[ -x "$FLASHLAB" ] || cargo build --release
tmp=$(mktemp -d "$WORK/scaling-ceiling.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# TPS of one bench run without fsync: $1 clients, $2 directory.
tps() {
    rm -rf "$2"
    mkdir -p "$2"
    "$FLASHLAB" bench tpcb --real "$2" --clients "$1" --scale "$SCALE" \
        --duration "${DURATION}s" --progress 0 --durability no-sync |
        awk '$1 == "TPS" {print $2}'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2fx", a / b}'; }

echo "$(nproc) cores, scale $SCALE, ${DURATION} s per run, no fsync"
printf "%5s %12s %12s %12s %12s %14s %12s\n" pair "1 client" "process A" "process B" "16 clients" "two processes" "16 clients"
for pair in $(seq 1 "$PAIRS"); do
    one=$(tps 1 "$tmp/one")
    tps 1 "$tmp/a" >"$tmp/a.tps" &
    tps 1 "$tmp/b" >"$tmp/b.tps"
    wait
    a=$(cat "$tmp/a.tps")
    b=$(cat "$tmp/b.tps")
    sixteen=$(tps 16 "$tmp/sixteen")
    both=$(awk -v a="$a" -v b="$b" 'BEGIN {print a + b}')
    printf "%5s %12s %12s %12s %12s %14s %12s\n" "$pair" "$one" "$a" "$b" "$sixteen" \
        "$(ratio "$both" "$one")" "$(ratio "$sixteen" "$one")"
done
