#!/usr/bin/env python3
"""Count the host instructions one simulated transaction costs.

Usage: scripts/txn-instructions.py FLASHLAB_BINARY [TOP] [-- extra bench args...]

Wall-clock time on a shared two-core machine varies by 20% from one run to
the next; an instruction count does not. This script runs lee2008 Table 3's
simulated TPC-B (`bench tpcb --clients 20 --scale 32 --accounts-per-branch
10000 --log-device ssd-2008`) under valgrind's callgrind twice, for 10 and
for 30 simulated seconds. A simulated run is deterministic, so the two runs
load the same database and run the same first 10 seconds: the difference of
their instruction counts, over the difference of their transactions, is the
cost of one transaction with loading, start-up and the final check taken
out. It prints that figure, and the TOP functions (default 25) by their own
instructions per transaction (their callees excluded).

An instruction is not a nanosecond: a copy the C library makes with `rep
movsb` counts about one instruction per byte, and a cache miss counts
nothing. Use it to compare two binaries of the engine, not two machines.
It takes about two minutes (both runs at once, on two cores).
"""
import os
import re
import subprocess
import sys
import tempfile

BENCH = ["bench", "tpcb", "--clients", "20", "--scale", "32",
         "--accounts-per-branch", "10000", "--log-device", "ssd-2008"]
DURATIONS = ["10s", "30s"]


def run(binary, duration, out_file, extra):
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}",
           binary] + BENCH + ["--duration", duration] + extra
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def transactions(output):
    match = re.search(r"host per txn .*\((\d+) transactions", output)
    if not match:
        sys.exit(f"no 'host per txn' line in the bench's output:\n{output[-2000:]}")
    return int(match.group(1))


def self_costs(profile):
    """Instructions per function, callees excluded, from callgrind_annotate."""
    text = subprocess.run(["callgrind_annotate", "--auto=no", "--threshold=100", profile],
                          capture_output=True, text=True, check=True).stdout
    costs, total = {}, None
    for line in text.splitlines():
        match = re.match(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$", line)
        if not match:
            continue
        count = int(match.group(1).replace(",", ""))
        name = match.group(2)
        if "PROGRAM TOTALS" in name:
            total = count
            continue
        name = re.sub(r" \[.*\]$", "", name.split(":", 1)[-1])
        costs[name] = costs.get(name, 0) + count
    return total, costs


def main():
    args = sys.argv[1:]
    extra = []
    if "--" in args:
        extra = args[args.index("--") + 1:]
        args = args[:args.index("--")]
    if not args:
        sys.exit(__doc__)
    binary = args[0]
    top = int(args[1]) if len(args) > 1 else 25
    with tempfile.TemporaryDirectory() as tmp:
        files = [os.path.join(tmp, f"callgrind.{d}") for d in DURATIONS]
        procs = [run(binary, d, f, extra) for d, f in zip(DURATIONS, files)]
        outputs = [p.communicate()[0] for p in procs]
        for p, out in zip(procs, outputs):
            if p.returncode != 0:
                sys.exit(f"the bench failed:\n{out[-2000:]}")
        txns = [transactions(out) for out in outputs]
        (total_a, a), (total_b, b) = self_costs(files[0]), self_costs(files[1])
    n = txns[1] - txns[0]
    print(f"{(total_b - total_a) / n:.0f} instructions per simulated transaction "
          f"({n} transactions between the {DURATIONS[0]} and {DURATIONS[1]} runs)")
    diff = {k: b.get(k, 0) - a.get(k, 0) for k in set(a) | set(b)}
    for name, count in sorted(diff.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{count / n:9.0f}  {name[:140]}")


if __name__ == "__main__":
    main()
