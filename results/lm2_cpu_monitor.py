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
    python3 results/lm2_cpu_monitor.py --summary results/lm2-cpu.tsv

--summary prints the plan against spent from such a log (with its header line, as committed):
per step of results/run_lm2.sh, the runs finished, the CPU-hours spent (every process of a run,
a resumed run's included) and the plan's CPU-hours for the same runs (docs/results.md's
CPU-time table: a run in all, the evaluation included).
"""
import os
import re
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")
# the plan's CPU seconds of a run in all, by size (docs/results.md, the pinned commit's steady
# rates with dee0878's evaluation)
PLAN_RUN = {"lm2-s": 185, "lm2-m": 726, "lm2-l": 4780}
STEPS_OF = {"lm2-s": 800, "lm2-m": 2200, "lm2-l": 7100}  # a run's training steps, by size
STEPS = (("first", lambda size, seed: seed <= 2), ("small", lambda size, seed: size == "lm2-s"),
         ("medium", lambda size, seed: size == "lm2-m"),
         ("large", lambda size, seed: size == "lm2-l"))


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


def summary(path):
    """Prints the plan against spent of the log at path (its runs' folders and seeds)."""
    cpu, done = {}, set()
    with open(path) as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            m = re.match(r"results/(lm2-[sml])/runs/([a-z_]+)-s(\d+)\.json$", cols[0])
            if not m:
                continue  # the header, or another folder (lm2-s-long: not in the plan)
            run = (m.group(1), m.group(2), int(m.group(3)))
            cpu[run] = cpu.get(run, 0.0) + float(cols[1])
            if cols[2] and int(cols[2]) == STEPS_OF[run[0]]:
                done.add(run)  # (a process that ended at the last step: the run is finished)
    print("| step | runs trained to their last step | CPU-hours spent | the plan's CPU-hours for them |")
    print("|---|---|---|---|")
    total_spent = total_plan = 0.0
    for name, member in STEPS:
        runs = [r for r in sorted(cpu) if member(r[0], r[2]) and
                (name == "first" or r[2] > 2)]
        spent = sum(cpu[r] for r in runs) / 3600
        plan = sum(PLAN_RUN[r[0]] for r in runs) / 3600
        total_spent, total_plan = total_spent + spent, total_plan + plan
        print(f"| {name} | {len([r for r in runs if r in done])} | {spent:.2f} | {plan:.2f} |")
    print(f"| all | {len(done)} | {total_spent:.2f} | {total_plan:.2f} |")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--summary":
        summary(sys.argv[2])
        return
    LOG = sys.argv[1]
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
