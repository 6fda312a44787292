#!/usr/bin/env python3
# Added "resumed_at" and "resumed_at_source" to every run file of results/*/runs/ that had no
# resumed_at (run once on 2026-11-26, from the checkout's root: python3 results/add_resumed_at.py).
#
# A run file written before rp.experiment.run recorded resumed_at, or by a run that was not asked
# to resume, has no resumed_at; this says where such a run went on from. Every one of them was
# found to have trained from step 0 in one process, so each got "resumed_at": 0, with a sentence
# of the evidence in "resumed_at_source" (none needed "unknown"). The evidence, checked here for
# each file before anything is written:
#   - the command in its folder's summary.md saved no checkpoints (no --checkpoint-every, no
#     --keep-models), so compare.lua starts an interrupted run again from step 0;
#   - the code at the commit of the run's build (provenance.commit; for a file without provenance,
#     the code before the commit that added it, found with git log) is read with git: either it
#     could not go on from a checkpoint at all, or its rp.experiment.run writes resumed_at
#     whenever it resumes, and the file has none.
# Nothing else changes: the two keys are inserted as text before the first top-level key that
# sorts after them (where compare.lua's sorted-key JSON puts resumed_at), in the file's own
# style (": " in the files of the first JSON writer, ":" in dkjson's), so `git diff` shows two
# added lines per file. Files that already have resumed_at, *.cfg.json and *.part.ckpt.run.json
# are left alone; a run file without resumed_at in a folder not listed below stops the script.
# Run again, it finds nothing to do. Debian's python3, stdlib only; git for the code checks.
# Its run: 603 run files in 28 folders, all "resumed_at": 0 (one line per folder printed); each
# file read back and written again by its own version's JSON writer (scripts/lib/json.lua, or
# util.json before dkjson) gives the same bytes.
import glob
import json
import os
import re
import subprocess
import sys

DATE = "2026-11-26"
DRY_RUN = sys.argv[1:] == ["-n"]  # -n: check and say what would be added, write nothing

# What each commit's code says (checked below with git, per commit).
#   kind "none": no resume at all in rp.experiment.run and train.lua (no --resume)
#   kind "records": rp.experiment.run records resumed_at whenever it resumes; compare.lua passes
#     train.lua a checkpoint only with --checkpoint-every (or has no such option)
COMMITS = {
    # the code before d860b5c, the commit that added the run files without provenance
    "13e5215": "none",
    "96449f9": "none",
    "5577796": "none",
    "32eacd4": "records",
    "2e62663": "records",
    "4e9ae6b": "records",
    "7151226": "records",
    "0c8be7b": "records",
    "a22a34d": "records",
    "3e29c3e": "records",
}

# The folders whose run files lack resumed_at, with the commit(s) their provenance may name
# (None: no provenance; then the commit that added the files must be ADDED_BY).
ADDED_BY = "d860b5c"
FOLDERS = {
    "addition": {None}, "linear-substring_index": {None}, "linear-substring_prefix": {None},
    "substring_index": {None}, "substring_prefix": {None},
    "zoo-addition": {"96449f9"}, "zoo-substring_prefix": {"96449f9"},
    "len-addition": {"5577796"}, "len-substring_prefix": {"5577796"},
    "v2-index-pilot": {"32eacd4"}, "v2-index": {"32eacd4"},
    "v2-addition": {"32eacd4", "2e62663"},
    "v2-lr-index-1e-3": {"32eacd4"},
    "v2-lr-addition-1e-3": {"32eacd4", "2e62663", "4e9ae6b"},
    "v2-lr-index-3e-3": {"4e9ae6b"}, "v2-lr-index-3e-4": {"4e9ae6b"},
    "v2-lr-addition-3e-3": {"4e9ae6b"}, "v2-lr-addition-3e-4": {"4e9ae6b"},
    "v2-lr-prefix-1e-3": {"4e9ae6b"}, "v2-lr-prefix-3e-3": {"4e9ae6b"},
    "v2-lr-prefix-3e-4": {"4e9ae6b"},
    "v3-pilot-addition": {"7151226"}, "v3-pilot-index": {"7151226"},
    "v3-pilot-writeup-0.1m": {"7151226"}, "v3-pilot-writeup-0.6m": {"0c8be7b"},
    "v3-index": {"0c8be7b"}, "v3-index-0.1m": {"0c8be7b"},
    "v3-hf-scalings-pilot": {"a22a34d-dirty"},
    "grid2d": {"3e29c3e"},
}


def die(msg):
    sys.exit("add_resumed_at.py: " + msg)


def git(*args):
    return subprocess.run(("git",) + args, check=True, capture_output=True, text=True).stdout


def check_code(commit, kind):
    """The facts the sentences state about the code at commit (raises when one is false)."""
    train = git("show", commit + ":scripts/train.lua")
    compare = git("show", commit + ":scripts/compare.lua")
    runner = git("show", commit + ":scripts/lib/runner.lua")
    records = subprocess.run(["git", "grep", "-q", "res.resumed_at = ", commit, "--",
                              "bindings/lua"]).returncode == 0
    if '"--resume"' in runner:
        die(commit + ": runner.lua passes --resume")
    if kind == "none":
        if '"--resume"' in train or '"--checkpoint"' in train or records:
            die(commit + ": its code can resume")
    else:
        if not records:
            die(commit + ": rp.experiment.run does not record resumed_at")
        # compare.lua adds --checkpoint only with opts.checkpoint_every (or never)
        if "--checkpoint" in runner and "if opts.checkpoint_every then" not in runner:
            die(commit + ": runner.lua passes --checkpoint without --checkpoint-every")
    return "--checkpoint-every" in compare


