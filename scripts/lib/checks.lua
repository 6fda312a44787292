-- The checks of the identity scripts (rotation_identity.lua, linear_identity.lua, pe_identity.lua,
-- pe_identity_2d.lua) in one layout: the verdict first, PASS or FAIL at the same column in every
-- script, then what was checked; the numbers on the line below, under the label.
--
--   PASS  norm of the whole vector
--         max error 2.10e-07, tolerance 9.15e-05
--   PASS  before phi: the shift changes the output
--         difference 3.64e-01, must exceed 1.00e-03
--
--   local checks = require "lib.checks"
--   local c = checks.new([write])     write(line) prints a line (default: print)
--   c:close(label, err, tol)        passes when err <= tol (a NaN error fails)
--   c:apart(label, diff, least)     passes when diff > least: a difference that must be there
--   c:verdict(ok, label[, detail])  any other check, with its own line of numbers
--   c:note(line)                    a line of explanation under the last check
--   c:line(text)                    text at the label's column (a table's header row)
--   c:summary(name) -> status       "<name>: N passed, N failed" after a blank line; the exit
--                                   status for os.exit (0 when nothing failed, else 1)
local checks = {}

checks.INDENT = "  "                              -- before the verdict (a step's text indent)
checks.LABEL = checks.INDENT .. "      "          -- the label's column: after "PASS  "

local C = {}
C.__index = C

function checks.new(write)
  return setmetatable({ passed = 0, failed = 0, write = write or print }, C)
end

function C:verdict(ok, label, detail)
  if ok then self.passed = self.passed + 1 else self.failed = self.failed + 1 end
  self.write(checks.INDENT .. (ok and "PASS" or "FAIL") .. "  " .. label)
  if detail then self.write(checks.LABEL .. detail) end
  return ok
end

function C:close(label, err, tol)
  return self:verdict(err <= tol, label, ("max error %.2e, tolerance %.2e"):format(err, tol))
end

function C:apart(label, diff, least)
  return self:verdict(diff > least, label, ("difference %.2e, must exceed %.2e"):format(diff, least))
end

function C:note(line) self.write(checks.LABEL .. line) end

function C:line(text) self.write(checks.LABEL .. text) end

function C:summary(name)
  self.write("")
  self.write(("%s: %d passed, %d failed"):format(name, self.passed, self.failed))
  return self.failed == 0 and 0 or 1
end

return checks
