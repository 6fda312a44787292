-- rp.lm: language modelling on a prepared corpus (docs/language_model.md). This chunk is the one
-- place where text becomes token ids: the ids cache of a corpus and a tokenizer, the default
-- tokenizer of a corpus, and sampling text from a model.
--   rp.lm.ids(corpus, tokenizer[, opts])  -> folder, info | nil, message
--   rp.lm.info(folder)                     -> info | nil, message
--   rp.lm.tokenizer(corpus, vocab_size[, type[, opts]]) -> path | nil, message
--   rp.lm.sample(m, tok, prompt[, opts])   -> text, ids
--   rp.lm.continuation(tok, head, new)     -> text
--   rp.lm.sha256(path)                     -> hex | nil, message
-- The tokenizer is rp.tokenizer's (a SentencePiece model), or any object with its methods
-- (tok:encode(text[, {tensor = true}]), tok:decode(ids), tok:vocab_size()).
-- The two long first steps, training a tokenizer and encoding a corpus, report their progress to
-- an option progress: progress(done, total, what), what a line saying what is done (with done 0
-- when a step starts and done == total when it has ended).
--
--
-- roper.lm: adds rp.lm; exports nothing.
local require = ...
local rp = require "roper"
local internals = require "roper.internals"
local args = require "roper.args"

local lm = {}
rp.lm = lm

local integral = args.integral
local argerror, read_file, write_file, path_kind = args.argerror, internals.read_file,
  internals.write_file, internals.path_kind

local SPLITS = { "train", "valid", "test" }

-- The methods of a tokenizer (read once, so no metamethod of it runs later), or raises naming
-- fname's argument arg.
local function tokenizer_methods(fname, arg, tok)
  local ok, enc, dec, vs = pcall(function() return tok.encode, tok.decode, tok.vocab_size end)
  if not ok or type(enc) ~= "function" or type(dec) ~= "function" or type(vs) ~= "function" then
    argerror(fname, arg, "a tokenizer (with encode, decode and vocab_size) expected, got "
      .. args.describe(tok))
  end
  return { encode = function(_, ...) return enc(tok, ...) end,
    decode = function(_, ...) return dec(tok, ...) end,
    vocab_size = function() return vs(tok) end }
end
-- A tokenizer's vocabulary size (its vocab_size(): an integer in 1..2^31-1, ids a model can
-- take; an integral float is the integer), or nil and why.
local function vocab_of(tok)
  local ok, V = pcall(tok.vocab_size, tok)
  if not ok then return nil, args.inner(V) end
  V = integral(V)
  if not V or V < 1 or V > internals.i32_max then
    return nil, "the tokenizer's vocab_size() is not an integer in 1..2147483647"
  end
  return V
end
local IDS_HEAD = "roper-ids 1"
-- (the largest split text read: the corpus limit of the text task and corpus.lua)
local MAX_TEXT = 1 << 30
-- The memory that SentencePiece's encoding of a text in one call holds, per byte of text: its
-- Viterbi lattice, the normalized text with its offsets (8 bytes a byte), a record per piece.
-- Measured peaks: 108-111 bytes a byte with a 2,048-piece unigram model (2 and 18.4 MB of the
-- default corpus: 222 MB and 1.99 GB), about 80 with an 8,000-piece one; the bound rounds up.
local ENCODE_BYTES_PER_BYTE = 120

local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- A path at argument arg of fname: a nonempty string (else "<what> expected, got ..."; with key,
-- "option '<key>' must be <what>, got ...") without a NUL byte, which the file functions would
-- cut the path at ("path contains a NUL byte"), or raises.
local function check_path(fname, arg, what, v, key)
  if type(v) ~= "string" or v == "" then
    argerror(fname, arg, (key and ("option '%s' must be %s"):format(key, what)
      or (what .. " expected")) .. ", got " .. args.describe(v))
  end
  if v:find("\0", 1, true) then
    argerror(fname, arg,
      (key and ("option '%s': "):format(key) or "") .. "path contains a NUL byte")
  end
end

-- The option 'progress' of opts (nil or a function), or raises naming fname's argument arg.
local function opt_progress(fname, arg, opts)
  local f = opts.progress
  if f ~= nil and type(f) ~= "function" then
    argerror(fname, arg, "option 'progress' must be a function (called as progress(done, total, "
      .. "what)), got " .. args.describe(f))
  end
  return f
end

