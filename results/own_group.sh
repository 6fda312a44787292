# Sourced first by the study runners (results/run_*.sh): makes `nice -n 19 results/run_X.sh` yield
# the CPU to the machine's other work, as the nice value says, on a Linux kernel that groups
# processes by session (autogroup, /proc/sys/kernel/sched_autogroup_enabled = 1, the default of
# Debian's kernels).
#
# Why: with autogroup the scheduler shares the CPU between sessions first (each terminal, ssh
# login or tmux window is one) and applies a process's nice value only against processes of its
# own session (sched(7), "The autogroup feature"). A runner at nice 19 started in one terminal
# therefore takes half the cores from a build or a benchmark started in another.
#
# What: when the runner was started with a positive nice value and autogroup is on, it starts
# itself again in a session of its own (setsid(1)), whose group it gives that nice value
# (/proc/self/autogroup); the first process waits for it and answers INT, TERM and HUP with a
# TERM to the new session's process group (Ctrl-C and a closed terminal stop the runs as before;
# the runners resume from their checkpoints). It never touches the group of the session it was
# started in. Without autogroup, at nice 0, or where /proc/self/autogroup is not writable,
# nothing changes. The kernel refuses a write within 0.1 s of any other one to a user without
# CAP_SYS_ADMIN: the write is tried 10 times 0.2 s apart, and if all fail the runner says so and
# goes on in its own session at the group's nice 0. Processes placed in a CPU cgroup of their
# own are not grouped by session (sched(7)). RP_OWN_GROUP=0 in the environment turns it off.
rp_own_group_nice=$(nice)
if [ "${RP_OWN_GROUP:-}" != 0 ] && [ "$rp_own_group_nice" -gt 0 ] 2>/dev/null \
    && [ "$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null)" = 1 ] \
    && [ -w /proc/self/autogroup ] && command -v setsid >/dev/null 2>&1; then
  if [ "${RP_OWN_GROUP:-}" = inner ]; then
    rp_own_group_try=0
    until echo "$rp_own_group_nice" 2>/dev/null > /proc/self/autogroup; do
      rp_own_group_try=$((rp_own_group_try + 1))
      if [ "$rp_own_group_try" -ge 10 ]; then
        echo "$(basename "$0"): could not give this session's group nice $rp_own_group_nice" \
          "(/proc/self/autogroup); it runs at the group's nice 0" >&2
        break
      fi
      sleep 0.2
    done
    unset rp_own_group_try
  else
    # a background job of a shell without job control is no group leader: setsid(1) then makes
    # the new session in this very process, so its id is the job's pid (no fork)
    RP_OWN_GROUP=inner setsid -w "$BASH" "$0" "$@" &
    rp_own_group_child=$!
    trap 'kill -TERM -- "-$rp_own_group_child" 2>/dev/null || true' INT TERM HUP
    rp_own_group_rc=0
    wait "$rp_own_group_child" || rp_own_group_rc=$?
    while kill -0 "$rp_own_group_child" 2>/dev/null; do
      rp_own_group_rc=0
      wait "$rp_own_group_child" || rp_own_group_rc=$?
    done
    exit "$rp_own_group_rc"
  fi
fi
unset rp_own_group_nice
