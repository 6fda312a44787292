-- The terminal of the experiment scripts: whether a file descriptor is one (term.isatty), the
-- width of stderr's (term.columns), a text cut to a width (term.fit) and the progress line of a
-- script (term.status).
--
-- Library (Debian package): luv (whether stderr is a terminal, its width, the clock).
local uv = require "luv"

local term = {}

-- isatty(fd) -> whether file descriptor fd (2: stderr) is a terminal (libuv; no shell started).
function term.isatty(fd)
  return uv.guess_handle(fd) == "tty"
end

-- columns() -> the width of the terminal on stderr: its window size, else $COLUMNS (a number
-- from 20 to 10000), else 80.
function term.columns()
  if term.isatty(2) then
    local tty = uv.new_tty(2, false)
    if tty then
      local w = tty:get_winsize()
      -- libuv never closes fds 0..2; the handle's close must complete in the loop before its
      -- memory goes: a handle closed but left in the loop crashed every process that asked
      -- for the width on a terminal (SIGSEGV inside luv when the Lua state closed at exit)
      tty:close()
      uv.run("nowait")
      if math.type(w) == "integer" and w >= 20 then return w end
    end
  end
  local c = math.tointeger(tonumber(os.getenv("COLUMNS") or ""))
  if c and c >= 20 and c <= 10000 then return c end
  return 80
end

-- fit(text, width) -> text cut to width characters (bytes), ending in "..." when cut.
function term.fit(text, width)
  if #text <= width then return text end
  if width <= 3 then return text:sub(1, width) end
  return text:sub(1, width - 3) .. "..."
end

-- status([every]) -> the progress line of a script, on stderr:
--   s:update(text)  on a terminal without NO_COLOR: text rewritten in place ("\r"), cut to the
--                   terminal's width less one column, so it never wraps; otherwise (stderr not a
--                   terminal, or NO_COLOR set to anything but ""): text as a plain line, at most
--                   one every `every` seconds (default 30), the first one `every` seconds in
--                   (update(text, true) writes at once)
--   s:clear()       removes the line (on a terminal), before other output to stderr
--   s:done()        ends the line (on a terminal), leaving it on the screen
--   s.live          whether the line is rewritten in place
function term.status(every)
  every = every or 30
  local function now() return uv.hrtime() / 1e9 end
  local no_color = os.getenv("NO_COLOR")
  local s = { live = term.isatty(2) and (no_color == nil or no_color == "") }
  local shown, last = "", now()
  function s:update(text, force)
    if self.live then
      text = term.fit(text, term.columns() - 1)
      io.stderr:write("\r", text, (" "):rep(math.max(0, #shown - #text)))
      shown = text
    elseif force or now() - last >= every then
      io.stderr:write(text, "\n")
      last = now()
    else
      return
    end
    io.stderr:flush()
  end
  function s:clear()
    if self.live and #shown > 0 then
      io.stderr:write("\r", (" "):rep(#shown), "\r")
      io.stderr:flush()
      shown = ""
    end
  end
  function s:done()
    if self.live and #shown > 0 then
      io.stderr:write("\n")
      io.stderr:flush()
      shown = ""
    end
  end
  return s
end

return term
