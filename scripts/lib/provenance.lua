-- Provenance of runs (docs/experiments.md, "What a run records"): which roper, which source,
-- when, where, on what CPU, with which OpenBLAS kernels and how many threads.
--
--   provenance.collect(rp[, time]) -> table
--     roper       rp._VERSION
--     commit      the source commit the module was built from (rp.build_info(): `git describe
--                 --always --dirty` at build time, "-dirty" for uncommitted changes), or "unknown"
--     build       which build ran it (rp.build_info()): "native (-march=native)", "portable
--                 (-march=x86-64-v3)" (the same bits on every x86-64-v3 CPU: docs/experiments.md)
--                 or "sanitize (-march=x86-64)"
--     date        time (os.time() value; default now) in UTC, ISO 8601: "2026-11-23T14:20:01Z"
--     host        the host name
--     cpu         the CPU model (/proc/cpuinfo's "model name" with its "cpu family" and "model":
--                 "AMD EPYC (family 26, model 2)"; else what libuv reports), or "unknown"
--     blas_core   the OpenBLAS kernels in use (rp.blas.core())
--     openblas    the OpenBLAS version ("0.3.21"), from rp.blas.config()
--     threads     the threads roper computes with now (rp.blas.threads())
--     wait_policy the OpenMP wait policy and who set it (rp.blas.threads()'s second result)
--   provenance.digest(results) -> { fields = { <field> = { {value =, runs =}, ... },
--                                   date = {first =, last =} }, with = n, without = n }
--     the distinct values of each field over the results' provenance (most frequent first), the
--     first and last date; results written before runs recorded provenance count in `without`
--   provenance.line(digest) -> one line for a summary.md
local uv = require "luv"

local provenance = {}

-- The fields in the order of the summary line.
local FIELDS = { "roper", "commit", "build", "host", "cpu", "openblas", "blas_core", "threads",
  "wait_policy" }
provenance.FIELDS = FIELDS

-- The first processor's "model name", with its "cpu family" and "model" numbers when
-- /proc/cpuinfo has them (names such as "AMD EPYC" cover several generations).
local function cpu_model()
  local f = io.open("/proc/cpuinfo", "r")
  if f then
    local name, family, model
    for line in f:lines() do
      if line:match("^%s*$") then break end -- the end of the first processor's block
      name = name or line:match("^model name%s*:%s*(.-)%s*$")
      family = family or line:match("^cpu family%s*:%s*(%d+)%s*$")
      model = model or line:match("^model%s*:%s*(%d+)%s*$")
    end
    f:close()
    if name and name ~= "" then
      if family and model then name = ("%s (family %s, model %s)"):format(name, family, model) end
      return name
    end
  end
  local ok, info = pcall(uv.cpu_info)
  if ok and type(info) == "table" and info[1] and type(info[1].model) == "string"
    and info[1].model ~= "" then
    return info[1].model
  end
  return "unknown"
end

function provenance.collect(rp, time)
  local ok, host = pcall(uv.os_gethostname)
  local threads, policy = rp.blas.threads()
  local info = rp.build_info()
  return {
    roper = rp._VERSION,
    commit = info.commit,
    build = ("%s (-march=%s)"):format(info.build, info.target),
    date = os.date("!%Y-%m-%dT%H:%M:%SZ", time or os.time()),
    host = ok and type(host) == "string" and host or "unknown",
    cpu = cpu_model(),
    blas_core = (rp.blas.core()),
    openblas = rp.blas.config():match("^OpenBLAS ([%w%.%-]+)") or "unknown",
    threads = threads,
    wait_policy = policy,
  }
end

function provenance.digest(results)
  local d = { fields = {}, with = 0, without = 0 }
  local counts = {}
  for _, f in ipairs(FIELDS) do counts[f] = {} end
  for _, res in ipairs(results) do
    local p = type(res) == "table" and res.provenance
    if type(p) == "table" then
      d.with = d.with + 1
      if type(p.date) == "string" then
        local dt = d.fields.date or { first = p.date, last = p.date }
        if p.date < dt.first then dt.first = p.date end
        if p.date > dt.last then dt.last = p.date end
        d.fields.date = dt
      end
      for _, f in ipairs(FIELDS) do
        if p[f] ~= nil then
          local v = p[f]
          if math.type(v) == "float" and v == math.floor(v) then v = math.tointeger(v) end
          local key = tostring(v)
          counts[f][key] = counts[f][key] or { value = v, runs = 0, first = d.with }
          counts[f][key].runs = counts[f][key].runs + 1
        end
      end
    else
      d.without = d.without + 1
    end
  end
  for _, f in ipairs(FIELDS) do
    local list = {}
    for _, e in pairs(counts[f]) do list[#list + 1] = e end
    table.sort(list, function(a, b)
      if a.runs ~= b.runs then return a.runs > b.runs end
      return a.first < b.first
    end)
    for i, e in ipairs(list) do list[i] = { value = e.value, runs = e.runs } end
    d.fields[f] = list
  end
  return d
end

-- "a" when every run agrees, else "a (3 runs), b (1 run)".
local function values(list)
  if #list == 0 then return "?" end
  if #list == 1 then return tostring(list[1].value) end
  local parts = {}
  for i, e in ipairs(list) do
    parts[i] = ("%s (%d run%s)"):format(tostring(e.value), e.runs, e.runs == 1 and "" or "s")
  end
  return table.concat(parts, ", ")
end

function provenance.line(d)
  local f = d.fields
  if d.with == 0 then
    return ("Provenance: not recorded (%d run%s written before runs recorded it)."):format(
      d.without, d.without == 1 and "" or "s")
  end
  local when = "?"
  if f.date then
    when = f.date.first == f.date.last and f.date.first or (f.date.first .. " .. " .. f.date.last)
  end
  local threads = values(f.threads)
  local one = #f.threads == 1 and f.threads[1].value == 1
  -- (runs written before runs recorded their build say nothing of it)
  local build = #f.build > 0 and ("; %s build"):format(values(f.build)) or ""
  local parts = {
    ("roper %s (commit %s%s)"):format(values(f.roper), values(f.commit), build),
    "host " .. values(f.host),
    "CPU " .. values(f.cpu),
    ("OpenBLAS %s with its %s kernels"):format(values(f.openblas), values(f.blas_core)),
    ("%s thread%s per run, OpenMP wait policy %s"):format(threads, one and "" or "s",
      values(f.wait_policy)),
    "started " .. when .. " (UTC)",
  }
  local line = "Provenance: " .. table.concat(parts, "; ")
  if d.without > 0 then
    line = line .. ("; %d run%s without provenance (written before runs recorded it)"):format(
      d.without, d.without == 1 and "" or "s")
  end
  return line .. "."
end

return provenance
