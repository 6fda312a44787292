#!/usr/bin/env bash
# The mechanics of `make install` and `make uninstall` (the Makefile says what goes where).
#
#   packaging/install.sh install DESTDIR MANIFEST < list
#   packaging/install.sh uninstall DESTDIR MANIFEST
#
# The list has one tab-separated line per installed path, with the final paths (no DESTDIR):
#
#   file <tab> MODE <tab> SOURCE <tab> PATH     a copy (replaced atomically: a running binary or
#                                               a loaded module is never overwritten in place)
#   link <tab> TARGET <tab> PATH                a symbolic link
#
# DESTDIR ("" for none) goes before every path; install creates it when missing (a fresh
# staging folder). Missing folders are created. MANIFEST (a final path too) records every file
# and link written (f) and every folder created under DESTDIR (d); a second install adds to it.
# `uninstall` removes exactly the files and links of the manifest, the bytecode that Python
# wrote for its .py files (FOLDER/__pycache__/NAME.*.pyc, and that __pycache__ when it is left
# empty, as Debian's py3clean does for a package's modules: importing an installed module writes
# it unless PYTHONDONTWRITEBYTECODE is set), the manifest, then the folders it records when they
# are empty, deepest first: whatever was there before, or was added since by someone else, stays.
set -euo pipefail

usage() {
    echo "usage: $0 install|uninstall DESTDIR MANIFEST" >&2
    exit 2
}
[ $# -eq 3 ] || usage
action=$1
destdir=$2
manifest=$3

# One install or uninstall at a time (make -j runs install-bin, install-lua and install-lib
# together, and all of them add to the one manifest): a lock on this script itself.
exec 9<"$0"
flock 9

declare -a dirs=() files=()
declare -A known=()

# Reads MANIFEST (when there is one) into dirs and files.
read_manifest() {
    local kind path
    [ -f "$destdir$manifest" ] || return 0
    while IFS=$'\t' read -r kind path; do
        case "$kind" in
        d) dirs+=("$path") ;;
        f) files+=("$path") ;;
        *) continue ;;
        esac
        known["$kind $path"]=1
    done <"$destdir$manifest"
}

note() { # kind path: records a path once
    [ -n "${known["$1 $2"]:-}" ] && return 0
    known["$1 $2"]=1
    if [ "$1" = d ]; then dirs+=("$2"); else files+=("$2"); fi
}

# Creates the folder (final path) and its missing parents, recording each one created.
make_dir() {
    local dir=$1 missing=() d
    while [ -n "$dir" ] && [ "$dir" != / ] && [ ! -d "$destdir$dir" ]; do
        missing=("$dir" "${missing[@]}")
        dir=$(dirname "$dir")
    done
    for d in "${missing[@]}"; do
        mkdir "$destdir$d"
        note d "$d"
    done
}

# Writes dirs and files to MANIFEST (also when an install stops half way).
write_manifest() {
    local p
    [ -d "$destdir$(dirname "$manifest")" ] || return 0
    {
        echo "# roper: what \`make install\` created (d: a folder, f: a file or link);"
        echo "# \`make uninstall\` removes them. Paths without DESTDIR."
        for p in "${dirs[@]}"; do printf 'd\t%s\n' "$p"; done
        for p in "${files[@]}"; do printf 'f\t%s\n' "$p"; done
    } >"$destdir$manifest.tmp-install.$$"
    mv -f "$destdir$manifest.tmp-install.$$" "$destdir$manifest"
}

install_all() {
    local kind a b c tmp
    # DESTDIR is usually a fresh staging folder: made here, with its parents (never recorded:
    # the manifest holds final paths only, and uninstall leaves the staging root)
    if [ -n "$destdir" ]; then mkdir -p -- "$destdir"; fi
    read_manifest
    make_dir "$(dirname "$manifest")"
    trap write_manifest EXIT
    while IFS=$'\t' read -r kind a b c; do
        case "$kind" in
        file) # a mode, b source, c path
            make_dir "$(dirname "$c")"
            tmp="$destdir$c.tmp-install.$$"
            install -m "$a" "$b" "$tmp"
            mv -f "$tmp" "$destdir$c"
            note f "$c"
            echo "  $c"
            ;;
        link) # a target, b path
            make_dir "$(dirname "$b")"
            ln -sfn "$a" "$destdir$b"
            note f "$b"
            echo "  $b -> $a"
            ;;
        "") ;;
        *)
            echo "$0: bad line in the list: $kind $a $b $c" >&2
            exit 2
            ;;
        esac
    done
}

uninstall_all() {
    local f d cache name pyc
    if [ ! -f "$destdir$manifest" ]; then
        echo "nothing to uninstall: no $destdir$manifest (roper is not installed with this PREFIX)"
        return 0
    fi
    read_manifest
    for f in "${files[@]}"; do
        if [ -e "$destdir$f" ] || [ -L "$destdir$f" ]; then
            rm -f "$destdir$f"
            echo "  removed $f"
        fi
    done
    # the bytecode of the installed modules (any interpreter's tag and optimisation level)
    for f in "${files[@]}"; do
        case "$f" in *.py) ;; *) continue ;; esac
        cache="$destdir$(dirname "$f")/__pycache__"
        name=$(basename "$f" .py)
        [ -d "$cache" ] || continue
        for pyc in "$cache/$name".*.pyc; do
            [ -e "$pyc" ] || continue
            rm -f "$pyc"
            echo "  removed ${pyc#"$destdir"}"
        done
        if rmdir "$cache" 2>/dev/null; then echo "  removed ${cache#"$destdir"}/"; fi
    done
    rm -f "$destdir$manifest"
    # deepest first: a folder sorts after its parent, so reversed it comes before it
    while IFS= read -r d; do
        [ -n "$d" ] && [ -d "$destdir$d" ] || continue
        if rmdir "$destdir$d" 2>/dev/null; then
            echo "  removed $d/"
        else
            echo "  kept $d/ (not empty)"
        fi
    done < <(printf '%s\n' "${dirs[@]}" | LC_ALL=C sort -r)
}

case "$action" in
install) install_all ;;
uninstall) uninstall_all ;;
*) usage ;;
esac
