-- rp.rope.mixed(d_rot[, opts]) -> W: RoPE-Mixed's starting frequency matrix (Heo, Park, Han and
-- Yun 2024, "Rotary position embedding for vision transformer", arXiv:2403.13298; naver-ai/rope-vit's
-- init_random_2d_freqs with rotate): W [2 x d_rot/2] as a table of two lists of doubles, for
-- axes "mixed" (the `mix` option of rp.model, rp.attention and rp.rope.*). Magnitudes
-- base^(-4j / d_rot) for j = 0 .. d_rot/4 - 1; the first d_rot/4 pairs point along the angle phi
-- and the others along phi + pi/2, each as (cos, sin) over the two axes (row, column): pair i
-- turns by p_row W[1][i] + p_col W[2][i]. rope-vit puts the cosine on its x, the column: its
-- matrix at phi is this one at pi/2 - phi with the second half of the pairs turning the other
-- way, the same distribution for random phi. The one home of that draw: rp.experiment's axes
-- "mixed" (phi from rp.rng(seed)) and scripts/pe_identity_2d.lua use it.
--
-- roper.rope_mixed: adds rp.rope.mixed; exports nothing.
local require = ...
local rp = require "roper"
local internals = require "roper.internals"
local args = require "roper.args"

local argerror, describe = args.argerror, args.describe
local check_opts, opt_number = args.check_opts, args.opt_number

function rp.rope.mixed(d_rot, opts)
  local fname = "rp.rope.mixed"
  local d = args.integral(d_rot)
  if d == nil or d < 4 or d % 4 ~= 0 or d > 2 ^ 24 then
    argerror(fname, 1, "d_rot must be a multiple of 4 from 4 to 2^24 (two halves of pairs), got "
      .. describe(d_rot))
  end
  d_rot = d
  local o = check_opts(fname, 2, opts, { "base", "phi", "seed", "rng" })
  local base = opt_number(fname, 2, o, "base", 10000.0)
  if not (base > 0) then
    argerror(fname, 2, ("option 'base' must be > 0, got %s"):format(describe(base)))
  end
  local given = (o.phi ~= nil and 1 or 0) + (o.seed ~= nil and 1 or 0) + (o.rng ~= nil and 1 or 0)
  if given > 1 then argerror(fname, 2, "give one of options 'phi', 'seed' and 'rng'") end
  local phi = opt_number(fname, 2, o, "phi", nil)
  if phi == nil then -- phi uniform in [0, 2 pi): one draw of the generator
    local g = o.rng
    if g ~= nil and getmetatable(g) ~= internals.Rng_mt then
      argerror(fname, 2, "option 'rng' must be a roper.Rng, got " .. describe(g))
    end
    g = g or rp.rng(args.opt_int(fname, 2, o, "seed", 0))
    phi = g:uniform() * 2 * math.pi
  end
  local q = d_rot // 4
  local W = { {}, {} }
  for j = 0, q - 1 do
    local mag = base ^ (-4 * j / d_rot)
    for s, dir in ipairs { phi, phi + math.pi / 2 } do
      W[1][(s - 1) * q + j + 1] = mag * math.cos(dir)
      W[2][(s - 1) * q + j + 1] = mag * math.sin(dir)
    end
  end
  return W
end
