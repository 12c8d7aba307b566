#!/usr/bin/env python3
"""Run `flashlab bench tpcb --real` and count context switches per transaction.

Usage: scripts/bench-ctxsw.py FLASHLAB_BINARY DIR CLIENTS [extra bench args...]

The bench prints one progress line per second of the measured interval. At
the first and at the last of them this script sums the voluntary and
involuntary context switches of every thread of the process
(/proc/PID/task/*/status), and divides the difference by the transactions
committed between the two lines (the progress lines' TPS). Prints one line:
clients, TPS (the bench's own figure), context switches per transaction,
and the bench's CPU utilization (process CPU time over wall time and cores).
"""
import glob
import os
import re
import subprocess
import sys


def switches(pid):
    total = 0
    for status in glob.glob(f"/proc/{pid}/task/*/status"):
        try:
            with open(status) as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def main():
    binary, directory, clients = sys.argv[1:4]
    extra = sys.argv[4:]
    duration = 10
    for i, a in enumerate(extra):
        if a == "--duration":
            duration = int(extra[i + 1].rstrip("s"))
    cmd = [binary, "bench", "tpcb", "--real", directory, "--clients", clients,
           "--progress", "1", *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = 0
    first = last = None
    txns = 0.0
    tps = None
    cpu = float("nan")
    out = []
    for line in proc.stdout:
        out.append(line)
        m = re.match(r"progress: ([\d.]+) s, ([\d.]+) tps", line)
        if m:
            lines += 1
            if lines == 1:
                first = switches(proc.pid)
            elif lines <= duration - 1:
                txns += float(m.group(2))
                last = switches(proc.pid)
        m = re.match(r"TPS\s+([\d.]+)", line)
        if m:
            tps = float(m.group(1))
        m = re.match(r"CPU utilization\s+([\d.]+)%", line)
        if m:
            cpu = float(m.group(1))
    proc.wait()
    if proc.returncode != 0 or tps is None or last is None or txns == 0:
        sys.stderr.write("".join(out))
        sys.exit(1)
    print(f"clients {clients:>3}  TPS {tps:10.1f}  ctx switches/txn {(last - first) / txns:6.2f}  "
          f"CPU {cpu:5.1f}% of {os.cpu_count()} cores  {' '.join(extra)}")


if __name__ == "__main__":
    main()
