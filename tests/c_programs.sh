# Sourced by tests/run and tests/cross/aarch64: runs every C test program of a build and counts
# its checks, one rule for both.
#
#   run_c_programs BUILD LOGS TIMEOUT [RUNNER...]
#
# runs each executable BUILD/tests/test_* as `C_WRAP... timeout -k 10 TIMEOUT RUNNER... program`
# (C_WRAP: an array the caller may set, e.g. tests/with_blas_env; RUNNER: e.g. qemu-aarch64),
# from the current folder, C_JOBS of them at a time (default: the CPU count), its output in
# LOGS/<name>.log, and sets c_pass, c_fail and c_progs. C_SKIP: names of programs (test_x ...) that
# are built but not run, said so in the output.
# Counting: a program prints `<name>: N passed, N failed` and exits non-zero on failure; a crash, a
# timeout, a missing summary line or a non-zero exit with "0 failed" (a sanitizer report after the
# summary, say) adds one failure for that program, and so does a tests/c/test_*.c without a built
# program. Prints a line per program (its last 60 log lines when it failed) and the `c:` total.

# run_c_program LOG TIMEOUT COMMAND...: runs it with its output in LOG, exit status and seconds in
# LOG.rc and LOG.secs (xargs calls it through bash -c, so it is exported).
run_c_program() {
    local log=$1 timeout_s=$2 t0=$SECONDS
    shift 2
    timeout -k 10 "$timeout_s" "$@" >"$log" 2>&1
    echo $? >"$log.rc"
    echo $((SECONDS - t0)) >"$log.secs"
}
export -f run_c_program

run_c_programs() {
    local build=$1 logs=$2 timeout_s=$3
    shift 3
    local t name log rc line p f note secs src
    local -A seen=()
    local progs=()
    c_pass=0
    c_fail=0
    c_progs=0
    local skipped=()
    for t in "$build"/tests/test_*; do
        [ -f "$t" ] && [ -x "$t" ] || continue
        case " ${C_SKIP:-} " in
            *" $(basename "$t") "*) seen[$(basename "$t")]=1; skipped+=("$(basename "$t")"); continue ;;
        esac
        progs+=("$t")
        rm -f "$logs/$(basename "$t").log.rc" "$logs/$(basename "$t").log.secs"
    done
    # the programs side by side, C_WRAP and RUNNER before each, the slowest first so that no long
    # one starts last (under qemu-user, seconds of CPU: attention 76, linear attention 69, the rope
    # axes 62, attention_rel 42, model 26; natively checkpoints and decoding take the longest)
    local slow=" test_attention test_linear_attention test_rope_axes test_checkpoint "
    slow+="test_decode test_attention_rel test_model test_safetensors "
    {
        for n in $slow; do
            for t in "${progs[@]}"; do [ "$(basename "$t")" = "$n" ] && printf '%s\n' "$t"; done
        done
        for t in "${progs[@]}"; do
            case "$slow" in *" $(basename "$t") "*) ;; *) printf '%s\n' "$t" ;; esac
        done
    } | xargs -P "${C_JOBS:-$(nproc 2>/dev/null || echo 1)}" -I{} bash -c \
        'run_c_program "$0/$(basename "$1").log" "$2" "${@:3}" "$1"' "$logs" {} "$timeout_s" \
        "${C_WRAP[@]}" "$@"
    for t in "${progs[@]}"; do
        name=$(basename "$t")
        seen[$name]=1
        c_progs=$((c_progs + 1))
        log="$logs/$name.log"
        rc=$(cat "$log.rc" 2>/dev/null || echo 1)
        secs=$(cat "$log.secs" 2>/dev/null || echo 0)
        line=$(grep -E '^[^ ]+: [0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
        if [ -n "$line" ]; then
            p=$(printf '%s\n' "$line" | sed -E 's/^[^ ]+: ([0-9]+) passed, ([0-9]+) failed.*/\1/')
            f=$(printf '%s\n' "$line" | sed -E 's/^[^ ]+: ([0-9]+) passed, ([0-9]+) failed.*/\2/')
        else
            p=0
            f=0
        fi
        note=""
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
            note="TIMED OUT after ${timeout_s}s"
        elif [ "$rc" -gt 128 ]; then
            note="CRASHED (signal $((rc - 128)))"
        elif [ -z "$line" ]; then
            note="no summary line (exit $rc)"
        elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
            note="exit $rc after its summary (sanitizer report?)"
        fi
        [ -n "$note" ] && f=$((f + 1))
        c_pass=$((c_pass + p))
        c_fail=$((c_fail + f))
        if [ -n "$note" ] || [ "$f" -gt 0 ] || [ "$rc" -ne 0 ]; then
            echo "---- $name (exit $rc), last 60 lines of $log:"
            tail -n 60 "$log"
            echo "----"
            echo "  FAIL $name: $p passed, $f failed${note:+ -- $note} (${secs} s)"
        else
            echo "  $name: $p passed, $f failed (${secs} s)"
        fi
    done
    for src in tests/c/test_*.c; do
        name=$(basename "$src" .c)
        if [ -z "${seen[$name]:-}" ]; then
            echo "  FAIL $name: not built ($build/tests/$name missing)"
            c_fail=$((c_fail + 1))
        fi
    done
    [ ${#skipped[@]} -gt 0 ] && echo "  left out (C_SKIP): ${skipped[*]}"
    echo "c: $c_pass passed, $c_fail failed ($c_progs programs)"
}
