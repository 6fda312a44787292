-- rp.help: help text for every public function and method, looked up by value
-- (rp.help(rp.zeros), rp.help(rp.Tensor.narrow), rp.help(t.narrow)), by name (rp.help("narrow"),
-- rp.help("rp.rope.rotate")) or by topic (rp.help("rope"), rp.help(rp.rope)). rp.help() lists
-- the topics.
--
-- Called by luaopen_roper as chunk(rp, internals).
local rp, internals = ...

-- One entry per public function: name (as reached from the module), signature, text.
-- Signatures use t for a tensor, g for a generator; [x] is optional.
local entries = {
  -- ---------------------------------------------------------------- constructors
  { "rp.tensor", "rp.tensor(values) -> tensor", [=[
A new float32 tensor from a number (1-D, one element), a flat or nested table of
numbers (nested tables must be rectangular, at most 8 levels), or a tensor (copied).
An empty table gives a 1-D tensor of size 0.
Example:
  > rp.tensor{{1, 2, 3}, {4, 5, 6}}     -- [2 x 3]
  > rp.tensor(3.5)                      -- [1]]=] },
  { "rp.zeros", "rp.zeros(shape) -> tensor", [=[
A new tensor filled with 0. shape is a table {2, 3} or sizes as numbers 2, 3; sizes are
integers >= 0, at most 8 of them and at most 2^40 elements ({} gives a 0-dim tensor).
Example:
  > rp.zeros(2, 3)      > rp.zeros{2, 3}]=] },
  { "rp.ones", "rp.ones(shape) -> tensor", [=[
A new tensor filled with 1; shape as for rp.zeros.
Example:
  > rp.ones{4}]=] },
  { "rp.full", "rp.full(shape, value) -> tensor", [=[
A new tensor filled with value (the last argument); shape as for rp.zeros.
Example:
  > rp.full({2, 2}, -1)     > rp.full(2, 2, 0.5)]=] },
  { "rp.range", "rp.range(a, b[, step]) -> tensor", [=[
1-D tensor a, a+step, ..., up to and including b (torch7 style). step defaults to 1 and
must be nonzero and point from a to b. a, b and step must be finite.
Example:
  > rp.range(1, 5)           -- 1 2 3 4 5
  > rp.range(5, 1, -2)       -- 5 3 1]=] },
  { "rp.linspace", "rp.linspace(a, b, n) -> tensor", [=[
1-D tensor of n (integer >= 0) evenly spaced values from a to b inclusive (n = 1 gives {a}).
Example:
  > rp.linspace(0, 1, 5)     -- 0 0.25 0.5 0.75 1]=] },
  { "rp.eye", "rp.eye(n) -> tensor", [=[
The n x n identity matrix (n an integer, 0 <= n <= 2^20).
Example:
  > rp.eye(3)]=] },
  { "rp.rand", "rp.rand(shape[, g]) -> tensor", [=[
A tensor of uniform numbers in [0, 1). shape as for rp.zeros; g is a roper.Rng (the last
argument); without it the module's default generator is used (see rp.seed).
Example:
  > rp.rand{2, 3}            > rp.rand(2, 3, rp.rng(7))]=] },
  { "rp.randn", "rp.randn(shape[, g]) -> tensor", [=[
A tensor of standard normal numbers. shape and g as for rp.rand.
Example:
  > x = rp.randn({1, 8, 4, 16}, rp.rng(1))]=] },
  { "rp.randint", "rp.randint(lo, hi, shape[, g]) -> tensor", [=[
A tensor of integers lo..hi inclusive (stored as floats). lo <= hi, both integers within
2^53. shape and g as for rp.rand.
Example:
  > rp.randint(0, 9, {2, 5})]=] },
  { "rp.is_tensor", "rp.is_tensor(x) -> boolean", [=[
true when x is a roper.Tensor (also one released by a to-be-closed variable).
Example:
  > rp.is_tensor(rp.zeros(1))   -- true]=] },
  { "rp.maxdiff", "rp.maxdiff(a, b) -> number   (also t:maxdiff(u))", [=[
The largest absolute elementwise difference of two tensors of the same shape (strides
may differ); nan when any difference is nan, 0 for empty tensors.
Example:
  > rp.maxdiff(x, rp.rope.rotate(rp.rope.rotate(x), {sign = -1}))   -- ~1e-7]=] },
  { "rp.matmul", "rp.matmul(a, b) -> tensor   (also a:matmul(b))", [=[
Matrix product (numpy rules): a [.., M, K] @ b [.., K, N] -> [.., M, N]. Batch dims
broadcast; a 1-D a is a row [1 x K] and a 1-D b a column [K x 1], and that dim is dropped
(1-D @ 1-D gives a 0-dim tensor: use :item()). Strided inputs are fine. Uses OpenBLAS sgemm.
Example:
  > rp.matmul(rp.randn(3, 4), rp.randn(4, 5))       -- [3 x 5]
  > rp.matmul(rp.randn(2, 3, 4), rp.randn(4))       -- [2 x 3]]=] },

  -- ---------------------------------------------------------------- generators
  { "rp.rng", "rp.rng([seed]) -> g", [=[
A new random generator (xoshiro256**), seeded with an integer (default 0). The same seed
gives the same stream on every platform. Methods: g:uniform, g:normal, g:int, g:seed,
g:rand, g:randn, g:randint.
Example:
  > g = rp.rng(42); x = g:randn{2, 3}]=] },
  { "rp.seed", "rp.seed(n)", [=[
Reseeds the module's default generator (used by rp.rand, rp.randn, rp.randint without a
generator argument) with the integer n. The default seed is 0.
Example:
  > rp.seed(1); a = rp.randn{3}; rp.seed(1); b = rp.randn{3}   -- a equals b]=] },
  { "rp.Rng.seed", "g:seed(n) -> g", [=[
Restarts g's stream for the integer seed n; returns g.
Example:
  > g:seed(7)]=] },
  { "rp.Rng.uniform", "g:uniform() -> number", [=[
A number uniform in [0, 1) (53 random bits).
Example:
  > g:uniform()]=] },
  { "rp.Rng.normal", "g:normal() -> number", [=[
A standard normal deviate (Marsaglia polar method).
Example:
  > g:normal()]=] },
  { "rp.Rng.int", "g:int(lo, hi) -> integer", [=[
An integer uniform in [lo, hi] inclusive, without modulo bias. lo <= hi, both within 2^53.
Example:
  > g:int(1, 6)]=] },
  { "rp.Rng.rand", "g:rand(shape) -> tensor", [=[
As rp.rand(shape, g): uniform [0, 1) numbers from g.
Example:
  > g:rand{2, 3}]=] },
  { "rp.Rng.randn", "g:randn(shape) -> tensor", [=[
As rp.randn(shape, g): standard normal numbers from g.
Example:
  > g:randn(4, 8)]=] },
  { "rp.Rng.randint", "g:randint(lo, hi, shape) -> tensor", [=[
As rp.randint(lo, hi, shape, g): integers lo..hi inclusive from g.
Example:
  > g:randint(0, 9, {10})]=] },

  -- ---------------------------------------------------------------- tensor queries
  { "rp.Tensor.shape", "t:shape() -> table", [=[
A fresh table of the sizes, outermost first ({} for a 0-dim tensor).
Example:
  > rp.zeros(2, 3):shape()     -- {2, 3}]=] },
  { "rp.Tensor.size", "t:size([dim]) -> table | integer", [=[
Without dim the same as t:shape(); with dim (1-based, -1 = last) that size.
Example:
  > rp.zeros(2, 3):size(2)     -- 3]=] },
  { "rp.Tensor.dim", "t:dim() -> integer", [=[
The number of dims.
Example:
  > rp.zeros(2, 3):dim()       -- 2]=] },
  { "rp.Tensor.numel", "t:numel() -> integer", [=[
The number of elements.
Example:
  > rp.zeros(2, 3):numel()     -- 6]=] },
  { "rp.Tensor.stride", "t:stride([dim]) -> table | integer", [=[
The strides in elements (a table), or the stride of one dim (1-based, -1 = last).
Example:
  > rp.zeros(2, 3):t():stride()    -- {1, 3}]=] },
  { "rp.Tensor.is_contiguous", "t:is_contiguous() -> boolean", [=[
true when t is laid out row-major without gaps (views from t, transpose, narrow may not be).
Example:
  > rp.zeros(2, 3):t():is_contiguous()   -- false]=] },

  -- ---------------------------------------------------------------- views
  { "rp.Tensor.view", "t:view(shape) -> tensor (view)", [=[
The same data with a new shape (a table or numbers, one size may be -1 to be inferred).
t must be contiguous (use t:reshape or t:contiguous otherwise); the element count must match.
Example:
  > rp.range(1, 6):view(2, 3)      > x:view{-1, 4}]=] },
  { "rp.Tensor.reshape", "t:reshape(shape) -> tensor", [=[
As t:view(shape), but copies (in t's index order) when t is not contiguous.
Example:
  > x:t():reshape{-1}]=] },
  { "rp.Tensor.t", "t:t() -> tensor (view)", [=[
The transpose of a 2-D tensor.
Example:
  > rp.randn(2, 3):t()      -- [3 x 2]]=] },
  { "rp.Tensor.transpose", "t:transpose(d1, d2) -> tensor (view)", [=[
Swaps dims d1 and d2 (1-based; negative counts from the end).
Example:
  > rp.zeros(2, 3, 4):transpose(1, 3)      -- [4 x 3 x 2]]=] },
  { "rp.Tensor.permute", "t:permute(d1, d2, ...) -> tensor (view)", [=[
Reorders the dims: dim i of the result is dim d_i of t. Give every dim exactly once
(as numbers or one table).
Example:
  > rp.zeros(2, 3, 4):permute(3, 1, 2)     -- [4 x 2 x 3]]=] },
  { "rp.Tensor.narrow", "t:narrow(dim, start, len) -> tensor (view)", [=[
Elements start .. start+len-1 of dim (dim and start 1-based, negative counting from the
end; len >= 0).
Example:
  > rp.range(1, 12):view(3, 4):narrow(2, 2, 2)     -- [3 x 2]]=] },
  { "rp.Tensor.select", "t:select(dim, i) -> tensor (view)", [=[
Index i of dim (1-based, negative from the end); the dim is removed (a 1-D t gives a
0-dim view).
Example:
  > rp.randn(2, 3):select(2, -1)      -- [2], the last column]=] },
  { "rp.Tensor.sub", "t:sub(a1, b1[, a2, b2, ...]) -> tensor (view)", [=[
The inclusive range a_k..b_k of dim k (negative numbers count from the end, -1 = last);
dims without a pair are kept whole.
Example:
  > x:sub(2, 3, 1, -1)      -- rows 2..3, all columns]=] },
  { "rp.Tensor.get", "t:get(i, j, ...) -> number", [=[
One element; give one 1-based index per dim (negative from the end).
Example:
  > rp.eye(3):get(2, 2)      -- 1]=] },
  { "rp.Tensor.set", "t:set(i, j, ..., value) -> t", [=[
Sets one element (one index per dim, then the value); returns t.
Example:
  > x:set(1, 3, 42)]=] },
  { "rp.Tensor.item", "t:item() -> number", [=[
The value of a one-element tensor (any number of dims).
Example:
  > rp.ones(2, 3):sum(2):sum(1, true):item()]=] },
  { "rp.Tensor.contiguous", "t:contiguous() -> tensor", [=[
t itself (shared) when contiguous, otherwise a row-major copy.
Example:
  > x:t():contiguous():is_contiguous()    -- true]=] },
  { "rp.Tensor.clone", "t:clone() -> tensor", [=[
A contiguous copy that shares nothing with t.
Example:
  > y = x:clone()]=] },
  { "rp.Tensor.copy", "t:copy(src) -> t", [=[
Copies src into t elementwise, broadcasting src to t's shape (numpy rules); returns t.
Example:
  > rp.zeros(2, 3):copy(rp.tensor{1, 2, 3})]=] },
  { "rp.Tensor.fill", "t:fill(v) -> t", [=[
Sets every element of t (and so of what t views) to the number v; returns t.
Example:
  > x:narrow(2, 1, 1):fill(0)]=] },
  { "rp.Tensor.zero", "t:zero() -> t", [=[
t:fill(0).
Example:
  > x:zero()]=] },
  { "rp.Tensor.totable", "t:totable() -> table | number", [=[
Nested Lua tables of numbers (a flat table for 1-D; a 0-dim tensor gives its number).
Example:
  > rp.eye(2):totable()      -- {{1, 0}, {0, 1}}]=] },

  -- ---------------------------------------------------------------- arithmetic
  { "rp.Tensor.add", "t:add(x) -> tensor      (also t + x, x + t)", [=[
Elementwise sum with a tensor (numpy broadcasting) or a number; a new tensor.
Shapes that do not broadcast are an error naming both.
Example:
  > rp.ones(2, 3):add(rp.tensor{1, 2, 3})      > x + 1]=] },
  { "rp.Tensor.mul", "t:mul(x) -> tensor      (also t * x, x * t)", [=[
Elementwise product (not a matrix product: see rp.matmul) with a tensor or a number.
Example:
  > x:mul(2)      > x * y]=] },
  { "rp.Tensor.div", "t:div(x) -> tensor      (also t / x, x / t)", [=[
Elementwise quotient with a tensor or a number.
Example:
  > x:div(x:norm())]=] },
  { "rp.Tensor.pow", "t:pow(x) -> tensor      (also t ^ x, x ^ t)", [=[
Elementwise power with a tensor or a number. The operator - (a - b, -a) has no method name
(t:sub is the slicing view): use t:add(-x) or t:neg().
Example:
  > x:pow(2)      > 2 ^ x]=] },
  { "rp.Tensor.exp", "t:exp() -> tensor",
    "Elementwise e^x.\nExample:\n  > x:exp()" },
  { "rp.Tensor.log", "t:log() -> tensor",
    "Elementwise natural logarithm.\nExample:\n  > x:abs():log()" },
  { "rp.Tensor.abs", "t:abs() -> tensor",
    "Elementwise absolute value.\nExample:\n  > x:abs()" },
  { "rp.Tensor.sqrt", "t:sqrt() -> tensor",
    "Elementwise square root.\nExample:\n  > x:abs():sqrt()" },
  { "rp.Tensor.tanh", "t:tanh() -> tensor",
    "Elementwise hyperbolic tangent.\nExample:\n  > x:tanh()" },
  { "rp.Tensor.relu", "t:relu() -> tensor",
    "Elementwise max(x, 0).\nExample:\n  > x:relu()" },
  { "rp.Tensor.sin", "t:sin() -> tensor",
    "Elementwise sine.\nExample:\n  > rp.range(0, 3):sin()" },
  { "rp.Tensor.cos", "t:cos() -> tensor",
    "Elementwise cosine.\nExample:\n  > rp.range(0, 3):cos()" },
  { "rp.Tensor.sigmoid", "t:sigmoid() -> tensor",
    "Elementwise 1 / (1 + e^-x).\nExample:\n  > x:sigmoid()" },
  { "rp.Tensor.neg", "t:neg() -> tensor      (also -t)",
    "Elementwise -x.\nExample:\n  > x:neg()" },

  -- ---------------------------------------------------------------- reductions
  { "rp.Tensor.sum", "t:sum([dim[, keepdim]]) -> number | tensor", [=[
Without dim: the sum of all elements as a Lua number (accumulated in double). With dim
(1-based, negative from the end): a tensor with that dim removed, or kept with size 1
when keepdim is true.
Example:
  > rp.ones(2, 3):sum()          -- 6
  > rp.ones(2, 3):sum(2)         -- [2]
  > rp.ones(2, 3):sum(2, true)   -- [2 x 1]]=] },
  { "rp.Tensor.mean", "t:mean([dim[, keepdim]]) -> number | tensor", [=[
The mean, as t:sum (nan for an empty tensor).
Example:
  > x:mean()      > x:mean(1)]=] },
  { "rp.Tensor.max", "t:max([dim[, keepdim]]) -> number | tensor", [=[
The maximum, as t:sum (values only; see t:argmax for positions). An error for an empty
tensor or dim.
Example:
  > x:max()       > x:max(2)]=] },
  { "rp.Tensor.min", "t:min([dim[, keepdim]]) -> number | tensor", [=[
The minimum, as t:max.
Example:
  > x:min()       > x:min(-1, true)]=] },
  { "rp.Tensor.argmax", "t:argmax(dim[, keepdim]) -> tensor", [=[
1-based positions (as floats) of the maximum along dim (the first one on ties); the dim is
removed unless keepdim.
Example:
  > rp.tensor{{1, 5, 2}, {7, 0, 3}}:argmax(2)     -- {2, 1}]=] },
  { "rp.Tensor.softmax", "t:softmax(dim) -> tensor", [=[
Softmax along dim (max-subtracted, double accumulation).
Example:
  > rp.randn(2, 5):softmax(2):sum(2)     -- ones]=] },
  { "rp.Tensor.norm", "t:norm() -> number", [=[
The Euclidean norm over all elements.
Example:
  > rp.tensor{3, 4}:norm()     -- 5]=] },

  -- ---------------------------------------------------------------- RoPE
  { "rp.rope.theta", "rp.rope.theta(d_rot[, base]) -> tensor [d_rot/2]", [=[
The rotation frequencies theta_i = base^(-2i/d_rot), i = 0 .. d_rot/2-1. d_rot is an even
integer >= 2; base (default 10000) a finite number > 0.
Example:
  > rp.rope.theta(8)       -- 1, 0.1, 0.01, 0.001]=] },
  { "rp.rope.angles", "rp.rope.angles(positions, d_rot[, {base=, scale=}]) -> cos, sin", [=[
The cos and sin tables [n x d_rot/2] of the angles scale * pos * theta_i. positions is a
count n (positions 0..n-1), or a table / 1-D tensor of integer positions (0-based values).
base defaults to 10000, scale to 1.
Example:
  > c, s = rp.rope.angles(16, 8)            -- [16 x 4] each
  > c, s = rp.rope.angles({0, 5, 9}, 8)     -- [3 x 4]]=] },
  { "rp.rope.rotate", "rp.rope.rotate(x[, opts]) -> tensor", [=[
x with the first d_rot features of its last dim (D) rotated by position (RoPE); the other
features pass through. x keeps its shape. opts (all optional):
  base       10000
  pairing    "half" (feature i with i + d_rot/2, the default) or "interleaved" (2i, 2i+1)
  sign       1, or -1 to rotate backwards (undoes a rotation)
  fraction   1: d_rot = floor(fraction * D), must come out even and >= 2
  d_rot      even, 2..D (overrides fraction)
  dim        the dim (1-based, negative from the end) that holds positions; default
             2 for [B x T x H x D], 1 for [T x H x D] and [T x D]; a 1-D x is one vector
  offset     0: positions are offset + t (t = 0, 1, ... along dim)
  positions  a table or 1-D tensor of integer positions, one per element of dim (a single
             number for a 1-D x); not together with offset
  scale      1: multiplies every angle
Example:
  > x = rp.randn{1, 8, 4, 16}                        -- [B x T x H x D]
  > y = rp.rope.rotate(x, {fraction = 0.5})
  > rp.maxdiff(x, rp.rope.rotate(y, {fraction = 0.5, sign = -1}))   -- ~1e-7]=] },
  { "rp.rope.sinusoidal", "rp.rope.sinusoidal(T, d[, {base=, offset=}]) -> tensor [T x d]", [=[
Vaswani et al.'s absolute encodings: [t][2i+1] = sin(p / base^(2i/d)),
[t][2i+2] = cos(p / base^(2i/d)) (1-based columns) with p = offset + t - 1. d even >= 2,
base 10000, offset 0.
Example:
  > pe = rp.rope.sinusoidal(16, 32)]=] },

  -- ---------------------------------------------------------------- attention
  { "rp.attention", "rp.attention(q, k, v[, opts]) -> out, att", [=[
Multi-head scaled dot-product attention.
  q [B x T x H x D], k [B x S x H x D], v [B x S x H x Dv] (all sizes >= 1)
  out [B x T x H x Dv], att [B x H x T x S] (the softmax weights)
Keys sit at positions 0..S-1, queries at q_offset .. q_offset+T-1.
opts (all optional):
  pe           "none" (default), "sinusoidal", "learned" (these two act like none here),
               "rope" (q, k rotated), "roper" (v rotated too, the output rotated back:
               o_n = sum_i a_ni R((i-n) theta) v_i), "roper_legacy" (v rotated twice:
               R((2i-n) theta))
  causal       true: query n sees keys i <= n
  scale        1/sqrt(D)
  base         10000;  pairing  "half" | "interleaved"
  fraction_qk  1: d_rot of q, k = floor(fraction_qk * D), even >= 2 (rope modes)
  fraction_v   1: d_rot of v = floor(fraction_v * Dv), even >= 2 (roper modes)
  q_offset     S - T (queries are the last T positions); an integer >= 0
Example:
  > q, k, v = rp.randn{2, 8, 4, 16}, rp.randn{2, 8, 4, 16}, rp.randn{2, 8, 4, 16}
  > out, att = rp.attention(q, k, v, {pe = "roper"})]=] },

  -- ---------------------------------------------------------------- BLAS
  { "rp.blas.core", "rp.blas.core() -> string", [=[
The OpenBLAS kernel set in use ("Haswell", "SkylakeX", "Zen", "Prescott", ...).
Example:
  > rp.blas.core()]=] },
  { "rp.blas.config", "rp.blas.config() -> string", [=[
OpenBLAS's build configuration string (version, DYNAMIC_ARCH, MAX_THREADS, ...).
Example:
  > rp.blas.config()]=] },
  { "rp.blas.threads", "rp.blas.threads() -> integer", [=[
The number of threads OpenBLAS uses.
Example:
  > rp.blas.threads()]=] },
  { "rp.blas.wanted_coretype", "rp.blas.wanted_coretype() -> string | nil", [=[
nil, or the OPENBLAS_CORETYPE value this CPU needs because OpenBLAS fell back to its slow
Prescott kernels (set it before the process starts; the roper REPL does this itself).
Example:
  > rp.blas.wanted_coretype()]=] },
  { "rp.set_num_threads", "rp.set_num_threads(n)", [=[
Sets the OpenBLAS and OpenMP thread count (an integer, 1..1024).
Example:
  > rp.set_num_threads(1)]=] },

  -- ---------------------------------------------------------------- models
  { "rp.linear_attention", "rp.linear_attention(q, k, v[, opts]) -> out, w, den", [=[
Causal linear attention with phi = elu + 1 over one sequence's positions: q, k [B,T,H,D],
v [B,T,H,Dv] -> out [B,T,H,Dv], and the numerator weights w [B,H,T,T] (zeros above the
diagonal) and denominators den [B,H,T] from the explicit O(T^2) formulas:
out_n = sum_m w_nm v_m / den_n (roper: v_m turned by R((m-n)theta)). opts: pe "none" |
"sinusoidal" | "learned" | "rope" | "roper"; linear_rope "after" (RoFormer eq. 19: phi(q),
phi(k) rotated in the numerator only; the default) | "before" (q, k rotated before phi);
eps 1e-6 (> 0, added to den); base, pairing, fraction_qk, fraction_v; q_offset 0.
Example:
  > q = rp.randn{1, 8, 2, 16}
  > out, w, den = rp.linear_attention(q, q, q, {pe = "rope"})]=] },
  { "rp.model", "rp.model(cfg) -> model", [=[
A new transformer (roper.Model): token embedding, layers of attention and feed-forward,
untied output layer; parameters initialised from cfg.seed. cfg (unknown keys are errors):
  vocab        required: the vocabulary size (token ids are 0 .. vocab-1)
  d_model 128, heads 4 (must divide d_model), layers 3, d_ff 512
  seq_len 512 (longest sequence), max_batch 16 (most sequences per call)
  norm         "pre" (default: LN inside the residual branches, final LN) | "post"
  activation   "relu" (default) | "gelu";  dropout 0 (0 <= p < 1, training only)
  pe           "rope" (default) | "roper" | "roper_legacy" | "none" | "sinusoidal" | "learned"
  fraction_qk 1, fraction_v 1: rotated share of d_k = d_model/heads (d_rot even >= 2)
  base 10000, pairing "half" | "interleaved", seed 0 (any integer)
  attention    "softmax" (default) | "linear": causal linear attention, phi = elu + 1, with
               pe none, sinusoidal, learned, rope or roper (not roper_legacy)
  linear_rope  "after" (default: RoPE on phi(q), phi(k) in the numerator only, RoFormer
               eq. 19) | "before" (q, k rotated before phi, numerator and denominator)
Memory for (max_batch, seq_len) is allocated once, here; a model larger than the memory
left on the machine is refused (see rp.model_memory).
Example:
  > m = rp.model{vocab = 65, pe = "roper", max_batch = 4}
  > m     -- roper.Model: 0.6M parameters (d_model 128, 4 heads, 3 layers, ...)]=] },
  { "rp.model_memory", "rp.model_memory(cfg) -> table", [=[
What rp.model(cfg) would allocate, in bytes, without allocating it: {model = bytes,
optimiser = bytes (Adam's moments), params = the parameter count, available = the memory
left now (free memory and swap, the cgroup limit, ulimit -v; nil when unknown)}. cfg is
checked as rp.model checks it.
Example:
  > mem = rp.model_memory{vocab = 65, seq_len = 4096, max_batch = 32}
  > print(mem.model / 2^30, mem.available / 2^30)     -- GiB]=] },
  { "rp.load", "rp.load(path) -> model[, opt] | nil, message", [=[
Loads a checkpoint written by m:save: a new model, and the optimiser (bound to it) when one
was saved. A missing, unreadable, truncated or corrupted file returns nil and
"path: reason".
Example:
  > m, opt = rp.load("run.ck")
  > m = assert(rp.load("run.ck"))]=] },
  { "rp.Model.config", "m:config() -> table", [=[
The model's configuration with the keys of rp.model (rp.model(m:config()) builds the same
model, initialisation included).
Example:
  > m:config().d_model      -- 128]=] },
  { "rp.Model.num_params", "m:num_params() -> integer", [=[
The number of floats in the parameters.
Example:
  > m:num_params()]=] },
  { "rp.Model.params", "m:params() -> table", [=[
The parameters as tensor views, in layout order: t[i] = {name = ..., tensor = ...}, and
also t[name] = tensor. Names: embed.weight, pos.weight (pe "learned"),
layers.<l>.{norm1, attn.qkv, attn.out, norm2, ff.w1, ff.w2}.{weight, bias} (l from 0),
norm_f.weight/bias (pre-norm), head.weight, head.bias. Writing a view changes the model;
views stay valid after the model is collected or closed.
Example:
  > p = m:params();  p["head.bias"]:zero()
  > for _, e in ipairs(m:params()) do print(e.name, e.tensor:numel()) end]=] },
  { "rp.Model.grads", "m:grads() -> table", [=[
The gradients as tensor views, laid out as m:params(). m:train_step fills them (clipped in
place when the optimiser clips); opt:step reads them.
Example:
  > g = m:grads();  print(g["embed.weight"]:norm())]=] },
  { "rp.Model.forward", "m:forward(tokens) -> tensor [B x T x V]", [=[
The logits (a new tensor) in eval mode (no dropout). tokens: a table of ids (one sequence),
a table of equally long tables (a batch), or a [T] / [B x T] tensor of integer values; ids
are 0-based values in 0..vocab-1; 1 <= B <= max_batch, 1 <= T <= seq_len. A flat input
gives B = 1. Errors name the offending position ("token at [2][5] ...").
Example:
  > m:forward{3, 1, 4, 1, 5}:shape()        -- {1, 5, vocab}]=] },
  { "rp.Model.loss", "m:loss(tokens, targets[, mask]) -> number", [=[
The mean cross-entropy over the scored positions, in eval mode. targets have the shape of
tokens, each a token id or -1 (not scored); mask (optional, same shape) holds 0/1 or
booleans, 0/false = not scored. nan when nothing is scored.
Example:
  > m:loss({{1, 2, 3}}, {{2, 3, -1}})]=] },
  { "rp.Model.train_step", "m:train_step(tokens, targets, mask_or_nil, opt[, opts]) -> loss, grad_norm, updated", [=[
One training step: forward in train mode (dropout on), zero the gradients, backward, then
opt's update (gradient clipping inside). Returns the loss of that forward, the gradient
norm before clipping and true. opt must be an optimiser of this model; at least one
position must be scored. A loss or gradient norm that is nan or inf updates nothing
(weights, moments, step count) and raises; with opts {nonfinite = "skip"} the step returns
loss, grad_norm, false instead.
Example:
  > opt = rp.optim.adam(m, {lr = 1e-3})
  > for i = 1, 100 do loss = m:train_step(x, y, nil, opt) end]=] },
  { "rp.Model.generate", "m:generate(prompt, n[, opts]) -> table", [=[
Up to n new token ids (a Lua table) after prompt (a table or 1-D tensor of >= 1 ids), with
the KV cache. When the window (seq_len) is full the last seq_len/2 tokens are re-encoded from
position 0. opts:
  temperature  0 (greedy: argmax, first on ties); > 0 samples softmax(logits / temperature)
  top_k        0 (all tokens); k > 0 samples among the k largest logits
  seed         an integer: sample with a fresh generator seeded so (reproducible)
  rng          a roper.Rng to sample from instead (it advances); not with seed. Without
               either, sampling uses the default generator (rp.seed)
  stop         a token id: stop right after emitting it (it is included)
Example:
  > m:generate({0}, 20)                                   -- greedy
  > m:generate({0}, 20, {temperature = 0.8, top_k = 5, seed = 1})]=] },
  { "rp.Model.attention", "m:attention(layer, tokens) -> tensor [B x H x T x T]", [=[
The softmax attention weights of layer (1-based) for tokens (as m:forward, eval mode):
row t holds query t's weights over keys 1..t (causal; the rest are 0). For linear attention
the normalised weights w_nm / den_n, recomputed naively (O(T^2)); they can be negative
under rope (after phi) and need not sum to 1.
Example:
  > att = m:attention(1, {0, 1, 2, 3})
  > att[{1, 1, 4}]       -- weights of query 4 in head 1]=] },
  { "rp.Model.linear_stats", "m:linear_stats(tokens) -> min_weight, min_den", [=[
Linear attention only: after an eval forward over tokens, the smallest normalised weight
w_nm / den_n and the smallest denominator (its epsilon, 1e-6, included) over every layer,
sequence, head and position. A negative min_weight means the rotated numerator made the
output leave the convex hull of the values.
Example:
  > m = rp.model{vocab = 8, attention = "linear", pe = "rope", seq_len = 64}
  > print(m:linear_stats{0, 1, 2, 3, 4, 5})]=] },
  { "rp.Model.activations", "m:activations(tokens) -> table", [=[
The residual stream for tokens (eval mode): t[0] the embedding output (with the position
table for pe "sinusoidal" / "learned"), t[l] the stream after layer l (l = 1 .. layers), each
a new [B x T x d_model] tensor; #t is the layer count.
Example:
  > a = m:activations{0, 1, 2};  print(#a, a[0]:shape()[3])]=] },
  { "rp.Model.save", "m:save(path[, opt[, opts]]) -> true | nil, message", [=[
Writes a checkpoint: the config, the parameters, the dropout generator and, when opt (an
optimiser of this model) is given, its config, moments and step count. The file is written
atomically (temporary file, fsync, rename). A file error returns nil and "path: reason";
wrong argument types raise. Weights holding nan or inf raise unless opts is
{allow_nonfinite = true}.
Example:
  > assert(m:save("run.ck", opt))]=] },

  -- ---------------------------------------------------------------- optimisers
  { "rp.optim.adam", "rp.optim.adam(m[, opts]) -> opt", [=[
An Adam optimiser (roper.Optim) over model m's parameters (labml's update: eps added to
sqrt(v) before bias correction). weight_decay is L2 (added to the gradient). opts:
  lr 2.5e-4, betas {0.9, 0.999}, eps 1e-8, weight_decay 0
  clip 1: clip the global gradient norm to this (0 = off)
  schedule     "constant" (default) | "cosine" (linear warmup to lr, cosine to min_lr at
               total_steps) | "noam" (lr * d_model^-0.5 * min(t^-0.5, t * warmup^-1.5))
  warmup 2000, total_steps 0 (>= 1 for cosine), min_lr 0
  kind         may be given ("adam" here), as opt:config() reports it
The optimiser keeps m alive.
Example:
  > opt = rp.optim.adam(m, {lr = 1e-3, schedule = "cosine", warmup = 100, total_steps = 5000})]=] },
  { "rp.optim.adamw", "rp.optim.adamw(m[, opts]) -> opt", [=[
As rp.optim.adam, with decoupled weight decay (AdamW: p -= lr_t * weight_decay * p before
the Adam update). Same options and defaults (weight_decay 0).
Example:
  > opt = rp.optim.adamw(m, {lr = 3e-4, weight_decay = 0.1})]=] },
  { "rp.Optim.step", "opt:step([opts]) -> grad_norm, updated", [=[
One update of the model from its current gradients (m:grads()), which are clipped in place
when clip > 0. Returns the gradient norm before clipping and true. Gradients holding nan or
inf update nothing and raise; with opts {nonfinite = "skip"} it returns the norm and false.
(m:train_step does the same update.)
Example:
  > opt:step()]=] },
  { "rp.Optim.lr", "opt:lr() -> number", [=[
The learning rate the next step will use (under the schedule).
Example:
  > opt:lr()]=] },
  { "rp.Optim.steps", "opt:steps() -> integer", [=[
The number of steps taken.
Example:
  > opt:steps()]=] },
  { "rp.Optim.config", "opt:config() -> table", [=[
The options (lr, betas, eps, weight_decay, clip, schedule, warmup, total_steps, min_lr) and
kind = "adam" | "adamw"; rp.optim[c.kind](m, c) makes a fresh optimiser with config c.
Example:
  > opt:config().lr]=] },

  -- ---------------------------------------------------------------- tasks
  { "rp.tasks.addition", "rp.tasks.addition([opts]) -> task", [=[
Multi-digit addition with the carry steps written out (docs/lua_api.md "Tasks"). opts:
  format      "writeup" (default): ?d=A+B; <steps joined by " and "> and d==S#
              "labml": ?x=A+B; <steps joined by " "> x==S\n
  max_digits  operand digits 1..18 (8 for writeup, 7 for labml)
  quirk       labml's digit quirk (a digit may be 10 and carry): default true for labml
  seq_len     length T of the packed training sequences (>= 8, default 256)
Example:
  > task = rp.tasks.addition{max_digits = 4, seq_len = 128}]=] },
  { "rp.tasks.substring_index", "rp.tasks.substring_index([opts]) -> task", [=[
Substring by index: ?s='<str_len lowercase letters>'; s[i:]=='<suffix>'# with i uniform
0 .. str_len-1. opts: str_len (13), seq_len (256).
Example:
  > task = rp.tasks.substring_index{seq_len = 128}]=] },
  { "rp.tasks.substring_prefix", "rp.tasks.substring_prefix([opts]) -> task", [=[
Substring by prefix (labml copy_repeat): random acgt filler, '>', then a copy of
substr_len characters of the text so far; only characters 2..substr_len of each copy are
scored (the other targets are -1). opts: substr_len (16), rnd_len (12: filler lengths
1..rnd_len-1), seq_len (256). No problems: evaluate with rp.eval.loss.
Example:
  > task = rp.tasks.substring_prefix{seq_len = 512}]=] },
  { "rp.tasks.text", "rp.tasks.text(opts) -> task | nil, message", [=[
Character-level language modelling on a UTF-8 file (or every regular file of a folder):
the vocabulary is the sorted set of its characters; the last valid_fraction (0.1) of the
text is the validation split. opts: path (required), valid_fraction, seq_len (256),
max_bytes (256 MiB: the largest corpus, all files of a folder together). File problems
return nil, "path: reason" at once: a missing or unreadable path, a FIFO, device or socket
(never opened in a way that blocks), a folder without regular files, a corpus over
max_bytes, an empty or non-UTF-8 file. Bad options raise.
Example:
  > task = assert(rp.tasks.text{path = "input.txt", seq_len = 256})]=] },
  { "rp.Task.vocab", "task:vocab() -> table", [=[
The characters of the vocabulary as strings, t[id + 1] = the character of token id.
Example:
  > task:vocab()[1]    -- "0" for addition]=] },
  { "rp.Task.vocab_size", "task:vocab_size() -> integer", [=[
The number of tokens (use it as the model's vocab).
Example:
  > m = rp.model{vocab = task:vocab_size(), seq_len = 256}]=] },
  { "rp.Task.encode", "task:encode(text) -> table of ids", [=[
The token ids (0-based) of the characters of text; a character outside the vocabulary
raises, naming it and its byte offset.
Example:
  > task:encode("?d=1+2;")]=] },
  { "rp.Task.decode", "task:decode(ids) -> string", [=[
The text of token ids given as a table or a 1-D tensor (each 0 .. vocab_size-1).
Example:
  > x, y = task:batch(2, g); print(task:decode(x[1]))]=] },
  { "rp.Task.batch", "task:batch(B[, g[, split]]) -> inputs, targets", [=[
B fresh training sequences as [B x seq_len] tensors of ids: targets are the inputs shifted
by one, -1 where a position is not scored (ready for m:train_step(x, y, nil, opt)).
Algorithmic tasks start every sequence at a problem boundary. g is a roper.Rng (default:
the module's generator); split "train" (default) or "valid" (text tasks).
Example:
  > x, y = task:batch(16, rp.rng(1)); loss = m:train_step(x, y, nil, opt)]=] },
  { "rp.Task.problem", "task:problem([g[, n_digits]]) -> question, answer", [=[
A fresh evaluation problem (addition and substring_index): the question to prompt with
("?d=A+B;", "?s='...'; s[i:]==") and the exact answer ("S", "'suffix'"). n_digits (1..18,
addition only) fixes both operands' digit count.
Example:
  > q, a = task:problem(rp.rng(1), 9)]=] },
  { "rp.Task.check", "task:check(question, continuation) -> boolean", [=[
Whether a generated continuation answers question exactly: it is cut at the terminator
('#', or '\n' for labml) and the answer (after the last "d==" / "x==" for addition; the
whole text for substring_index) compared with the true one.
Example:
  > task:check("?d=1+2;", " 1e0+2e0+0e0==3e0 and d==3#")   -- true]=] },
  { "rp.Task.split_sizes", "task:split_sizes() -> train, valid", [=[
Text tasks: the characters of the training split and of the validation split (0 without
one). A batch needs seq_len + 1 characters of its split, so a corpus smaller than that
cannot be trained or evaluated on (rp.experiment checks this before a run starts).
Example:
  > t = rp.tasks.text{path = "corpus.txt"};  print(t:split_sizes())]=] },
  { "rp.Task.config", "task:config() -> table", [=[
kind ("addition", "substring_index", "substring_prefix", "text"), seq_len and the options
of the constructor: rp.tasks[c.kind](c) makes the same task.
Example:
  > task:config().max_digits]=] },

  -- ---------------------------------------------------------------- evaluation
  { "rp.eval.accuracy", "rp.eval.accuracy(m, task[, opts]) -> accuracy, correct, records", [=[
Exact-answer accuracy of model m on fresh problems of task (addition, substring_index):
each question is encoded, m:generate continues it until the terminator ('#' or '\n') or
max_new tokens, the output is decoded and task:check decides. opts:
  problems 128, decode "greedy" (default) | "sample" (temperature 1, top_k 0 = all),
  seed 0 (problems from rp.rng(seed), sampling from rp.rng(seed + 1)),
  max_new (default: enough for the longest answer), n_digits (addition: operand digits)
records[i] = {question =, answer =, output =, ok =}.
Example:
  > acc = rp.eval.accuracy(m, task, {problems = 128, decode = "sample"})]=] },
  { "rp.eval.length_generalisation", "rp.eval.length_generalisation(m, task, opts) -> accs, records", [=[
rp.eval.accuracy for each operand digit count of opts.digits (an addition task):
accs[d] = accuracy with d-digit operands, records[d] its records. Other opts as for
rp.eval.accuracy (problems, decode, temperature, top_k, seed, max_new).
Example:
  > accs = rp.eval.length_generalisation(m, task, {digits = {8, 9, 10}, problems = 64})]=] },
  { "rp.eval.loss", "rp.eval.loss(m, task[, opts]) -> number", [=[
Mean of m:loss (eval mode) over fresh batches of task. opts: batches 8, batch_size
(min(8, max_batch)), split ("valid" for text tasks with a validation split, else
"train"), seed 0.
Example:
  > print(rp.eval.loss(m, task, {batches = 16}))]=] },
  -- ---------------------------------------------------------------- experiments
  { "rp.experiment.keys", "rp.experiment.keys() -> {{name =, default =, kind =, help =}, ...}", [=[
The keys of an experiment config in order, with their defaults, kinds (a list of allowed
strings, "int", "number", "bool" or "string"), one line of help and task (the only task the
key applies to, or nil). scripts/train.lua,
compare.lua and sweep.lua make their command-line options from this list.
Example:
  > for _, k in ipairs(rp.experiment.keys()) do print(k.name, k.default) end]=] },
  { "rp.experiment.config", "rp.experiment.config([overrides]) -> cfg", [=[
A full experiment config: the defaults with overrides applied (checked; strings such as
"0.5" from a command line are converted). Resolves max_digits 0 (8 writeup, 7 labml), quirk
"auto" (on for labml), d_ff 0 (4 * d_model) and log_every 0 (steps / 100). Unknown keys raise.
Example:
  > cfg = rp.experiment.config{pe = "roper", steps = 500}]=] },
  { "rp.experiment.check", "rp.experiment.check([overrides]) -> cfg, memory", [=[
rp.experiment.config, and everything else that can be known before training: the task and
its corpus (built; both splits of a text corpus must hold seq_len + 1 characters), the model
config (heads dividing d_model, even rotated widths), and the memory of the model and its
optimiser against the memory left (memory: rp.model_memory's table). Raises one message
naming the option and the value; rp.experiment.run calls it first, the scripts for every run
before the first one starts.
Example:
  > rp.experiment.check{heads = 3}   -- bad argument #1 to 'rp.experiment.check' (model: ...)]=] },
  { "rp.experiment.run", "rp.experiment.run(cfg[, progress]) -> result", [=[
Trains a fresh model on cfg's task (cfg as for rp.experiment.config; a partial table works)
and evaluates it. progress(step, steps, loss) is called after every step. The result holds
config, params, metric ("correct" or "loss"), value (correct answers with cfg.decode, or the
evaluation loss; nil when training diverged), correct, correct_greedy, accuracy, eval_loss,
final_train_loss (mean of the last 5 curve points), curve ({step, tokens, loss, lr} per
log_every steps), by_digits (addition with eval_digits), examples, diverged (a loss that
was not finite: training stopped), exploded and exploded_at (a loss above twice its best and
above ln(vocab) while finite), seconds_train, seconds_eval, tokens_per_s, threads. Everything
rp.experiment.check finds raises before anything is built.
Example:
  > r = rp.experiment.run{task = "substring_index", pe = "roper", steps = 300}
  > print(r.correct, r.eval_loss)]=] },
  { "rp.experiment.applies", "rp.experiment.applies(key, task) -> boolean", [=[
true when config key matters for task: the task-specific keys (format, max_digits, quirk,
eval_digits: addition; str_len: substring_index; substr_len, rnd_len: substring_prefix;
path, valid_fraction: text) do not change runs of other tasks, and resuming ignores them.
Example:
  > rp.experiment.applies("path", "addition")   -- false]=] },
  { "rp.experiment.better", "rp.experiment.better(metric, a, b) -> boolean", [=[
true when value a beats value b for metric ("correct": higher, "loss": lower); nil (a
diverged run) loses to any number.
Example:
  > rp.experiment.better("loss", 0.31, 0.33)   -- true]=] },

  -- ---------------------------------------------------------------- help
  { "rp.help", "rp.help([f]) -> string | nil, message", [=[
The help text of a public function or method, given as the function value, as a name
("narrow", "rp.rope.rotate") or as a topic ("tensor", "rope", ...); rp.help() lists the
topics. Returns nil and a message for anything unknown.
Example:
  > print(rp.help(rp.rope.rotate))      > print(rp.help(rp.Tensor.narrow))]=] },
}

-- Topic texts; each also lists the functions of its section.
local topics = {
  { "tensor", rp.Tensor, [=[
roper.Tensor: strided float32 tensors of up to 8 dims. Sizes, dims and indices are 1-based
(negative ones count from the end); RoPE positions and token ids are values and stay 0-based.
Views (view, t, transpose, permute, narrow, select, sub, t[i], t[{...}]) share storage.
Constructors: rp.tensor rp.zeros rp.ones rp.full rp.range rp.linspace rp.eye rp.rand
  rp.randn rp.randint; also rp.is_tensor rp.maxdiff rp.matmul.
Methods: see rp.help("methods"); indexing: rp.help("indexing").]=] },
  { "methods", nil, [=[
Tensor methods (t:name(...)); help on each with rp.help(rp.Tensor.name):
  queries     shape size dim numel stride is_contiguous (and #t, the size of dim 1)
  views       view reshape t transpose permute narrow select sub
  elements    get set item totable
  copies      contiguous clone copy fill zero
  arithmetic  add mul div pow exp log abs sqrt tanh relu sin cos sigmoid neg
  reductions  sum mean max min argmax softmax norm
  other       matmul maxdiff]=] },
  { "indexing", nil, [=[
t[i]          1-D: the number; n-D: t:select(1, i) (a view). Negative i counts from the end.
t[{s1, s2..}] torch-style slicing, one spec per leading dim: a number selects (dim removed),
              {a, b} an inclusive range, {a} one index keeping the dim, {} the whole dim;
              missing trailing specs mean {}. When every dim is selected by a number the
              result is the number itself.
t[i] = x, t[{...}] = x   assigns a number (fill) or a tensor (broadcast copy) into that view.
Example:
  > t = rp.range(1, 12):view(3, 4)
  > t[{2, {2, 3}}]        -- {6, 7}
  > t[{{}, 2}] = 0        -- zero column 2]=] },
  { "arithmetic", nil, [=[
a + b, a - b, a * b (elementwise), a / b, a ^ b and -a work with tensors (numpy
broadcasting) or numbers on either side and return new tensors. Matrix products are
rp.matmul(a, b) or a:matmul(b). Methods: add mul div pow neg and the elementwise functions
exp log abs sqrt tanh relu sin cos sigmoid.]=] },
  { "rng", rp.Rng, [=[
roper.Rng generators: g = rp.rng(seed); g:uniform() g:normal() g:int(lo, hi) g:seed(n)
g:rand(shape) g:randn(shape) g:randint(lo, hi, shape). The module's default generator
(seed 0) serves rp.rand, rp.randn and rp.randint without a generator; rp.seed(n) reseeds it.]=] },
  { "rope", rp.rope, [=[
Rotary position embeddings: rp.rope.theta rp.rope.angles rp.rope.rotate rp.rope.sinusoidal;
inside attention through rp.attention's pe option ("rope", "roper", "roper_legacy").]=] },
  { "attention", nil, [=[
rp.attention(q, k, v[, opts]) -> out, att: multi-head attention with positional encodings
none, sinusoidal, learned, rope, roper and roper_legacy. See rp.help(rp.attention).
rp.linear_attention(q, k, v[, opts]) -> out, w, den: causal linear attention (phi = elu + 1)
with rope or roper after or before phi. Models: rp.model{attention = "linear", ...}.]=] },
  { "model", rp.Model, [=[
roper.Model: the transformer. m = rp.model{vocab = ...}; m:forward m:loss m:train_step
m:generate m:attention m:activations m:params m:grads m:config m:num_params m:save;
rp.load(path) reads a checkpoint. Token ids are 0-based values; layers are numbered from 1.
Optimisers: rp.help("optim").]=] },
  { "optim", rp.Optim, [=[
roper.Optim: opt = rp.optim.adam(m[, opts]) or rp.optim.adamw(m[, opts]); opt:step()
opt:lr() opt:steps() opt:config(). m:train_step(x, y, mask, opt) runs a whole step;
m:save(path, opt) and rp.load(path) keep the optimiser's state.]=] },
  { "tasks", rp.tasks, [=[
Task generators (roper.Task): rp.tasks.addition rp.tasks.substring_index
rp.tasks.substring_prefix rp.tasks.text; methods task:vocab task:vocab_size task:encode
task:decode task:batch task:problem task:check task:config. Evaluation: rp.help("eval").]=] },
  { "eval", nil, [=[
rp.eval.accuracy(m, task[, opts]) rp.eval.length_generalisation(m, task, opts)
rp.eval.loss(m, task[, opts]): accuracy by generation (greedy or sampled) and exact check,
per digit count, and the mean loss over fresh batches.]=] },
  { "experiment", nil, [=[
rp.experiment.keys() rp.experiment.config([overrides]) rp.experiment.run(cfg[, progress])
rp.experiment.applies(key, task) rp.experiment.better(metric, a, b): one training run from a flat config (task, model,
training, evaluation), the unit of scripts/train.lua, compare.lua and sweep.lua.]=] },
  { "blas", rp.blas, [=[
OpenBLAS: rp.blas.core rp.blas.config rp.blas.threads rp.blas.wanted_coretype and
rp.set_num_threads. Loading roper on a CPU where OpenBLAS fell back to Prescott prints one
warning saying which OPENBLAS_CORETYPE to set.]=] },
}

-- ---------------------------------------------------------------- lookup tables
local by_value, by_name, by_short = {}, {}, {}

local function resolve(name)
  local v = { rp = rp }
  local cur = v
  for part in name:gmatch("[^.]+") do
    if type(cur) ~= "table" then return nil end
    cur = cur[part]
  end
  return cur
end

local function format_entry(e)
  return e[2] .. "\n" .. e[3]:gsub("^\n+", ""):gsub("\n+$", "")
end

local topic_text, topic_names = {}, {}
-- Built on the first rp.help call: functions defined by later files (rp.eval) resolve then.
local built = false
local function build()
  built = true
  for _, e in ipairs(entries) do
    local text = format_entry(e)
    by_name[e[1]] = text
    local f = resolve(e[1])
    if f ~= nil then
      if by_value[f] and by_value[f] ~= text then by_value[f] = by_value[f] .. "\n\n" .. text
      else by_value[f] = text end
    end
    local short = e[1]:match("([^.]+)$")
    by_short[short] = by_short[short] and (by_short[short] .. "\n\n" .. text) or text
  end

  for _, t in ipairs(topics) do
    local text = "Topic " .. t[1] .. "\n" .. t[3]:gsub("\n+$", "")
    topic_text[t[1]] = text
    topic_names[#topic_names + 1] = t[1]
    if t[2] ~= nil then by_value[t[2]] = text end
  end
  topic_text.tensors = topic_text.tensor
  topic_text.Tensor = topic_text.tensor
  topic_text.Rng = topic_text.rng
  topic_text.Model = topic_text.model
  topic_text.models = topic_text.model
  topic_text.Optim = topic_text.optim
  topic_text.Task = topic_text.tasks
  topic_text.task = topic_text.tasks
  by_value[rp.optim] = topic_text.optim
  by_value[rp.Task] = topic_text.tasks
  if rp.eval then by_value[rp.eval] = topic_text.eval end
  if rp.experiment then by_value[rp.experiment] = topic_text.experiment end
  by_value[rp.help] = by_name["rp.help"]
end

local function overview()
  local lines = {
    "roper " .. tostring(rp._VERSION) .. ": rotary positional embeddings workbench.",
    "rp.help(f) gives the help of a function or method, e.g. rp.help(rp.rope.rotate),",
    "rp.help(rp.Tensor.narrow), rp.help(\"narrow\"). Topics (rp.help(\"name\")):",
    "  " .. table.concat(topic_names, ", "),
    "Functions:",
  }
  local names = {}
  for _, e in ipairs(entries) do names[#names + 1] = e[1] end
  local line = " "
  for _, n in ipairs(names) do
    if #line + #n + 1 > 92 then
      lines[#lines + 1] = line
      line = " "
    end
    line = line .. " " .. n
  end
  lines[#lines + 1] = line
  return table.concat(lines, "\n")
end


-- rp.help([f]): see the entry "rp.help" above.
function rp.help(...)
  if not built then build() end
  if select("#", ...) == 0 or (...) == nil then return overview() end
  local f = ...
  if f == rp then return overview() end
  if rp.is_tensor(f) then return topic_text.tensor end
  if getmetatable(f) == internals.Rng_mt then return topic_text.rng end
  if getmetatable(f) == internals.Model_mt then return topic_text.model end
  if getmetatable(f) == internals.Optim_mt then return topic_text.optim end
  if getmetatable(f) == internals.Task_mt then return topic_text.tasks end
  local text = by_value[f]
  if text then return text end
  if type(f) == "string" then
    local key = f:gsub("^%s+", ""):gsub("%s+$", ""):gsub("^t:", "rp.Tensor."):gsub("^g:", "rp.Rng.")
      :gsub("^m:", "rp.Model."):gsub("^opt:", "rp.Optim."):gsub("^task:", "rp.Task.")
    text = topic_text[key] or by_name[key] or by_name["rp." .. key] or by_short[key]
    if text then return text end
    return nil, "no help for '" .. f .. "' (rp.help() lists the topics)"
  end
  local what = type(f)
  if what == "userdata" then
    local mt = getmetatable(f)
    what = type(mt) == "table" and type(mt.__name) == "string" and mt.__name or what
  elseif what == "number" or what == "boolean" then
    what = what .. " " .. tostring(f)
  end
  return nil, "no help for this " .. what .. " (rp.help() lists the topics)"
end
