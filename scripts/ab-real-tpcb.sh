#!/usr/bin/env bash
# Two flashlab binaries side by side on real TPC-B without fsync: for each
# client count, PAIRS runs of A then B, alternating, each on a fresh
# database. Prints one line per run (binary, clients, TPS, CPU busy) and,
# per client count, the median TPS of each and B/A.
#
#   scripts/ab-real-tpcb.sh OLD_BINARY NEW_BINARY            # 1 2 16 clients
#   CLIENTS="2 16" PAIRS=3 DURATION=8 SCALE=16 WORK=/tmp scripts/ab-real-tpcb.sh A B
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: $0 BINARY_A BINARY_B" >&2; exit 2; }
A=$1
B=$2
CLIENTS=${CLIENTS:-"1 2 16"}
PAIRS=${PAIRS:-3}
DURATION=${DURATION:-8}
SCALE=${SCALE:-16}
WORK=${WORK:-/tmp}
for bin in "$A" "$B"; do
    [ -x "$bin" ] || { echo "$0: $bin: not an executable" >&2; exit 2; }
done
tmp=$(mktemp -d "$WORK/ab-real-tpcb.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# One run: $1 binary, $2 clients. Prints "TPS CPU%".
run() {
    rm -rf "$tmp/db" && mkdir "$tmp/db"
    "$1" bench tpcb --real "$tmp/db" --clients "$2" --scale "$SCALE" \
        --duration "${DURATION}s" --durability no-sync 2>&1 |
        awk '/^TPS/ {tps = $2} /^CPU utilization/ {cpu = $3} END {print tps, cpu}'
}

median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

for clients in $CLIENTS; do
    : > "$tmp/a" && : > "$tmp/b"
    for _ in $(seq "$PAIRS"); do
        for side in a b; do
            bin=$A && [ $side = b ] && bin=$B
            read -r tps cpu < <(run "$bin" "$clients")
            echo "$side $bin clients=$clients TPS=$tps CPU=$cpu"
            echo "$tps" >> "$tmp/$side"
        done
    done
    ma=$(median < "$tmp/a")
    mb=$(median < "$tmp/b")
    echo "clients=$clients median A $ma, B $mb, B/A $(awk -v a="$ma" -v b="$mb" 'BEGIN {printf "%.3f", b / a}')"
done