# A folder's own remark, added to its sentence.
NOTES = {
    "v3-pilot-writeup-0.6m": "; run_v3.sh's pilot line got --checkpoint-every at b75b94d, after "
                             "these runs (their provenance dates 00:38-01:41Z, b75b94d 02:26Z)",
}


def sentence(commit, kind, has_ck_option):
    shown = commit
    if commit.endswith("-dirty"):
        shown = commit[:-6] + " (its build had uncommitted changes)"
    if commit == "13e5215":
        return (f"added {DATE}: resuming was impossible: the run file has no provenance and came "
                f"with {ADDED_BY}, and the code before it (13e5215) kept no checkpoints (train.lua "
                f"had no --save or --resume; compare.lua restarted an interrupted run from step 0)")
    if kind == "none":
        return (f"added {DATE}: resuming was impossible: the command saved no checkpoints, "
                f"compare.lua at {shown} restarts an interrupted run from step 0, and "
                f"rp.experiment.run there cannot go on from a checkpoint (train.lua has no "
                f"--resume)")
    why = ("compare.lua at " + shown + " has no --checkpoint-every and restarts an interrupted "
           "run from step 0") if not has_ck_option else \
        ("no --checkpoint-every: compare.lua at " + shown + " then restarts an interrupted run "
         "from step 0")
    return (f"added {DATE}: the command saved no checkpoints ({why}); rp.experiment.run at "
            f"{commit[:7]} records resumed_at whenever it resumes, and this run file has none")


TOP_KEY = re.compile(r'^  "([^"\\]+)"(: ?)', re.M)


def insert(text, source):
    """text with the two keys inserted before the first top-level key sorting after them."""
    for m in TOP_KEY.finditer(text):
        if m.group(1) > "resumed_at_source":
            sep = m.group(2)
            lines = (f'  "resumed_at"{sep}0,\n'
                     f'  "resumed_at_source"{sep}{json.dumps(source, ensure_ascii=True)},\n')
            return text[:m.start()] + lines + text[m.start():], lines
    die("no top-level key after resumed_at_source")


def main():
    if not os.path.isdir("results") or not os.path.exists(".git"):
        die("run from the checkout's root")
    code = {}
    for commit, kind in COMMITS.items():
        code[commit] = (kind, check_code(commit, kind))
    added = set(git("log", "--diff-filter=A", "--format=%h", "--",
                    *[f"results/{f}/runs" for f, c in FOLDERS.items() if c == {None}]).split())
    if added != {ADDED_BY}:
        die(f"the run files without provenance were added by {sorted(added)}, not {ADDED_BY}")

    todo = []
    for path in sorted(glob.glob("results/*/runs/*.json")):
        name = os.path.basename(path)
        if name.endswith(".cfg.json") or name.endswith(".run.json"):
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        res = json.loads(text)
        if "resumed_at" in res:
            continue
        folder = path.split("/")[1]
        if folder not in FOLDERS:
            die(f"{path} has no resumed_at and its folder has no evidence here")
        todo.append((path, folder, text, res))

    summary = {}
    with_cmd = {}
    for path, folder, text, res in todo:
        if folder not in with_cmd:
            with open(f"results/{folder}/summary.md", encoding="utf-8") as f:
                cmd = re.search(r"^Command: `(.*)`$", f.read(), re.M).group(1)
            if "--checkpoint-every" in cmd or "--keep-models" in cmd or "--init" in cmd:
                die(f"results/{folder}/summary.md: the command saved checkpoints: {cmd}")
            with_cmd[folder] = cmd
        commit = (res.get("provenance") or {}).get("commit")
        if commit not in FOLDERS[folder]:
            die(f"{path}: provenance commit {commit}, expected one of {FOLDERS[folder]}")
        if (res["config"].get("init") or "") != "":
            die(f"{path}: a fine-tuning run (init)")
        at = "13e5215" if commit is None else commit
        kind, has_ck = code[at.replace("-dirty", "")]
        source = sentence(at, kind, has_ck) + NOTES.get(folder, "")
        new, lines = insert(text, source)
        # nothing else changes: the same text with the two lines taken out, the same values
        want = dict(res, resumed_at=0, resumed_at_source=source)
        if new.replace(lines, "", 1) != text or json.loads(new) != want:
            die(path + ": the insertion changed something else")
        keys = TOP_KEY.findall(new)
        if [k for k, _ in keys] != sorted(k for k, _ in keys):
            die(path + ": top-level keys out of order")
        summary.setdefault(folder, []).append(at)
        if DRY_RUN:
            continue
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(new)
        os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        os.replace(tmp, path)
    for folder in sorted(summary):
        commits = sorted(set(summary[folder]))
        print(f"{folder}: {len(summary[folder])} run files, resumed_at 0 (code at "
              f"{', '.join(commits)}; command: {with_cmd[folder]})")
    print(f"{len(todo)} run files in {len(summary)} folders")


if __name__ == "__main__":
    main()
