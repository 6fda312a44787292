-- m:derive([overrides]) -> a new model: m's config (m:config()) with overrides merged on top
-- (model_merge below: m's keys that do nothing for the new config are dropped), built by
-- rp.model, holding a copy of every parameter of m. The two layouts must match name
-- for name and shape for shape, so overrides may change what holds no parameter (seq_len,
-- max_batch, dropout, the base and pairing of RoPE, the rotary pe modes among themselves, the
-- context-extension keys) but not the shapes. m is left as it is.
--
-- Errors read as the C methods' do: "bad argument #1 to 'derive' (...)" for m:derive(x),
-- "calling 'derive' on bad self (...)" for a released model or a self that is no model
-- (argument numbers as for the method call m:derive(x), however derive is called).
--
-- roper.derive: adds rp.Model.derive (m:derive); exports has_learned(pe) and
-- learned_limit(rows, seq_len): whether a mode has a learned position table, and the message for
-- one of `rows` rows asked for seq_len positions (shared with rp.eval.lengths and rp.experiment),
-- and model_merge(base, over): an rp.model config from another one and overrides.
local require = ...
local rp = require "roper"
local internals = require "roper.internals"
local args = require "roper.args"

local M = {}

local Model_mt, inner, user_level = internals.Model_mt, args.inner, args.user_level

-- M.model_merge(base, over) -> a new rp.model config table: base with over's keys on
-- top, less base's keys that do nothing for the result (internals.model_unused: pe shaw drops a
-- rope model's base and pairing, scaling "pi" a yarn model's yarn_beta). So the config of one
-- model is a base for a model of another mode, while a key of over that does nothing stays and
-- rp.model refuses it. base and over are not changed; a table that cannot be read is merged
-- without dropping anything (rp.model then names the problem).
function M.model_merge(base, over)
  local cfg = {}
  for k, v in pairs(base) do cfg[k] = v end
  for k, v in pairs(over or {}) do cfg[k] = v end
  local ok, unused = pcall(internals.model_unused, cfg)
  if ok then
    for k in pairs(unused) do
      if over == nil or over[k] == nil then cfg[k] = nil end
    end
  end
  return cfg
end

-- M.has_learned(pe): true when pe (a mode name, or anything) adds a learned table of
-- absolute positions (the mode table's absolute column), which holds seq_len rows.
function M.has_learned(pe)
  local row = type(pe) == "string" and internals.pe_modes[pe]
  return row and row.absolute == "learned" or false
end

function M.learned_limit(rows, seq_len)
  return ("learned absolute positions hold %d positions; seq_len %d asks for more (a learned "
    .. "table cannot be extended)"):format(rows, seq_len)
end

-- describe(v): a value for messages
local describe = args.describe

local function shape_str(t)
  return table.concat(t:shape(), "x")
end

-- errors as the C methods report them for m:derive(x), however derive was called (a tail
-- call or pcall(m.derive, m, x) leaves no name to tell a method call by): self is "bad self",
-- the overrides argument #1
local function bad(arg, msg)
  if arg == 1 then
    error(("calling 'derive' on bad self (%s)"):format(msg), user_level())
  end
  error(("bad argument #%d to 'derive' (%s)"):format(arg - 1, msg), user_level())
end

local derive

-- An error of a module function that derive calls (m released by a finalizer while derive
-- runs, for instance) is raised as derive's own: a released model as a bad self, anything
-- else as a bad overrides table. derive's own errors and the user's pass through.
function rp.Model.derive(m, overrides)
  local ok, res = pcall(derive, m, overrides)
  if ok then return res end
  if type(res) ~= "string" then error(res, 0) end
  local bare = res:gsub("^[^ ]-:%d+: ", "", 1)
  if bare:find("^bad argument #%d+ to 'derive'") or bare:find("^calling 'derive' on bad self") then
    error(bare, user_level())
  end
  local msg = bare:match("^bad argument #%d+ to '[^']*' %((.*)%)$")
    or bare:match("^calling '[^']*' on bad self %((.*)%)$")
  if not msg then error(res, 0) end
  bad(msg:find("released model", 1, true) and 1 or 2, msg)
end

function derive(m, overrides)

  if getmetatable(m) ~= Model_mt then bad(1, "roper.Model expected, got " .. describe(m)) end
  if not pcall(m.num_params, m) then bad(1, "attempt to use a released model") end
  if overrides ~= nil and type(overrides) ~= "table" then
    bad(2, "overrides table expected, got " .. describe(overrides))
  end
  -- a plain copy: no metamethod of the caller's table runs later
  local over = {}
  for k, v in next, overrides or {} do
    if type(k) ~= "string" then bad(2, "option names must be strings, got " .. describe(k)) end
    over[k] = v
  end

  local old = m:config()
  -- m:config() names the placements of a rotary pe (its own when none were set); another pe
  -- takes its own unless overrides name them; keys of m's config that do nothing for the
  -- derived model's mode are dropped
  local base = m:config()
  if over.pe ~= nil and over.rotate == nil then base.rotate = nil end
  -- Hugging Face's names replace m's keys they stand for (rp.model refuses both together):
  -- rope_scaling the scaling and its keys, rope_theta base
  if over.rope_scaling ~= nil then
    for _, r in ipairs(internals.model_keys) do
      if r.rope_scaling then base[r.name] = nil end
    end
  end
  if over.rope_theta ~= nil then base.base = nil end
  local cfg = M.model_merge(base, over)
  if M.has_learned(cfg.pe) and M.has_learned(old.pe)
      and math.type(cfg.seq_len) == "integer"
      and cfg.seq_len > old.seq_len then
    bad(2, M.learned_limit(old.seq_len, cfg.seq_len))
  end

  local ok, m2 = pcall(rp.model, cfg)
  if not ok then bad(2, inner(m2)) end
  -- m2 is released unless it is returned
  local done = false
  local _ <close> = setmetatable({}, { __close = function()
    if not done then Model_mt.__close(m2) end
  end })
  local p1, p2 = m:params(), m2:params()
  if #p1 ~= #p2 then
    bad(2, ("the derived model has %d parameter tensors, the model %d (the overrides change "
      .. "the layout)"):format(#p2, #p1))
  end
  for i, a in ipairs(p1) do
    local b = p2[i]
    if a.name ~= b.name then
      bad(2, ("parameter %d is %s in the derived model, %s in the model (the overrides change "
        .. "the layout)"):format(i, b.name, a.name))
    end
    local sa, sb = shape_str(a.tensor), shape_str(b.tensor)
    if sa ~= sb then
      bad(2, ("parameter %s is %s in the derived model, %s in the model (the overrides change "
        .. "the layout)"):format(a.name, sb, sa))
    end
  end
  for i, a in ipairs(p1) do p2[i].tensor:copy(a.tensor) end
  done = true
  return m2
end

return M
