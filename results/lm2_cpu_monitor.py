#!/usr/bin/env python3
"""CPU time of the language-model study's runs (issue 63's plan against spent).

The run files of the pinned commit record wall time only (seconds_train, seconds_eval), which on
a shared machine at nice 19 says little about the CPU a run used. This monitor, started beside
the runner in the same checkout (its working directory), reads the CPU time (user + system,
/proc/<pid>/stat) of every `scripts/train.lua` process working in that checkout (the study's, not
those of tests or other clones on the machine) every 20 seconds and, when a process ends, appends
one tab-separated line to LOG:

    run file (relative to its checkout)   CPU seconds   last progress step   end (UTC)   pid

A run resumed from its checkpoint by a later process gets one line per process (add them).
LOG.now holds the running processes' latest figures (what a session cut short leaves). Started
again, the monitor first appends LOG.now's lines of processes that no longer run (ended with the
monitor before it, a session that ended) to LOG, with the time LOG.now was last written as their
end: their CPU time up to 20 seconds before they ended. Until it has seen a run of its own
checkout, it ends (status 1, one line on stderr) as soon as the study's runs train in another
checkout of the same git repository (the study's worktree) and none in its own: there it would
watch none of them.

    nice -n 5 python3 results/lm2_cpu_monitor.py LOG &
    python3 results/lm2_cpu_monitor.py --summary results/lm2-cpu.tsv

--summary prints the plan against spent from such a log (with its header line, as committed):
per step of results/run_lm2.sh, the runs finished, the CPU-hours spent on them (every process
of a run, a resumed run's included), the plan's CPU-hours for the same runs (the run_cpu_seconds
of results/lm2_plan.tsv beside this script: docs/results.md's "The budget", a run in all, the
evaluation included) and the CPU-hours of runs not finished;
then the CPU-hours of the study's other folders (runs kept as a record outside the tables, and
the secondary steps long and medium-lr). A run is finished when one of its processes was last
seen at its last step, or when its run file is there in the checkout that holds LOG's folder (a
run file is written when the run ends; the last scan, up to 20 s before a process ends, may have
seen the step before the last). A finished run whose last process began (its run file's
provenance.date) after every line LOG has of it ended was not watched to its end (the monitor
was started in another folder, or not at all): it is left out of the table and named below it.
"""
import json
import os
import re
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")
PLAN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lm2_plan.tsv")


def read_plan(path=PLAN):
    """The plan's rows (results/lm2_plan.tsv, read by the rules of results/lm2_plan.sh): [(size,
    folder, training steps of a run, the plan's CPU seconds of a run in all)], in the file's
    order. A plan it cannot read ends the program with one line and exit status 2."""
    def bad(why):
        print(f"lm2_cpu_monitor.py: cannot read the plan: {why}", file=sys.stderr)
        sys.exit(2)
    name = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:=-]*$")
    count = re.compile(r"[1-9][0-9]*$")
    try:
        # (lines end at a newline only, and a byte that is not UTF-8 is read as U+FFFD, as awk
        # reads lines and refuses such a byte in a cell)
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            lines = f.read().split("\n")
    except OSError:
        bad(f"{path}: cannot read it")
    if lines and lines[-1] == "":
        lines.pop()
    head, rows, seen, used = None, [], set(), set()
    for no, line in enumerate(lines, 1):
        line = line.rstrip("\r")
        if line.startswith("#") or line == "":
            continue
        cols = line.split("\t")
        if head is None:
            head = cols
            for c in ("size", "folder", "methods", "seeds", "steps", "run_cpu_seconds"):
                if c not in head:
                    bad(f"{path}: line {no}: no column {c}")
            continue
        cell = dict(zip(head, cols))

        def get(c, cell=cell):
            return cell.get(c, "")
        for c in ("size", "folder"):
            if not name.match(get(c)):
                bad(f'{path}: line {no}: {c} "{get(c)}" is not a name')
        if get("size") == "trend":
            bad(f"{path}: line {no}: the size trend (the word for the trend over the sizes)")
        if get("size") in seen:
            bad(f"{path}: line {no}: the size {get('size')} again")
        if get("folder") in used:
            bad(f"{path}: line {no}: the folder {get('folder')} again")
        seen.add(get("size"))
        used.add(get("folder"))
        methods = [m for m in re.split(r"[ \t]+", get("methods")) if m]
        if not methods:
            bad(f"{path}: line {no}: no methods")
        for m in methods:
            if not name.match(m):
                bad(f'{path}: line {no}: method "{m}" is not a name')
        for c in ("seeds", "steps"):
            if not count.match(get(c)):
                bad(f'{path}: line {no}: {c} "{get(c)}" is not a count > 0')
        cpu_s = get("run_cpu_seconds")
        if not re.match(r"[0-9]+(\.[0-9]+)?$", cpu_s) or float(cpu_s) <= 0:
            bad(f'{path}: line {no}: run_cpu_seconds "{cpu_s}" is not a number > 0')
        rows.append((get("size"), get("folder"), int(get("steps")), float(cpu_s)))
    if not rows:
        bad(f"{path}: no size")
    return rows


