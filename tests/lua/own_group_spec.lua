-- results/own_group.sh, which every study runner (results/run_*.sh) sources first: started at a
-- positive nice value on a kernel with autogroup on, the runner goes on in a session of its own
-- whose group has that nice value (so it yields to other sessions' work), passes its arguments
-- and exit status through, and a TERM to the process the user started stops the whole new
-- session. At nice 0, or with RP_OWN_GROUP=0, nothing changes. A stand-in runner (a temporary
-- results/run_t.sh beside a copy of own_group.sh) prints its session and group. The session
-- tests are pending where the kernel has autogroup off or refuses the write.
local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
local sh_quote, run, read = h.sh_quote, h.run, h.read

local root = dir_of .. "../../"

local function autogroup_on()
  local f = io.open("/proc/sys/kernel/sched_autogroup_enabled")
  if not f then return false end
  local on = f:read("l") == "1"
  f:close()
  if not on then return false end
  -- the write itself, in a session of its own (never this one's group): a container may refuse
  -- it (then own_group.sh changes nothing); a second write within 0.1 s would be refused to a
  -- user without CAP_SYS_ADMIN, so the tests start after a pause
  local _, _, code = run("setsid -w sh -c 'echo 1 > /proc/self/autogroup' < /dev/null")
  os.execute("sleep 0.2")
  return code == 0
end

describe("results/own_group.sh", function()
  local dir = h.tmpdir()
  local runner = dir .. "/results/run_t.sh"
  os.execute("mkdir -p " .. sh_quote(dir .. "/results"))
  os.execute("cp " .. sh_quote(root .. "results/own_group.sh") .. " "
    .. sh_quote(dir .. "/results/"))
  local f = assert(io.open(runner, "w"))
  f:write([[#!/usr/bin/env bash
set -euo pipefail
. "$(dirname "$0")/own_group.sh"
cd "$(dirname "$0")/.."
printf 'args %s|%s\n' "${1-}" "${2-}"
printf 'pid %s sid %s\n' "$$" "$(ps -o sid= -p $$ | tr -d ' ')"
cat /proc/self/autogroup 2>/dev/null || true
if [ -n "${READY:-}" ]; then echo ready > "$READY"; sleep 60; fi
exit 3
]])
  f:close()
  os.execute("chmod +x " .. sh_quote(runner))
  local on = autogroup_on()
  -- (some kernels or sandboxes have no autogroup file, or one that reads empty: then the group
  -- is the empty string on both sides)
  local mine = read("/proc/self/autogroup") or ""
  -- the tests' nice values are set from the one this process runs at (a CI job may run at
  -- another than 0): AT7 starts a command at nice 7 (at base + 1 above 6), AT0 at nice 0 (nil
  -- where lowering it is not permitted)
  local base = assert(math.tointeger(tonumber(run("nice"):match("^%s*(%-?%d+)%s*$"))))
  local AT7 = ("nice -n %d "):format(base < 7 and 7 - base or 1)
  local want_nice = tostring(math.min(19, base < 7 and 7 or base + 1))
  local AT0 = ("nice -n %d "):format(-base)
  if run(AT0 .. "nice 2>/dev/null") ~= "0\n" then AT0 = nil end

  teardown(function() h.remove_tree(dir) end)

  local pit = on and it or pending
  pit("at nice 7: a session of its own, its group at nice 7, arguments and status passed",
    function()
      local out, err, code = run(AT7 .. sh_quote(runner) .. " a 'b c' < /dev/null")
      assert.are.equal(3, code, err)
      local pid, sid, group, nice =
        out:match("^args a|b c\npid (%d+) sid (%d+)\n(%S+) nice (%d+)\n$")
      assert.is_truthy(pid, out)
      assert.are.equal(pid, sid)
      assert.are.equal(want_nice, nice)
      assert.are_not.equal(mine:match("^(%S+)"), group)
      -- the caller's group keeps its nice value
      assert.are.equal(mine, read("/proc/self/autogroup"))
    end)

  pit("a TERM to the process the user started stops the whole new session", function()
    local ready = dir .. "/ready"
    local out_file = dir .. "/out"
    local pid_text = run("READY=" .. sh_quote(ready) .. " " .. AT7 .. sh_quote(runner)
      .. " > " .. sh_quote(out_file) .. " 2>&1 < /dev/null & echo $!")
    local outer = assert(pid_text:match("^(%d+)\n$"), pid_text)
    for _ = 1, 200 do
      if read(ready) then break end
      os.execute("sleep 0.05")
    end
    local sid = assert((read(out_file) or ""):match("\npid %d+ sid (%d+)\n"), read(out_file))
    local _, _, code = run("kill -TERM " .. outer)
    assert.are.equal(0, code)
    local left
    for _ = 1, 100 do
      left = run("ps -o pid= -s " .. sid .. " || true")
      if left == "" then break end
      os.execute("sleep 0.05")
    end
    assert.are.equal("", left)
  end)

  -- No ps here: a process whose session leader is outside its PID namespace (a container's
  -- `exec`) reads its session as 0. The runner is exec'd by the shell that prints its pid, so the
  -- same pid means own_group.sh started no new process (its only way to a new session), and the
  -- group is read from /proc (where that file reads empty, as in CI's sandbox, the runner prints
  -- no group line and only the pid is compared). On failure the whole output is printed in one
  -- line.
  it("at nice 0 or with RP_OWN_GROUP=0: the runner stays in the caller's session and group",
    function()
      local cmds = { "env RP_OWN_GROUP=0 " .. AT7 .. sh_quote(runner) .. " x y" }
      if AT0 then table.insert(cmds, 1, AT0 .. sh_quote(runner) .. " x y") end
      for _, cmd in ipairs(cmds) do
        local out, err, code = run("echo $$; exec " .. cmd .. " < /dev/null")
        local shown = cmd .. " -> " .. out:gsub("\n", "\\n") .. " stderr: " .. err:gsub("\n", "\\n")
        assert.are.equal(3, code, shown)
        local outer, pid, group = out:match("^(%d+)\nargs x|y\npid (%d+) sid [^\n]*\n(.*)$")
        assert.is_truthy(outer, shown)
        assert.are.equal(outer, pid, shown)
        assert.are.equal(mine:match("^(%S*)"), group:match("^(%S*)"), shown)
      end
    end)

  it("is sourced by every study runner before anything else runs", function()
    local p = assert(io.popen("ls " .. sh_quote(root .. "results") .. " | grep '^run_.*\\.sh$'"))
    local n = 0
    for name in p:lines() do
      local text = assert(read(root .. "results/" .. name))
      local first = text:match("\nset %-euo pipefail\n([^\n]*)\n")
      assert.are.equal('. "$(dirname "$0")/own_group.sh"  # nice takes effect beside other '
        .. "sessions' work", first, name)
      n = n + 1
    end
    p:close()
    assert.is_true(n >= 6, n)
  end)
end)
