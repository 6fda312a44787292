-- One experiment run: train a fresh model on a task and evaluate it (rp.experiment.run).
--
--   build/roper scripts/train.lua --task substring_index --pe roper --steps 2000
--   build/roper scripts/train.lua --config run.cfg.json --out runs/roper-s1.json
--   build/roper scripts/train.lua --task addition --save runs/add.ckpt --save-every 500
--
-- Every key of rp.experiment.keys() is an option (--d-model or --d_model). --config reads a JSON
-- object of keys first; options given on the command line override it. With --out the result is
-- written as JSON (atomically) and the loss curve as CSV beside it (.csv), with eval_lengths
-- also the metric at each length (.lengths.csv); without, a summary is printed. This is the one-run-per-job unit that compare.lua and sweep.lua start, and what a
-- scheduler (GNU parallel, job arrays) runs when a sweep is spread over machines. The result
-- JSON records the run's provenance (scripts/lib/provenance.lua).
--
-- --save writes the trained model with its optimiser (a checkpoint: rp.load gives both back, so
-- training can go on) and, when --out is not given, the result JSON beside it (the checkpoint's
-- name with .json for .ckpt), which sample.lua and attention_map.lua read for the run's task.
-- --save-every N also saves every N steps, over the same file (each save is atomic: an
-- interrupted run leaves the model of its last multiple of N). --resume goes on from there; when
-- the --save file holds the model of the finished run (at --steps, its training state gone) it
-- says so in one line ("nothing to do") and exits 0 without training or writing anything.
--
-- --checkpoint F --checkpoint-every N makes a run that can be stopped at any time: every N steps
-- it saves the model, the optimiser and the training state (F, F.state) with the run's config
-- (F.run.json); started again with the same options it goes on from there and ends as the
-- uninterrupted run would, bit for bit; stopped while it evaluates, it goes on from its last
-- step and only evaluates. F is removed when the run finishes (or becomes the --save file). A
-- checkpoint of another run (another seed, say) is refused, not overwritten
-- (scripts/lib/resume.lua). compare.lua and sweep.lua --checkpoint-every use it.
--
-- Everything that can be known before training is checked before training (rp.experiment.check:
-- the config, the model and its memory, the task and its corpus; the --out and --progress files
-- writable). Errors are one line: exit 2 for a bad option or config, 1 for a failure during the
-- run; --debug (or ROPER_DEBUG=1) adds the Lua traceback.
--
-- An option typed on the command line that does nothing for the run (a key of another task, a
-- model key the pe does not use, min_lr without the cosine schedule, ...) is refused with the
-- reason, unless --allow-unused (cli.refuse_unused, rp.experiment.applies); --config keys never.
-- lib/ beside this file, wherever it runs from: roper, lua5.4 or an installed roper-<name>
package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
local rp = require "roper"
local cli = require "lib.cli"
local term = require "lib.term"
local fileio = require "lib.fileio"
local json = require "lib.json"
local tables = require "lib.tables"
local provenance = require "lib.provenance"
local saved = require "lib.saved"
local resume = require "lib.resume"

-- --help opens with these (each runs as written from the repository's folder; tests/lua/
-- help_examples_spec.lua runs them)
local EXAMPLES = {
  { "two-digit addition with RoPER; keeps the model (runs/add.ckpt) for sample.lua and attention_map.lua",
    "build/roper scripts/train.lua --task addition --max-digits 2 --pe roper " .. "--lr 3e-3 --steps 1000 --save runs/add.ckpt" },
  { "substring by index with RoPE: the result as JSON, its loss curve as CSV beside it",
    "build/roper scripts/train.lua --pe rope --steps 2000 --out " .. "runs/index-rope.json" },
  { "substring by prefix with RoPER rotating half of each head's v and output",
    "build/roper scripts/train.lua --task substring_prefix --pe roper " .. "--fraction-v 0.5 --steps 1000" },
  { "a run that can be stopped at any time and goes on when started again",
    "build/roper scripts/train.lua --task addition --max-digits 3 --steps " .. "2000 --checkpoint runs/a3.ckpt --checkpoint-every 250" },
}

