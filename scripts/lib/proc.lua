-- The processes of the experiment scripts: a word for sh (proc.quote), this process's id
-- (proc.pid), the cores the runs of a script share (proc.ncores) and the OpenMP threads of each
-- of its jobs (proc.threads_per_job).
--
-- Library (Debian package): luv (the process id).
local uv = require "luv"

local proc = {}

-- quote(s): s as one word for sh.
function proc.quote(s)
  s = tostring(s)
  if s:match("^[%w%./_:=,+-]+$") then return s end
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- The number of cores the runs of a script share: what `nproc` says (the CPUs this process may
-- run on; OMP_NUM_THREADS or OMP_THREAD_LIMIT, when set, decide it as they do for nproc), 1 when
-- it cannot tell.
function proc.ncores()
  local p = io.popen("nproc 2>/dev/null")
  local n = p and math.tointeger(tonumber(p:read("l") or ""))
  if p then p:close() end
  return n and n >= 1 and n or 1
end

-- The OpenMP threads of each of `jobs` runs at once: the cores split evenly (at least 1), so the
-- runs do not fight over the cores.
function proc.threads_per_job(jobs, cores)
  return math.max(1, (cores or proc.ncores()) // jobs)
end

-- This process's id.
function proc.pid()
  return math.tointeger(uv.os_getpid())
end

return proc