def arg_after(cmd, flag):
    return cmd[cmd.index(flag) + 1].decode() if flag in cmd else None


def train_processes():
    """The running `scripts/train.lua ... --out ...` processes: (pid, command line, working
    directory) each."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            if b"scripts/train.lua" in cmd and b"--out" in cmd:
                yield pid, cmd, os.readlink(f"/proc/{pid}/cwd")  # (the kernel's resolved path)
        except OSError:
            continue  # the process ended while being read


def git_common_dir(path):
    """The repository that the checkout at path belongs to (its worktrees share it), or None."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}  # (a hook's GIT_DIR)
    try:
        out = subprocess.run(["git", "-C", path, "rev-parse", "--path-format=absolute",
                              "--git-common-dir"], capture_output=True, text=True, timeout=10,
                             env=env)
    except (OSError, subprocess.SubprocessError):
        return None
    return os.path.realpath(out.stdout.strip()) if out.returncode == 0 else None


def refuse_if_elsewhere(root):
    """Ends the monitor (status 1, one line on stderr) when the study's runs (their run files
    under results/lm2-) train in another checkout of root's git repository (a worktree, as the
    study's is) and none in root: there it would watch none of them. Tests' stand-ins and other
    clones are other repositories."""
    elsewhere = sorted({cwd for _, cmd, cwd in train_processes() if cwd != root
                        and cmd[cmd.index(b"--out") + 1].startswith(b"results/lm2-")})
    repo = git_common_dir(root) if elsewhere else None
    if not repo or scan(root):
        return
    elsewhere = [d for d in elsewhere if git_common_dir(d) == repo]
    if elsewhere:
        sys.exit(f"lm2_cpu_monitor: the study's runs train in {', '.join(elsewhere)}, none in "
                 f"{root}: start the monitor with their checkout as its working directory")


def scan(root):
    """The running training processes whose working directory is root: pid -> (run file, CPU
    seconds, last progress step)."""
    cur = {}
    for pid, cmd, cwd in train_processes():
        if cwd != root:
            continue  # another checkout's (a test's stand-in names the same run files)
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / TICK  # utime + stime
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


def utc(t=None):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def log_line(pid, out, cpu, step, end=""):
    """One line of LOG (end: when the process ended) or of LOG.now (end empty)."""
    return f"{out}\t{cpu:.1f}\t{step}\t{end}\t{pid}\n"


def carry_over(log, cur):
    """Appends to log the lines of log.now whose processes are not among cur (scan()'s running
    processes): those of a monitor that ended with them, their end the time log.now was last
    written."""
    now = log + ".now"
    try:
        stamp = utc(os.path.getmtime(now))
        with open(now) as f:
            lines = f.read().splitlines()
    except OSError:
        return  # none: the first start, or the last monitor left nothing running
    with open(log, "a") as f:
        for line in lines:
            cols = line.split("\t")
            if len(cols) != 5:
                continue
            out, cpu, step, _, pid = cols
            if pid in cur and cur[pid][0] == out:
                continue  # still running: this monitor logs it when it ends
            f.write(log_line(pid, out, float(cpu), step, stamp))


