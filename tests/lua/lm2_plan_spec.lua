-- results/lm2_plan.sh's lm2_plan_rows and results/lm2_cpu_monitor.py's read_plan, the two readers
-- of the language-model study's plan (results/lm2_plan.tsv), by the same rules: the same plans
-- read, the same refused with the same reason (the file, the line and what is wrong).
local dir_of = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir_of .. "?.lua;" .. package.path
local h = require "helpers"
local q = h.sh_quote

local RESULTS = dir_of .. "../../results/"
local HEAD = "size\tfolder\tmethods\tseeds\tsteps\trun_cpu_seconds\n"

-- the shell reader: its rows, or nil and its reason
local function sh_rows(path)
  local out, err, code = h.run("bash -c " .. q(". " .. q(RESULTS .. "lm2_plan.sh")
    .. " && lm2_plan_rows " .. q(path)))
  assert.are.equal("", err)
  if code ~= 0 then return nil, out end
  return out
end

-- the Python reader: its rows, as the shell reader prints them but for the methods and seeds
-- (size folder steps cpu_seconds), or nil and its reason
local function py_rows(path)
  local out, err, code = h.run(h.PY .. " -c " .. q("import sys; sys.path.insert(0, sys.argv[1]); "
    .. "import lm2_cpu_monitor as m\nfor r in m.read_plan(sys.argv[2]): print(*r)") .. " "
    .. q(RESULTS) .. " " .. q(path))
  if code ~= 0 then
    assert.are.equal(2, code, err)
    assert.are.equal("", out)
    local why = err:match("^lm2_cpu_monitor%.py: cannot read the plan: (.*)$")
    assert.truthy(why, err)
    return nil, why
  end
  assert.are.equal("", err)
  return out
end

describe("the plan's two readers", function()
  it("read the committed plan", function()
    assert.are.equal("small lm2-s rope,roper,none 24 800\nmedium lm2-m rope,roper 24 2200\n"
      .. "large lm2-l rope,roper 14 7100\n", sh_rows(RESULTS .. "lm2_plan.tsv"))
    assert.are.equal("small lm2-s 800 185.0\nmedium lm2-m 2200 726.0\nlarge lm2-l 7100 4780.0\n",
      py_rows(RESULTS .. "lm2_plan.tsv"))
  end)

  it("skip comments and empty lines, take columns in any order and CRLF line ends", function()
    local dir = h.tmpdir()
    local path = dir .. "/plan.tsv"
    h.write(path, "# a plan\r\n\r\nrun_cpu_seconds\tsteps\tseeds\tmethods\tfolder\tsize\tnote\r\n"
      .. "\r\n# the small size\r\n12.5\t800\t3\trope  none\tlm2-s\tsmall\tx\r\n\r\n")
    assert.are.equal("small lm2-s rope,none 3 800\n", sh_rows(path))
    assert.are.equal("small lm2-s 800 12.5\n", py_rows(path))
    h.remove_tree(dir)
  end)

  it("refuse a plan with the same reason", function()
    local dir = h.tmpdir()
    local path = dir .. "/plan.tsv"
    local row = "small\tlm2-s\trope roper\t2\t800\t185\n"
    local cases = {
      { "size\tfolder\tmethods\tseeds\tsteps\n" .. row, "line 1: no column run_cpu_seconds" },
      { "size\tmethods\tseeds\tsteps\trun_cpu_seconds\n", "line 1: no column folder" },
      { "# c\n" .. HEAD .. "small\tlm2 s\trope\t2\t800\t185\n",
        "line 3: folder \"lm2 s\" is not a name" },
      { HEAD .. "\tlm2-s\trope\t2\t800\t185\n", "line 2: size \"\" is not a name" },
      { HEAD .. row .. row:gsub("lm2%-s", "lm2-t"), "line 3: the size small again" },
      { HEAD .. "small\tlm2-s\trope $(x)\t2\t800\t185\n",
        "line 2: method \"$(x)\" is not a name" },
      { HEAD .. "small\tlm2-s\t \t2\t800\t185\n", "line 2: no methods" },
      { HEAD .. "small\tlm2-s\trope\tmany\t800\t185\n",
        "line 2: seeds \"many\" is not a count > 0" },
      { HEAD .. "small\tlm2-s\trope\t0\t800\t185\n", "line 2: seeds \"0\" is not a count > 0" },
      { HEAD .. "small\tlm2-s\trope\t2\t0\t185\n", "line 2: steps \"0\" is not a count > 0" },
      { HEAD .. "small\tlm2-s\trope\t2\t800\n",
        "line 2: run_cpu_seconds \"\" is not a number > 0" },
      { HEAD .. "small\tlm2-s\trope\t2\t800\t0.0\n",
        "line 2: run_cpu_seconds \"0.0\" is not a number > 0" },
      { HEAD .. "small\tlm2-s\trope\t2\t800\t185s\n",
        "line 2: run_cpu_seconds \"185s\" is not a number > 0" },
      { HEAD .. "small\t..\trope\t2\t800\t185\n", "line 2: folder \"..\" is not a name" },
      { HEAD .. "small\tlm2-s\trope --steps\t2\t800\t185\n",
        "line 2: method \"--steps\" is not a name" },
      { HEAD .. row .. row:gsub("^small", "medium"), "line 3: the folder lm2-s again" },
      { HEAD .. row:gsub("^small", "trend"),
        "line 2: the size trend (the word for the trend over the sizes)" },
      { "# only a comment\n", "no size" },
      { HEAD, "no size" },
    }
    for _, c in ipairs(cases) do
      h.write(path, c[1])
      local want = path .. ": " .. c[2] .. "\n"
      local rows, why = sh_rows(path)
      assert.is_nil(rows, c[1])
      assert.are.equal(want, why)
      rows, why = py_rows(path)
      assert.is_nil(rows, c[1])
      assert.are.equal(want, why)
    end
    os.remove(path)
    assert.are.equal(path .. ": cannot read it\n", select(2, sh_rows(path)))
    assert.are.equal(path .. ": cannot read it\n", select(2, py_rows(path)))
    h.remove_tree(dir)
  end)
end)
