-- The files and folders of the experiment scripts: atomic writes and whole reads through the
-- module's rp.write_file / rp.read_file (core's writer and reader: one atomic writer for every
-- file roper writes), the checks of an output and an input path before any work (usage
-- problems), folders made with their parents, and penlight's path helpers.
--
-- Libraries (Debian packages): penlight and lfs (paths, folders).
local lfs = require "lfs"
local pldir = require "pl.dir"
local plpath = require "pl.path"
local rp = require "roper"
local cli = require "lib.cli"

local fileio = {}

-- write(path, text) -> true | nil, message: the module's atomic writer (rp.write_file, core's
-- rp_file_write_atomic): a reader never sees a partial file, an interrupted write leaves the old
-- file (or none), the data is fsync'ed before the rename, and what a killed write left
-- ("<path>.tmp.<pid>") is removed by the next write to path. Anything at path but a regular file
-- (a folder, a FIFO) is refused before anything is written. Messages name path, never the
-- temporary file.
function fileio.write(path, text)
  return rp.write_file(path, text)
end

-- The reason of a message "<path>: <reason>" (the message itself when it does not start so).
local function reason(msg, path)
  msg = tostring(msg)
  local head = path .. ": "
  return msg:sub(1, #head) == head and msg:sub(#head + 1) or msg
end

-- check_output(path, what[, shown]): before any work, makes sure a file can be written at path:
-- path is not empty, its folder exists (created when missing), path is not a folder (nor a name
-- ending in "/"), and a probe file "<path>.probe" can be created and removed there. An empty
-- regular file already at "<path>.probe" is the leftover of a probe cut short (kill -9 between
-- its write and its removal) and is removed; anything else there is left alone and the probe
-- skipped. Raises a usage problem naming `what` (the option, e.g. "--out") and shown (default
-- path: the name the user gave), and with shown, the path in the way ("--out o: o/runs/probe.json
-- is a folder in the way of its files", "--out o: cannot create o/runs (o/runs is a regular file,
-- not a folder)").
function fileio.check_output(path, what, shown)
  if path == "" then cli.usage(("%s: a file name expected, got an empty one"):format(what)) end
  -- (a name ending in "/" is a folder's, there or not; a file of shown's in the way is named)
  if plpath.isdir(path) or path:sub(-1) == "/" then
    cli.usage(shown and ("%s %s: %s is a folder in the way of its files"):format(what, shown, path)
      or ("%s %s: is a folder, not a file"):format(what, path))
  end
  shown = shown or path
  local dir = plpath.dirname(path)
  if dir ~= "" then
    local ok, err = fileio.mkdir(dir)
    if not ok then
      cli.usage(("%s %s: cannot create %s (%s)"):format(what, shown,
        shown == path and "its folder" or dir, reason(err, dir)))
    end
  end
  local probe = lfs.attributes(path .. ".probe")
  if probe and (probe.mode ~= "file" or probe.size ~= 0) then return end
  local ok, err = fileio.write(path .. ".probe", "")
  if not ok then
    cli.usage(("%s %s: cannot write there (%s)"):format(what, shown, reason(err, path .. ".probe")))
  end
  os.remove(path .. ".probe")
end

-- same_path(a, b) -> true when the paths name one file, as the system resolves them: both there,
-- the same device and inode (a hard or symbolic link to it); one there, not; neither there, the
-- same name in the same folder (the folders' device and inode, through any symbolic link or "..";
-- where a folder is not there either, the absolute paths once "." and ".." are resolved as text).
function fileio.same_path(a, b)
  local x, y = lfs.attributes(a), lfs.attributes(b)
  if x and y then return x.dev == y.dev and x.ino == y.ino end
  if x or y or plpath.basename(a) ~= plpath.basename(b) then return false end
  local fa, fb = plpath.dirname(plpath.abspath(a)), plpath.dirname(plpath.abspath(b))
  local da, db = lfs.attributes(fa), lfs.attributes(fb)
  if da and db then return da.dev == db.dev and da.ino == db.ino end
  return plpath.normpath(plpath.abspath(a)) == plpath.normpath(plpath.abspath(b))
end

-- same_device(a, b) -> true when the folders of the paths a and b (both there) are on one file
-- system (a rename between them works); true when either cannot be told.
function fileio.same_device(a, b)
  local da = lfs.attributes(plpath.dirname(plpath.abspath(a)), "dev")
  local db = lfs.attributes(plpath.dirname(plpath.abspath(b)), "dev")
  return da == nil or db == nil or da == db
end

-- lfs's word for a kind of file in the words of the C core's messages ("a folder", "a FIFO").
local KIND = { directory = "a folder", ["named pipe"] = "a FIFO",
  ["char device"] = "a character device", ["block device"] = "a block device",
  socket = "a socket", link = "a symbolic link" }
local function kind_of(mode) return KIND[mode] or "an unknown kind of file" end

-- check_input(path, what): path names a readable regular file; else a usage problem.
function fileio.check_input(path, what)
  local mode = lfs.attributes(path, "mode")
  if mode == nil then
    cli.usage(("%s %s: no such file"):format(what, path))
  elseif mode ~= "file" then
    cli.usage(("%s %s: not a regular file (%s)"):format(what, path, kind_of(mode)))
  end
end

-- check_folder(dir, what): before any work, makes sure the output folder dir is there (created
-- when missing): a usage problem naming `what` and dir when dir is empty, is there but not a
-- folder ("--out x: not a folder (a regular file)") or cannot be made ("--out f/x: cannot create
-- it (f is a regular file, not a folder)").
function fileio.check_folder(dir, what)
  if dir == "" then cli.usage(("%s: a folder name expected, got an empty one"):format(what)) end
  local mode = lfs.attributes(dir, "mode")
  if mode and mode ~= "directory" then
    cli.usage(("%s %s: not a folder (%s)"):format(what, dir, mode == "file" and "a regular file"
      or kind_of(mode)))
  end
  local ok, err = fileio.mkdir(dir)
  if not ok then cli.usage(("%s %s: cannot create it (%s)"):format(what, dir, reason(err, dir))) end
end

-- check_output_folder(dir, what): check_folder, then that a comparison or sweep can write its
-- files in dir/runs (check_output of a file there, named as dir).
function fileio.check_output_folder(dir, what)
  fileio.check_folder(dir, what)
  fileio.check_output(fileio.join(dir, "runs", "probe.json"), what, dir)
end

-- read(path) -> text | nil, message: the whole file (rp.read_file, core's reader, up to 1 GiB);
-- anything but a regular file is refused before it is opened ("f: not a regular file (a FIFO)":
-- opening a FIFO would wait for a writer, and a folder opens but does not read)
function fileio.read(path)
  return rp.read_file(path)
end

-- mkdir(path) -> true | nil, message (creates parents; fine when it exists); a part of path that
-- is not a folder is named ("a/f/b: a/f is a regular file, not a folder"; a symbolic link to
-- nothing: "a/l/b: a/l is a symbolic link to nothing, not a folder")
function fileio.mkdir(path)
  if plpath.isdir(path) then return true end
  local ok, err = pldir.makepath(path)
  if ok then return true end
  -- a part of the path that is there but not a folder, said as such (mkdir says "File exists")
  local p = path
  repeat
    local mode = lfs.attributes(p, "mode")
    if not mode and lfs.symlinkattributes(p, "mode") == "link" then
      return nil, ("%s: %s is a symbolic link to nothing, not a folder"):format(path, p)
    end
    if mode and mode ~= "directory" then
      return nil, ("%s: %s is %s, not a folder"):format(path, p,
        mode == "file" and "a regular file" or kind_of(mode))
    end
    local up = plpath.dirname(p)
    if up == p then break end
    p = up
  until p == "" or mode
  return nil, path .. ": " .. tostring(err)
end

fileio.exists = plpath.exists
fileio.abspath = plpath.abspath
fileio.join = plpath.join
fileio.dirname = plpath.dirname

return fileio