def summary(path):
    """Prints the plan against spent of the log at path (its runs' folders and seeds)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(path)))  # the checkout of results/
    plan = read_plan()
    steps_of = {folder: steps for _, folder, steps, _ in plan}
    plan_run = {folder: cpu_s for _, folder, _, cpu_s in plan}
    # the runner's steps: first (seeds 1-2 of every size), then each size's other seeds
    steps = [("first", lambda folder, seed: seed <= 2)] + [
        (size, lambda folder, seed, f=folder: folder == f) for size, folder, _, _ in plan]
    cpu, done, other, path_of, ends, last = {}, set(), {}, {}, {}, {}
    with open(path) as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            m = re.match(r"results/([^/]+)/runs/([a-z_]+)-s(\d+)\.json$", cols[0])
            if not m or m.group(1) not in steps_of:
                # another folder of the study (a record outside the tables, a secondary step's):
                # spent, not in the plan's steps; the header and anything else are skipped
                o = re.match(r"results/(lm2-[^/]+)/", cols[0])
                if o:
                    other[o.group(1)] = other.get(o.group(1), 0.0) + float(cols[1])
                continue
            run = (m.group(1), m.group(2), int(m.group(3)))
            cpu[run] = cpu.get(run, 0.0) + float(cols[1])
            path_of[run] = cols[0]
            ends.setdefault(run, []).append(cols[3])
            last[run] = max(last.get(run, 0), int(cols[2] or 0))
            if cols[2] and int(cols[2]) == steps_of[run[0]]:
                done.add(run)  # (a process that ended at the last step)
    # the others finished when their run file is there (looked up once a run); such a run whose
    # last process began (the run file's provenance.date) after every line of the log ended was
    # not watched to its end (a monitor in another folder, or none): its CPU is not all here
    unlogged = []
    for r in cpu:
        if r in done or not os.path.exists(os.path.join(root, path_of[r])):
            continue
        try:
            with open(os.path.join(root, path_of[r])) as f:
                start = (json.load(f).get("provenance") or {}).get("date") or ""
        except (OSError, ValueError, AttributeError):
            start = ""
        if start and all(end < start for end in ends[r]):
            unlogged.append(r)
        else:
            done.add(r)
    print("| step | runs finished | CPU-hours spent on them | the plan's CPU-hours for them | "
          "CPU-hours on runs not finished |")
    print("|---|---|---|---|---|")
    tot = [0, 0.0, 0.0, 0.0]
    for name, member in steps:
        runs = [r for r in sorted(cpu) if member(r[0], r[2]) and
                (name == "first" or r[2] > 2) and r not in unlogged]
        fin = [r for r in runs if r in done]
        row = [len(fin), sum(cpu[r] for r in fin) / 3600,
               sum(plan_run[r[0]] for r in fin) / 3600,
               sum(cpu[r] for r in runs if r not in done) / 3600]
        tot = [a + b for a, b in zip(tot, row)]
        print(f"| {name} | {row[0]} | {row[1]:.2f} | {row[2]:.2f} | {row[3]:.2f} |")
    print(f"| all | {tot[0]} | {tot[1]:.2f} | {tot[2]:.2f} | {tot[3]:.2f} |")
    if unlogged:
        print("\nFinished, but the log lacks their last process (left out of the table above): "
              + ", ".join(f"{path_of[r]} ({cpu[r]:.1f} CPU-s logged, last seen at step {last[r]})"
                          for r in sorted(unlogged)) + ".")
    for folder in sorted(other):
        print(f"\n{folder} (outside the steps above: a record kept outside the tables, or a "
              f"secondary step, long or medium-lr): {other[folder] / 3600:.2f} CPU-hours.")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--summary":
        summary(sys.argv[2])
        return
    LOG = sys.argv[1]
    root = os.path.realpath(os.getcwd())
    seen = scan(root)
    watched = bool(seen)  # whether it has seen a run of its own checkout yet
    refuse_if_elsewhere(root)
    carry_over(LOG, seen)
    while True:
        cur = scan(root)
        watched = watched or bool(cur)
        if not watched:
            refuse_if_elsewhere(root)
        ended = [p for p in seen if p not in cur]
        if ended:
            stamp = utc()
            with open(LOG, "a") as f:
                for p in ended:
                    f.write(log_line(p, *seen[p], stamp))
        seen = cur
        tmp = LOG + ".now.tmp"
        with open(tmp, "w") as f:
            for p, (out, cpu, step) in cur.items():
                f.write(log_line(p, out, cpu, step))
        os.replace(tmp, LOG + ".now")
        time.sleep(20)


if __name__ == "__main__":
    main()