-- n bytes for a person: "18.4 MB" (decimal megabytes), "950 bytes".
local function megabytes(n)
  if n < 100000 then return ("%d bytes"):format(n) end
  return ("%.1f MB"):format(n / 1e6)
end

-- SHA-256 of the file at path (coreutils' sha256sum), 64 hex digits, or nil and why: the one
-- checksum of the cache keys here and of scripts/corpus.lua's manifest (rp.lm.sha256).
local function sha256(path)
  local kind, err = path_kind(path)
  if kind ~= "a regular file" then
    return nil, err or ("%s: %s"):format(path, kind == false and "No such file or directory"
      or ("not a regular file (%s)"):format(kind))
  end
  -- (the file on stdin: sha256sum escapes a name holding a backslash or a newline, and its
  -- line then starts with a backslash)
  local p = io.popen("sha256sum < " .. quote(path) .. " 2>/dev/null")
  local line = p and p:read("l")
  if p then p:close() end
  local hex = line and line:match("^(%x+)")
  if not hex or #hex ~= 64 then return nil, path .. ": sha256sum failed" end
  return hex
end

function lm.sha256(path)
  check_path("rp.lm.sha256", 1, "a file path (a string)", path)
  return sha256(path)
end

-- A corpus folder at argument 1 of fname (a nonempty string), or raises.
local function check_corpus_arg(fname, corpus)
  check_path(fname, 1, "a corpus folder (a string)", corpus)
end

-- rp.lm.info(folder) -> info | nil, message: the ids.txt of an ids folder (what rp.lm.ids writes,
-- or a user's own: train.npy, valid.npy, test.npy and this file):
--   roper-ids 1
--   vocab_size <n>
--   <split> <tokens> <bytes>          for train, valid and test (bytes: the split's UTF-8 text)
--   corpus_sha256 <hex>, tokenizer_sha256 <hex>   (optional: the cache's key)
-- info = {vocab_size =, splits = {train = {tokens =, bytes =}, ...}, corpus_sha256 =,
-- tokenizer_sha256 =}.
function lm.info(folder)
  check_path("rp.lm.info", 1, "a folder (a string)", folder)
  local path = folder .. "/ids.txt"
  local text, err = read_file(path, 1 << 20)
  if not text then return nil, err end
  local lines = {}
  for l in text:gmatch("[^\n]+") do lines[#lines + 1] = l end
  if lines[1] ~= IDS_HEAD then
    return nil, ("%s: not an ids file (its first line is not %q)"):format(path, IDS_HEAD)
  end
  local info = { splits = {} }
  for i = 2, #lines do
    local k, a, b = lines[i]:match("^(%S+) (%S+) ?(%S*)$")
    local n = math.tointeger(tonumber(a))
    if k == "vocab_size" and n and n >= 1 then
      info.vocab_size = n
    elseif (k == "train" or k == "valid" or k == "test") and n and math.tointeger(tonumber(b)) then
      -- (rp.eval.lm's bits per byte divide by the bytes; a split without tokens has no window)
      local bytes = math.tointeger(tonumber(b))
      if n < 1 or bytes < 1 then
        return nil, ("%s:%d: the %s split's tokens and bytes must be integers >= 1, got %q")
          :format(path, i, k, lines[i])
      end
      info.splits[k] = { tokens = n, bytes = bytes }
    elseif k == "corpus_sha256" or k == "tokenizer_sha256" then
      info[k] = a
    elseif k == "chunk_bytes" and n and n >= 1 then
      info.chunk_bytes = n
    else
      return nil, ("%s:%d: cannot read %q"):format(path, i, lines[i])
    end
  end
  if not info.vocab_size then return nil, path .. ": no vocab_size line" end
  for _, s in ipairs(SPLITS) do
    if not info.splits[s] then return nil, ("%s: no line for the %s split"):format(path, s) end
  end
  return info
end

local function write_info(folder, info)
  local lines = { IDS_HEAD, "vocab_size " .. info.vocab_size }
  for _, s in ipairs(SPLITS) do
    lines[#lines + 1] = ("%s %d %d"):format(s, info.splits[s].tokens, info.splits[s].bytes)
  end
  lines[#lines + 1] = "corpus_sha256 " .. info.corpus_sha256
  lines[#lines + 1] = "tokenizer_sha256 " .. info.tokenizer_sha256
  if info.chunk_bytes then lines[#lines + 1] = "chunk_bytes " .. info.chunk_bytes end
  return write_file(folder .. "/ids.txt", table.concat(lines, "\n") .. "\n")
end

-- Makes folder (and its parents).
local function mkdir(folder)
  if path_kind(folder) == "a folder" then return true end
  local ok = os.execute("mkdir -p -- " .. quote(folder) .. " 2>/dev/null")
  if not ok or path_kind(folder) ~= "a folder" then
    return nil, folder .. ": cannot create this folder"
  end
  return true
end

-- The manifest of a prepared corpus, or nil and why.
local function check_corpus(corpus)
  local manifest = corpus .. "/manifest.json"
  if path_kind(manifest) == false then
    return nil, ("%s: no manifest.json (not a corpus prepared by scripts/corpus.lua)"):format(
      corpus)
  end
  return manifest
end

local function load_tokenizer(path)
  if type(rp.tokenizer) ~= "table" or type(rp.tokenizer.load) ~= "function" then
    return nil, "rp.tokenizer is not in this build (a SentencePiece tokenizer is needed for "
      .. path .. ")"
  end
  return rp.tokenizer.load(path)
end

-- The ids of text as a 1-D tensor (tok:encode with {tensor = true, continued = continued}; a Lua
-- array is made one), each checked to be a token of the vocabulary (0 .. V - 1), or nil and why.
local function encode(tok, text, what, V, continued)
  local ok, ids = pcall(tok.encode, tok, text, { tensor = true, continued = continued })
  if not ok then return nil, what .. ": the tokenizer failed: " .. args.inner(ids) end
  if type(ids) == "table" then
    if #ids == 0 then return nil, what .. ": no tokens" end
    ok, ids = pcall(rp.tensor, ids)
    if not ok then
      return nil, what .. ": the tokenizer's encode gave a table that is not token ids: "
        .. args.inner(ids)
    end
  end
  if getmetatable(ids) ~= getmetatable(rp.zeros(1)) then
    return nil, what .. ": the tokenizer's encode gave " .. args.describe(ids)
      .. ", not token ids"
  end
  if ids:dim() ~= 1 then
    return nil, ("%s: the tokenizer's encode gave a %d-D tensor [%s], not a list of token ids")
      :format(what, ids:dim(), table.concat(ids:shape(), " x "))
  end
  if ids:numel() == 0 then return nil, what .. ": no tokens" end
  -- NaN makes min and max NaN; a non-integer in range is refused as the int32 file is written
  local lo, hi = ids:min(), ids:max()
  if lo ~= lo or hi ~= hi then
    return nil, what .. ": the tokenizer's encode gave NaN among its ids"
  end
  if lo < 0 or hi > V - 1 then
    return nil, ("%s: the tokenizer's encode gave the id %.17g, outside its vocabulary (0 .. %d)")
      :format(what, lo < 0 and lo or hi, V - 1)
  end
  return ids
end

local function gib(n) return ("%.1f GiB"):format(n / 2^30) end

-- The ids of text (the split at path) encoded whole, or in pieces of at most chunk bytes that end
-- at line ends (a longer line is a piece of its own), each after the first encoded as the
-- continuation of the one before (tok:encode's continued: no word-boundary mark added at its
-- start), concatenated; nil and why. Whole, it is refused when the encoding would need more than
-- the memory available.
local function encode_split(tok, text, path, V, chunk)
  if not chunk then
    local need, avail = ENCODE_BYTES_PER_BYTE * #text, internals.mem_available()
    if avail and need > avail then
      return nil, ("%s: encoding it in one call needs about %s (%d bytes a byte of text), more "
        .. "than the %s of memory available; rp.lm.ids's chunk_bytes encodes it in pieces")
        :format(path, gib(need), ENCODE_BYTES_PER_BYTE, gib(avail))
    end
    return encode(tok, text, path, V)
  end
  local parts, total, at = {}, 0, 1
  while at <= #text do
    local stop = at + chunk - 1
    if stop < #text then
      -- the last line end in [at, stop], else the end of this (long) line
      local cut = text:sub(at, stop):match("^.*()\n")
      stop = cut and (at + cut - 1) or (text:find("\n", stop + 1, true) or #text)
    else
      stop = #text
    end
    local ids, err = encode(tok, text:sub(at, stop), path, V, at > 1 or nil)
    if not ids then
      -- a piece of blanks may encode to no ids: it adds none
      if err ~= path .. ": no tokens" then return nil, err end
    else
      parts[#parts + 1] = ids
      total = total + ids:numel()
    end
    at = stop + 1
  end
  if total == 0 then return nil, path .. ": no tokens" end
  local all, k = rp.zeros { total }, 1
  for _, ids in ipairs(parts) do
    all:narrow(1, k, ids:numel()):copy(ids)
    k = k + ids:numel()
  end
  return all
end

-- rp.lm.ids(corpus, tokenizer[, opts]) -> folder, info | nil, message
-- The token ids of a prepared corpus (scripts/corpus.lua: manifest.json and train.txt,
-- valid.txt, test.txt) under a tokenizer model file, cached in
-- <cache>/<16 hex of the manifest's SHA-256>-<16 of the model's>/ (cache: opts.cache, default
-- <corpus>/ids): train.npy, valid.npy, test.npy (int32) and ids.txt (rp.lm.info: the vocabulary,
-- each split's tokens and UTF-8 bytes, both checksums in full). A cache whose ids.txt names both
-- checksums is used as it is; otherwise the splits are encoded (tok:encode) and written, each
-- file atomically and ids.txt last, so a folder with an ids.txt is whole. opts.tokenizer: an
-- object to encode with instead of rp.tokenizer.load(tokenizer) (the key stays the file's).
-- Memory: a split encoded in one call holds about ENCODE_BYTES_PER_BYTE bytes a byte of its text
-- (refused, nil and a message, when that is more than the memory available);
-- opts.chunk_bytes = n encodes each split in pieces of at most n bytes ending at line ends (a
-- longer line is a piece of its own; each after the first as a continuation, tok:encode's
-- continued), so the encoding holds about that much for n bytes, plus 4 bytes an id. Its ids
-- differ from the whole split's (SentencePiece's float32 path scores lose precision over a long
-- text: docs/language_model.md), so it has a cache of its own: the folder name ends "-p<n>" and
-- ids.txt says chunk_bytes.
-- opts.progress: called as progress(0, bytes, what) before a split is encoded and progress(bytes,
-- bytes, what) once its ids are written (what: "encoding <file> (<size>) into token ids").
function lm.ids(corpus, tokenizer, opts)
  local fname = "rp.lm.ids"
  check_corpus_arg(fname, corpus)
  check_path(fname, 2, "a tokenizer model file (a string)", tokenizer)
  opts = args.check_opts(fname, 3, opts, { "cache", "tokenizer", "chunk_bytes", "progress" })
  if opts.cache ~= nil then
    check_path(fname, 3, "a folder (a nonempty string)", opts.cache, "cache")
  end
  local chunk = opts.chunk_bytes
  if chunk ~= nil then
    chunk = integral(opts.chunk_bytes)
    if not chunk or chunk < 1 or chunk > MAX_TEXT then
      argerror(fname, 3, "option 'chunk_bytes' must be an integer in 1..2^30, got "
        .. args.describe(opts.chunk_bytes))
    end
  end
  local tok = opts.tokenizer
  if tok ~= nil then tok = tokenizer_methods(fname, 3, tok) end
  local progress = opt_progress(fname, 3, opts)
  local manifest, err = check_corpus(corpus)
  if not manifest then return nil, err end
  local msum
  msum, err = sha256(manifest)
  if not msum then return nil, err end
  local tsum
  tsum, err = sha256(tokenizer)
  if not tsum then return nil, err end
  local folder = ("%s/%s-%s%s"):format(opts.cache or (corpus .. "/ids"), msum:sub(1, 16),
    tsum:sub(1, 16), chunk and ("-p" .. chunk) or "")
  local info = path_kind(folder .. "/ids.txt") and lm.info(folder)
  if info and info.corpus_sha256 == msum and info.tokenizer_sha256 == tsum
    and info.chunk_bytes == chunk then
    return folder, info
  end
  if tok == nil then
    tok, err = load_tokenizer(tokenizer)
    if not tok then return nil, err end
  end
  local ok
  ok, err = mkdir(folder)
  if not ok then return nil, err end
  local V, verr = vocab_of(tok)
  if not V then return nil, tokenizer .. ": " .. verr end
  info = { vocab_size = V, splits = {}, corpus_sha256 = msum, tokenizer_sha256 = tsum,
    chunk_bytes = chunk }
  for _, s in ipairs(SPLITS) do
    local path = ("%s/%s.txt"):format(corpus, s)
    local text
    text, err = read_file(path, MAX_TEXT)
    if not text then return nil, err end
    local bytes = #text
    local what = ("encoding %s (%s) into token ids"):format(path, megabytes(bytes))
    if progress then progress(0, bytes, what) end
    local ids
    ids, err = encode_split(tok, text, path, V, chunk)
    text = nil -- the split's text is not needed while its ids are written
    if not ids then return nil, err end
    local sok
    sok, ok, err = pcall(ids.save, ids, ("%s/%s.npy"):format(folder, s), { dtype = "int32" })
    if not sok then
      -- the one refusal of t:save left after encode's checks: an id that is not an integer
      return nil, path .. ": the tokenizer's encode gave ids that are not integers ("
        .. args.inner(ok):gsub("^t:save: ", "") .. ")"
    end
    if not ok then return nil, err end
    info.splits[s] = { tokens = ids:numel(), bytes = bytes }
    if progress then progress(bytes, bytes, what) end
  end
  ok, err = write_info(folder, info)
  if not ok then return nil, err end
  return folder, info
end

-- rp.lm.tokenizer(corpus, vocab_size[, type[, opts]]) -> path | nil, message: the default
-- tokenizer of a prepared corpus, <corpus>/tokenizer-<type>-<vocab_size>.model, trained on its
-- train.txt with rp.tokenizer.train (byte fallback on) when it is not there yet. type: "unigram"
-- (default, also for nil) or "bpe". opts.progress: called as progress(0, 1, what) when training
-- starts and progress(1, 1, what) when the model is written (what: "training the tokenizer
-- <path> (SentencePiece <type>, <n> pieces) on <train.txt> (<size>)"; SentencePiece reports
-- nothing in between).
function lm.tokenizer(corpus, vocab_size, kind, opts)
  local fname = "rp.lm.tokenizer"
  check_corpus_arg(fname, corpus)
  local vs = integral(vocab_size)
  if not vs or vs < 1 then
    argerror(fname, 2, "vocab_size must be an integer >= 1, got " .. args.describe(vocab_size))
  end
  vocab_size = vs
  if kind == nil then kind = "unigram" end
  if kind ~= "unigram" and kind ~= "bpe" then
    argerror(fname, 3, "type must be \"unigram\" or \"bpe\", got " .. args.describe(kind))
  end
  opts = args.check_opts(fname, 4, opts, { "progress" })
  local progress = opt_progress(fname, 4, opts)
  local path = ("%s/tokenizer-%s-%d.model"):format(corpus, kind, vocab_size)
  if path_kind(path) == "a regular file" then return path end
  local ok, err = check_corpus(corpus)
  if not ok then return nil, err end
  if type(rp.tokenizer) ~= "table" or type(rp.tokenizer.train) ~= "function" then
    return nil, "rp.tokenizer is not in this build (needed to train " .. path .. ")"
  end
  local input = corpus .. "/train.txt"
  local what
  if progress then
    local f = io.open(input, "rb")
    local size = f and f:seek("end")
    if f then f:close() end
    what = ("training the tokenizer %s (SentencePiece %s, %d pieces) on %s%s"):format(path,
      kind, vocab_size, input, size and (" (" .. megabytes(size) .. ")") or "")
    progress(0, 1, what)
  end
  -- rp.tokenizer.train's refusals (a vocab_size its byte fallback cannot hold, a path it cannot
  -- take) are this function's argument errors, in its words
  local tok
  ok, tok, err = pcall(rp.tokenizer.train, { input = input, model = path,
    vocab_size = vocab_size, type = kind, byte_fallback = true })
  if not ok then
    argerror(fname, tok:find("vocab_size", 1, true) and 2 or 1, args.inner(tok))
  end
  if not tok then return nil, err end
  if progress then progress(1, 1, what) end
  return path
end

-- The text that the ids new add after the ids head under tok (methods as tokenizer_methods
-- gives them): head and new decoded together, less head's decoding when the whole begins with it
-- (a tokenizer that marks word starts, as SentencePiece's, drops the mark of a text's first
-- piece, so new decoded alone would lose the space before its first word); else new decoded
-- alone. nil and why when the tokenizer's decode fails.
local function continuation(tok, head, new)
  local all = table.move(new, 1, #new, #head + 1, table.move(head, 1, #head, 1, {}))
  local ok, h = pcall(tok.decode, tok, head)
  if ok and type(h) == "string" then
    local whole
    ok, whole = pcall(tok.decode, tok, all)
    if ok and type(whole) == "string" and whole:sub(1, #h) == h then return whole:sub(#h + 1) end
  end
  local text
  ok, text = pcall(tok.decode, tok, new)
  if not ok or type(text) ~= "string" then
    return nil, "the tokenizer's decode failed: " .. (ok and ("it gave "
      .. args.describe(text)) or args.inner(text))
  end
  return text
end

-- rp.lm.continuation(tok, head, new) -> text: the text that the token ids new add after head
-- (both lists of ids; the tokenizer as rp.lm.ids takes it), as rp.lm.sample and scripts/sample.lua
-- decode a model's continuation of a prompt.
function lm.continuation(tok, head, new)
  local fname = "rp.lm.continuation"
  tok = tokenizer_methods(fname, 1, tok)
  local V, verr = vocab_of(tok)
  if not V then argerror(fname, 1, verr) end
  for _, a in ipairs { { 2, head }, { 3, new } } do
    if type(a[2]) ~= "table" then
      argerror(fname, a[1], "a list of token ids expected, got " .. args.describe(a[2]))
    end
    for i = 1, #a[2] do
      local id = a[2][i]
      if math.type(id) ~= "integer" or id < 0 or id >= V then
        argerror(fname, a[1], ("token [%d] must be an integer id in 0..%d, got %s"):format(i,
          V - 1, args.describe(id)))
      end
    end
  end
  local text, err = continuation(tok, head, new)
  if not text then argerror(fname, 1, err) end
  return text
end

-- rp.lm.sample(m, tok, prompt[, opts]) -> text, ids: a continuation of prompt (a string, encoded
-- with tok) by m:generate (opts: n new tokens, default 200, and temperature, top_k, top_p, seed,
-- rng as m:generate takes them; temperature 0 is greedy), decoded with tok as the rest of the
-- prompt's decoding (rp.lm.continuation).
-- The model's vocabulary must not be larger than the tokenizer's (an id past it has no piece).
function lm.sample(m, tok, prompt, opts)
  local fname = "rp.lm.sample"
  if getmetatable(m) ~= internals.Model_mt then
    argerror(fname, 1, "roper.Model expected, got " .. args.describe(m))
  end
  local cok, mc = pcall(m.config, m)
  if not cok then argerror(fname, 1, "attempt to use a released model") end
  tok = tokenizer_methods(fname, 2, tok)
  if type(prompt) ~= "string" or prompt == "" then
    argerror(fname, 3, "prompt must be a nonempty string, got " .. args.describe(prompt))
  end
  opts = args.check_opts(fname, 4, opts, { "n", "temperature", "top_k", "top_p", "seed",
    "rng" })
  local n = args.opt_int(fname, 4, opts, "n", 200, 1, internals.i32_max)
  local gen = {}
  for _, k in ipairs { "temperature", "top_k", "top_p", "seed", "rng" } do gen[k] = opts[k] end
  if gen.temperature == nil then gen.temperature = 1 end
  -- the tokenizer first (a released one fails here), then the prompt's ids
  local V = mc.vocab
  local TV, verr = vocab_of(tok)
  if not TV then argerror(fname, 2, verr) end
  if V > TV then
    argerror(fname, 1, ("the model's vocabulary (%d ids) is larger than the tokenizer's (%d): "
      .. "an id it samples past %d has no piece"):format(V, TV, TV - 1))
  end
  local ok, ids = pcall(tok.encode, tok, prompt)
  if not ok then argerror(fname, 3, args.inner(ids)) end
  if type(ids) ~= "table" then
    argerror(fname, 2, "the tokenizer's encode gave " .. args.describe(ids) .. ", not ids")
  end
  if #ids == 0 then argerror(fname, 3, "the prompt encodes to no tokens") end
  for i = 1, #ids do
    local id = ids[i]
    if math.type(id) ~= "integer" then
      argerror(fname, 2, ("the tokenizer's encode gave %s as token %d of the prompt, not an "
        .. "integer id"):format(args.describe(id), i))
    elseif id < 0 or id >= V then
      argerror(fname, 2, ("the tokenizer's id %d (token %d of the prompt) is outside the model's "
        .. "vocabulary 0..%d"):format(id, i, V - 1))
    end
  end
  local out
  ok, out = pcall(m.generate, m, ids, n, gen)
  if not ok then argerror(fname, 4, args.inner(out)) end
  local text, err = continuation(tok, ids, out)
  if not text then argerror(fname, 2, err) end
  return text, out
end