cli.main("train.lua", function()
  local parser = cli.parser("build/roper scripts/train.lua",
    "Train and evaluate one model (one experiment run).", EXAMPLES)
  parser:option("--config", "A JSON file of config keys (command-line options override it).")
    :argname("<file>")
  parser:option("--out", "Write the result as JSON here and the loss curve as CSV beside it.")
    :argname("<file.json>")
  parser:option("--progress", "Rewrite '<step> <steps> <loss>' into this file as training "
    .. "goes ('<step> <steps> <loss> <done> <total> <what>' while it evaluates: done of total "
    .. "windows of what, the lm task's split or 'lengths').")
    :argname("<file>")
  parser:option("--save", "Save the trained model and its optimiser here (a checkpoint; without "
    .. "--out the result JSON goes beside it, .json for .ckpt).")
    :argname("<file.ckpt>")
  parser:option("--save-every", "Also save every n steps during training (over the same file).")
    :convert(math.tointeger):argname("<n>")
  parser:flag("--resume", "Go on from the --save checkpoint when it exists (the run then "
    .. "ends as the uninterrupted one would); a finished run's is left alone (exit 0).")
  parser:option("--checkpoint", "Save the model, its optimiser and the training state here every "
    .. "--checkpoint-every steps, and go on from there when started again with the same options; "
    .. "removed when the run finishes (moved to --save when given).")
    :argname("<file.ckpt>")
  parser:option("--checkpoint-every", "The steps between --checkpoint saves.")
    :convert(math.tointeger):argname("<n>")
  parser:flag("--quiet", "No progress bar.")
  cli.add_config_options(parser, rp)
  -- under mpirun (or srun): data-parallel training, rank 0 writes everything
  local comm = rp.mpi.launched() and rp.mpi.init() or nil
  local root = comm == nil or comm:rank() == 0
  local args = parser:parse()

  local overrides, from_file = {}, {}
  if args.config then
    fileio.check_input(args.config, "--config")
    local c, err = json.read(args.config)
    if not c then cli.usage("--config " .. err) end
    if type(c) ~= "table" then
      cli.usage("--config " .. args.config .. ": a JSON object of config keys expected")
    end
    overrides = c
    for k in pairs(c) do from_file[k] = true end
  end
  local typed = cli.config_overrides(args, rp)
  for k, v in pairs(typed) do overrides[k], from_file[k] = v, nil end

  -- (the lm task's first steps on a corpus, its tokenizer and ids, show on stderr: cli.check;
  -- a run that goes on from its own checkpoint does not read --init, which may be gone)
  local resuming = (args.resume and args.save and fileio.exists(args.save))
    or (args.checkpoint and fileio.exists(args.checkpoint))
  local cfg, cfg_err = cli.check(rp, overrides, args.quiet or not root, resuming)
  if not cfg then
    -- a key of the --config file (not overridden on the command line): the file named
    local key = cfg_err:match("^unknown option '(.-)'") or cfg_err:match("^option '(.-)'")
    if key and from_file[key] then cfg_err = "--config " .. args.config .. ": " .. cfg_err end
    cli.usage(cfg_err)
  end
  -- an option typed on the command line that does nothing for this run (not those of --config)
  cli.refuse_unused(rp, args, cli.typed(typed), { cfg })
  if args.save_every ~= nil then
    if args.save_every < 1 then cli.usage("--save-every must be an integer >= 1") end
    if not args.save then cli.usage("--save-every needs --save") end
  end
  if args.resume and not args.save then cli.usage("--resume needs --save") end
  if args.save then
    if args.save:match("%.json$") or args.save:match("%.csv$") then
      cli.usage("--save " .. args.save .. ": a checkpoint is not a .json or .csv file (use .ckpt)")
    end
    fileio.check_output(args.save, "--save")
    args.out = args.out or saved.beside(args.save)
    if fileio.same_path(args.out, args.save) then
      cli.usage("--save and --out name the same file")
    end
  end
  if args.checkpoint_every ~= nil then
    if args.checkpoint_every < 1 then cli.usage("--checkpoint-every must be an integer >= 1") end
    if not args.checkpoint then cli.usage("--checkpoint-every needs --checkpoint") end
  end
  if args.checkpoint then
    if not args.checkpoint_every then cli.usage("--checkpoint needs --checkpoint-every") end
    if args.save_every or args.resume then
      cli.usage("--checkpoint goes without --save-every and --resume (it saves and resumes itself)")
    end
    if args.checkpoint:match("%.json$") or args.checkpoint:match("%.csv$") then
      cli.usage("--checkpoint " .. args.checkpoint
        .. ": a checkpoint is not a .json or .csv file (use .ckpt)")
    end
    local on_save = args.save and fileio.same_path(args.checkpoint, args.save)
    if on_save or (args.out and fileio.same_path(args.checkpoint, args.out)) then
      cli.usage("--checkpoint names the file of --" .. (on_save and "save" or "out"))
    end
    fileio.check_output(args.checkpoint, "--checkpoint")
    -- the checkpoint becomes --save by a rename at the end, which cannot cross file systems
    if args.save and not fileio.same_device(args.checkpoint, args.save) then
      cli.usage(("--checkpoint %s and --save %s are on different file systems: the checkpoint "
        .. "becomes --save by a rename; put them on one"):format(args.checkpoint, args.save))
    end
  end
  local csv = args.out and (args.out:gsub("%.json$", "") .. ".csv")
  -- with eval_lengths, the metric at each length (result.by_length) as CSV too
  local lengths_csv = args.out and cfg.eval_lengths ~= ""
    and (args.out:gsub("%.json$", "") .. ".lengths.csv")
  if args.out then
    fileio.check_output(args.out, "--out")
    fileio.check_output(csv, "--out")
    if lengths_csv then fileio.check_output(lengths_csv, "--out") end
  end
  if args.progress then fileio.check_output(args.progress, "--progress") end
  -- no two outputs in one file (the later write would replace the other: a model by the
  -- progress lines, say), however the paths are written
  local outputs = { { "--save", args.save }, { "--checkpoint", args.checkpoint },
    { "--checkpoint's run file", args.checkpoint and args.checkpoint .. ".run.json" },
    { "--checkpoint's state", args.checkpoint and args.checkpoint .. ".state" },
    { "--out", args.out }, { "--out's curve", csv }, { "--out's lengths", lengths_csv or nil },
    { "--progress", args.progress } }
  for i = 1, #outputs do
    for j = i + 1, #outputs do
      local a, b = outputs[i], outputs[j]
      if a[2] and b[2] and fileio.same_path(a[2], b[2]) then
        cli.usage(("%s and %s name the same file (%s)"):format(a[1], b[1], b[2]))
      end
    end
  end

  local system_ok, system = pcall(require, "system")
  local now = system_ok and system.gettime or os.time
  local status = root and not args.quiet and not args.progress and term.status(30)
  local last, warned = 0, false
  -- progress(step, steps, loss[, done, total, what]): after each training step; with done and
  -- total, during the evaluation after training (rp.eval.lm's and rp.eval.lengths' option
  -- progress: done of total windows evaluated of what, the lm task's split or "lengths"), shown
  -- as "evaluating the valid split: done/total windows" (each part's last line, with its
  -- seconds, stays) and written as '<step> <steps> <loss> <done> <total> <what>' to --progress
  -- (lib/runner.lua reads both forms)
  local last_loss, was_evaluating, part, part_t, prev_t = 0 / 0, false, nil, now(), now()
  local function evaluating_text(done, total, what)
    if what == "lengths" then return ("evaluating at eval_lengths: %d/%d"):format(done, total) end
    if what then return ("evaluating the %s split: %d/%d windows"):format(what, done, total) end
    return ("evaluating %d/%d windows"):format(done, total)
  end
  local function progress(step, steps, loss, done, total, what)
    loss = loss or last_loss -- (the evaluation may give none: the last training loss)
    last_loss = loss
    local t = now()
    local evaluating = done ~= nil and total ~= nil
    local final = evaluating and done == total or not evaluating and step == steps
    -- at most two writes a second, but the last step, the start of the evaluation and of each
    -- of its parts (a split, the lengths) and their ends at once
    local starts = evaluating and (not was_evaluating or what ~= part)
    was_evaluating = evaluating
    -- (a part's time runs from the call before its first: the end of training or of the last)
    if starts then part, part_t = what, prev_t end
    prev_t = t
    if not final and not starts and t - last < 0.5 then return end
    last = t
    if args.progress then
      local line = ("%d %d %.6g"):format(step, steps, loss)
      if evaluating then
        line = line .. (" %d %d"):format(done, total) .. (what and (" " .. what) or "")
      end
      local ok, err = fileio.write(args.progress, line .. "\n")
      if not ok and not warned then
        io.stderr:write("train.lua: --progress ", tostring(err), " (training goes on)\n")
        warned = true
      end
    elseif status then
      if evaluating then
        local text = ("step %d/%d  loss %.4f  %s"):format(step, steps, loss,
          evaluating_text(done, total, what))
        if done == total then
          -- each part's end stays on the screen (and in a log), with its time
          status:update(("%s, %.1f s"):format(text, t - part_t), true)
          status:done()
        else
          -- (the start of each part shows at once in a log too)
          status:update(text, starts)
        end
      else
        status:update(("step %d/%d  loss %.4f"):format(step, steps, loss))
        if step == steps then status:done() end
      end
    end
    -- (a part that ended: the next call starts another, e.g. eval_lengths' next eval_scaling)
    if evaluating and done == total then part = nil end
  end

  if args.resume then
    local step, why, kind = rp.experiment.resumable(cfg, args.save)
    -- a file the run would refuse (another run's, not a checkpoint): said before training; a
    -- checkpoint without its state is gone on from (the curve so far is missing)
    if not step and kind == nil then cli.usage("--resume: " .. why) end
    -- the model of the finished run: nothing is left to train (and its curve is gone)
    if kind == "finished" then
      if root then
        print(("train.lua: --resume: %s; nothing to do%s"):format(why, fileio.exists(args.out)
          and (" (its result: %s)"):format(args.out) or ""))
      end
      return
    end
  end

  local run_opts = { save = args.save, save_every = args.save_every, resume = args.resume or nil,
    comm = comm }
  if args.checkpoint then
    local state, why = resume.check(rp, args.checkpoint, cfg)
    if not state then
      cli.usage(("--checkpoint %s; remove it or choose another file"):format(why))
    end
    if state == "fresh" and root then
      local ok, err = resume.start(args.checkpoint, cfg)
      if not ok then cli.usage("--checkpoint " .. tostring(err)) end
    end
    -- the state of the last step stays until the result is written (below)
    run_opts.save, run_opts.save_every, run_opts.resume, run_opts.keep_state = args.checkpoint,
      args.checkpoint_every, true, true
  end

  local started = os.time()
  local res = rp.experiment.run(cfg, progress, run_opts)
  if not root then return end -- rank 0 reports and writes
  -- with --checkpoint the model is at its part path until the result is written (below)
  if args.checkpoint then res.checkpoint = args.save end
  res.provenance = provenance.collect(rp, started)

  local function summary()
    local c = res.config
    local lines = {
      ("%s, pe %s, %d params, %d steps in %.1f s (%s), eval %.1f s"):format(c.task, c.pe,
        res.params, c.steps, res.seconds_train, res.tokens_per_s
          and ("%.0f tokens/s"):format(res.tokens_per_s) or "too short to measure",
        res.seconds_eval),
    }
    if res.ranks then
      lines[#lines + 1] = ("%d ranks (MPI), %d thread%s each, %.2f s in MPI_Allreduce"):format(
        res.ranks, res.threads, res.threads == 1 and "" or "s", res.comm_seconds)
    end
    if res.resumed_at and res.resumed_at > 0 then
      lines[#lines + 1] = ("resumed at step %d"):format(res.resumed_at)
    end
    if res.diverged then
      lines[#lines + 1] = "diverged: a training loss was not finite"
    elseif res.metric == "correct" then
      lines[#lines + 1] = ("correct %d of %d (%s%s), greedy %d; eval loss %.4f, final train "
        .. "loss %.4f"):format(res.correct, c.problems, c.decode,
          c.decode == "sample" and (", temperature " .. c.temperature) or "", res.correct_greedy,
          res.eval_loss, res.final_train_loss)
      for _, d in ipairs(res.by_digits or {}) do
        lines[#lines + 1] = ("  %2d digits: %d of %d"):format(d.digits, d.correct, c.problems)
      end
      for _, l in ipairs(res.by_length or {}) do
        lines[#lines + 1] = ("  length %d, %s: %d of %d"):format(l.length, l.scaling, l.correct,
          c.problems)
      end
    elseif res.lm then
      for _, split in ipairs { "valid", "test" } do
        local r = res.lm[split]
        lines[#lines + 1] = ("%s loss %.4f nats/token, perplexity %.2f, %s bits per byte (%d "
          .. "tokens)"):format(split, r.loss, r.perplexity, r.bits_per_byte
            and ("%.4f"):format(r.bits_per_byte) or "-", r.tokens)
      end
      lines[#lines + 1] = ("final train loss %.4f"):format(res.final_train_loss)
      for _, l in ipairs(res.by_length or {}) do
        lines[#lines + 1] = ("  length %d, %s: eval loss %.4f"):format(l.length, l.scaling, l.loss)
      end
    else
      lines[#lines + 1] = ("eval loss %.4f, final train loss %.4f"):format(res.eval_loss,
        res.final_train_loss)
      for _, l in ipairs(res.by_length or {}) do
        lines[#lines + 1] = ("  length %d, %s: eval loss %.4f"):format(l.length, l.scaling, l.loss)
      end
    end
    if res.exploded then
      lines[#lines + 1] = ("the loss exploded at step %d (above twice its best and above "
        .. "ln(vocab)); see the curve"):format(res.exploded_at)
    end
    if res.checkpoint then lines[#lines + 1] = "model saved to " .. res.checkpoint end
    return table.concat(lines, "\n")
  end

  if args.out then
    local ok, err = fileio.write(csv, tables.curve_csv(res))
    if ok and lengths_csv then ok, err = fileio.write(lengths_csv, tables.lengths_csv(res)) end
    if ok then ok, err = fileio.write(args.out, json.encode(res)) end
    if not ok then error(err, 0) end
  end
  if args.checkpoint then
    -- the result is written (the JSON last: the mark of a finished run), and only now the
    -- checkpoint becomes the --save file, or goes, with its state. Stopped before this, the run
    -- keeps its checkpoint and state of the last step: run again, it only evaluates.
    if args.save then
      local ok, err = os.rename(args.checkpoint, args.save)
      if not ok then error(("cannot move %s to --save: %s"):format(args.checkpoint, err), 0) end
    end
    resume.discard(args.checkpoint)
  end
  if not args.progress then print(summary()) end
end)
