-- Text from a saved model: loads a checkpoint (train.lua --save, compare.lua / sweep.lua
-- --keep-models), encodes a prompt with its run's task vocabulary and generates.
--
--   build/roper scripts/sample.lua runs/add.ckpt                         -- a fresh problem of its task
--   build/roper scripts/sample.lua runs/add.ckpt --prompt '?d=12+34;' --greedy
--   build/roper scripts/sample.lua runs/text.ckpt --prompt 'The ' --n 300 --temperature 0.8 --top-k 5
--   build/roper scripts/sample.lua model.ckpt --config results/x/runs/rope-s1.json --samples 4
--   build/roper scripts/sample.lua runs/lm.ckpt --prompt 'The scheduler' --top-p 0.9   # an lm run:
--                                                  # its tokenizer encodes and decodes
--
-- The checkpoint holds the model; the task (its vocabulary, its problems) comes from the run's
-- JSON beside it (run.ckpt -> run.json) or from --config (scripts/lib/saved.lua). Without
-- --prompt, tasks with problems (addition, substring_index) are prompted with fresh problems and
-- each answer is checked; the other tasks with the beginning of a fresh row of their data (the
-- validation split of a text or lm run), real text that is not the model's: a header line says
-- so, and the mark <|model|> stands where that prompt ends and the model's text begins (a
-- --prompt is printed as given, the model's text right after it). Generation stops after the
-- task's terminator (problems) or --stop, or after --n tokens. Sampling is reproducible: --seed
-- draws the problems (rp.rng(seed)) and sample i samples from rp.rng(seed + 1) jumped i - 1
-- times (m:generate_batch); --greedy (or --temperature 0) takes the most likely token.
--
-- Errors are one line: exit 2 for a bad option, checkpoint or run JSON.
-- lib/ beside this file, wherever it runs from: roper, lua5.4 or an installed roper-<name>
package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
local rp = require "roper"
local cli = require "lib.cli"
local saved = require "lib.saved"

-- where a prompt drawn from the data ends and the model's text begins
local MARK = "<|model|>"

-- --help opens with these (each runs as written from the repository's folder; tests/lua/
-- help_examples_spec.lua runs them)
local EXAMPLES = {
  { "a fresh problem of the model's task, answered and checked (the model of train.lua's first example)",
    "build/roper scripts/sample.lua runs/add.ckpt" },
  { "five problems, greedy answers",
    "build/roper scripts/sample.lua runs/add.ckpt --samples 5 --greedy" },
  { "your own prompt, sampled at temperature 0.8 among the 3 likeliest tokens",
    "build/roper scripts/sample.lua runs/add.ckpt --prompt '?d=12+34;' " .. "--temperature 0.8 --top-k 3" },
}

