#!/usr/bin/env python3
"""CPU time of the language-model study's runs (issue 63's plan against spent).

The run files of the pinned commit record wall time only (seconds_train, seconds_eval), which on
a shared machine at nice 19 says little about the CPU a run used. This monitor, started beside
the runner, reads every `scripts/train.lua` process's CPU time (user + system, /proc/<pid>/stat)
every 20 seconds and, when a process ends, appends one tab-separated line to LOG:

    run file (relative to its checkout)   CPU seconds   last progress step   end (UTC)   pid

A run resumed from its checkpoint by a later process gets one line per process (add them).
LOG.now holds the running processes' latest figures (what a session cut short leaves).

    nice -n 5 python3 results/lm2_cpu_monitor.py LOG &
"""
import os
import sys
import time

LOG = sys.argv[1]
TICK = os.sysconf("SC_CLK_TCK")


def arg_after(cmd, flag):
    return cmd[cmd.index(flag) + 1].decode() if flag in cmd else None


def scan():
    cur = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            if b"scripts/train.lua" not in cmd or b"--out" not in cmd:
                continue
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / TICK  # utime + stime
            cwd = os.readlink(f"/proc/{pid}/cwd")
            step = ""
            prog = arg_after(cmd, b"--progress")
            if prog:
                try:
                    step = open(os.path.join(cwd, prog)).read().split()[0]
                except (OSError, IndexError):
                    pass
            cur[pid] = (arg_after(cmd, b"--out"), cpu, step)
        except (OSError, ValueError, IndexError):
            continue  # the process ended while being read
    return cur


def main():
    seen = {}
    while True:
        cur = scan()
        ended = [p for p in seen if p not in cur]
        if ended:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            with open(LOG, "a") as f:
                for p in ended:
                    out, cpu, step = seen[p]
                    f.write(f"{out}\t{cpu:.1f}\t{step}\t{stamp}\t{p}\n")
        seen = cur
        tmp = LOG + ".now.tmp"
        with open(tmp, "w") as f:
            for p, (out, cpu, step) in cur.items():
                f.write(f"{out}\t{cpu:.1f}\t{step}\t\t{p}\n")
        os.replace(tmp, LOG + ".now")
        time.sleep(20)


if __name__ == "__main__":
    main()