cli.main("sample.lua", function()
  local parser = cli.parser("build/roper scripts/sample.lua",
    "Generate text with a saved model (a checkpoint of train.lua --save or --keep-models).", EXAMPLES)
  parser:argument("checkpoint", "The checkpoint (.ckpt).")
  parser:option("--config", "The run's result JSON or config (default: the .json beside the "
    .. "checkpoint).")
    :argname("<file.json>")
  parser:option("--prompt", "The text to continue (default: a fresh problem of the task, or the "
    .. "beginning of a fresh row of its data, its end marked " .. MARK .. ").")
    :argname("<text>")
  parser:option("--samples", "How many samples (of the prompt, or fresh problems).", "1")
    :convert(math.tointeger):argname("<n>")
  parser:option("--n", "At most this many new tokens per sample.", "200")
    :convert(math.tointeger):argname("<n>")
  parser:option("--temperature", "Sampling temperature (0: greedy).", "1")
    :convert(tonumber):argname("<t>")
  parser:option("--top-k", "Sample among the k most likely tokens (0: all).", "0")
    :convert(math.tointeger):argname("<k>")
  parser:option("--top-p", "Sample from the nucleus: the fewest most likely tokens holding this "
    .. "share of the probability (1: all).", "1")
    :convert(tonumber):argname("<p>")
  parser:option("--tokenizer", "lm: the tokenizer model (default: the run's, or its corpus's "
    .. "default one).")
    :argname("<file.model>")
  parser:flag("--greedy", "Take the most likely token (as --temperature 0).")
  parser:option("--seed", "Seed of the problems and of sampling.", "1")
    :convert(math.tointeger):argname("<n>")
  parser:option("--stop", "Stop after this character (default: the task's terminator for "
    .. "addition and substring_index, none otherwise).")
    :argname("<char>")
  cli.allow_unused(parser)
  local args = parser:parse()

  local die = cli.usage
  if not args.samples or args.samples < 1 or args.samples > 100000 then
    die("--samples must be an integer in 1..100000")
  end
  if not args.n or args.n < 1 or args.n > 2^31 - 1 then
    die("--n must be an integer in 1..2147483647")
  end
  if args.samples * args.n > 2^31 - 1 then die("--samples times --n must be at most 2^31 - 1") end
  local t = args.temperature
  if not t or t ~= t or t < 0 or t == math.huge then die("--temperature must be a number >= 0") end
  if args.greedy then t = 0 end
  if not args.top_k or args.top_k < 0 then die("--top-k must be an integer >= 0") end
  if not args.seed then die("--seed must be an integer") end
  local top_p = args.top_p
  if not top_p or not (top_p > 0 and top_p <= 1) then die("--top-p must be a number in (0, 1]") end
  -- an option typed that does nothing in the chosen mode (cli.refuse: --allow-unused)
  local greedy_why = args.greedy and "with --greedy: it applies to sampling"
    or "with --temperature 0: it applies to sampling (--temperature > 0)"
  if t == 0 and cli.given("top-k") then
    cli.refuse(args, "--top-k " .. args.top_k, greedy_why)
  end
  if t == 0 and cli.given("top-p") then
    cli.refuse(args, "--top-p " .. args.top_p, greedy_why)
  end
  if args.greedy and cli.given("temperature") then
    cli.refuse(args, "--temperature " .. args.temperature, greedy_why)
  end
  if t == 0 and args.prompt and cli.given("seed") then
    cli.refuse(args, "--seed " .. args.seed, "with --prompt and greedy decoding: it draws the "
      .. "problems and the samples")
  end

  local m, task, cfg = saved.open(rp, args.checkpoint, args.config)
  local problems = cfg.task == "addition" or cfg.task == "substring_index"
  -- what turns text into ids and back: the task's vocabulary, or an lm run's tokenizer
  local coder, lm_tok = task, nil
  if cfg.task == "lm" then
    local path = args.tokenizer or (cfg.tokenizer ~= "" and cfg.tokenizer) or nil
    if not path then
      if io.open(cfg.corpus .. "/ids.txt") then
        die(("the run's corpus %s is a folder of ids: give its tokenizer with --tokenizer")
          :format(cfg.corpus))
      end
      local err
      path, err = rp.lm.tokenizer(cfg.corpus, cfg.vocab_size)
      if not path then die(err) end
    end
    if type(rp.tokenizer) ~= "table" then die("rp.tokenizer is not in this build") end
    local tok, err = rp.tokenizer.load(path)
    if not tok then die(err) end
    coder = { encode = function(_, text) return tok:encode(text) end,
      decode = function(_, ids) return tok:decode(ids) end }
    lm_tok = tok
  end

  local function id_of(ch, what)
    local ok, ids = pcall(coder.encode, coder, ch)
    if not ok then die(what .. ": " .. cli.inner(ids)) end
    if #ids ~= 1 then die(what .. " must be one character, got " .. ("%q"):format(ch)) end
    return ids[1]
  end
  local stop
  if args.stop then
    stop = id_of(args.stop, "--stop")
  elseif problems then
    stop = id_of((cfg.task == "addition" and cfg.format == "labml") and "\n" or "#",
      "the task's terminator")
  end

  -- the prompts (and the questions to check)
  local texts, questions, header = {}, {}, nil
  local g = rp.rng(args.seed)
  if args.prompt then
    if args.prompt == "" then die("--prompt must not be empty") end
    local ok, err = pcall(coder.encode, coder, args.prompt)
    if not ok then die("--prompt: " .. cli.inner(err)) end
    for i = 1, args.samples do texts[i] = args.prompt end
  elseif problems then
    for i = 1, args.samples do
      local q, a = task:problem(g)
      texts[i], questions[i] = q, a
    end
  else
    local tc = task:config()
    local split = ((cfg.task == "text" or cfg.task == "lm")
      and select(2, task:split_sizes()) > tc.seq_len) and "valid" or "train"
    local x = task:batch(args.samples, g, split)
    local len = math.min(32, tc.seq_len // 2)
    for i = 1, args.samples do texts[i] = coder:decode(x[i]:narrow(1, 1, len)) end
    -- the prompt is the data's, not the model's: said, and marked where it ends
    header = ("-- prompt%s: %d tokens of the %s split (real text), up to %s; then the model's "
      .. "text\n"):format(args.samples > 1 and "s" or "", len, split == "valid" and "validation"
      or "training", MARK)
  end
  local prompts = {}
  for i, text in ipairs(texts) do prompts[i] = coder:encode(text) end

  local gen = { stop = stop }
  if t > 0 then
    gen.temperature, gen.top_k, gen.top_p, gen.seed = t, args.top_k, top_p, args.seed + 1
  end
  local outs = m:generate_batch(prompts, args.n, gen)

  local right = 0
  if header then io.write(header) end
  for i, ids in ipairs(outs) do
    -- (a tokenizer's pieces decoded after the prompt's: the space before the first word kept)
    local out = lm_tok and rp.lm.continuation(lm_tok, prompts[i], ids) or coder:decode(ids)
    if args.samples > 1 and not questions[i] then io.write(("-- sample %d\n"):format(i)) end
    if questions[i] then
      local ok = task:check(texts[i], out)
      if ok then right = right + 1 end
      local line = (texts[i] .. out):gsub("\n$", "")
      io.write(line, ok and "   [right]" or ("   [wrong: the answer is " .. questions[i] .. "]"),
        "\n")
    else
      io.write(texts[i], header and MARK or "", out, out:sub(-1) == "\n" and "" or "\n")
    end
  end
  if #questions > 1 then
    io.write(("%d of %d right\n"):format(right, #questions))
  end
end)
