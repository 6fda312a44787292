-- The hash of the portable fingerprints (run.lua, block.lua): FNV-1a (64 bits) over the float32
-- bits of a list of tensors, in order, as 16 hexadecimal digits (Lua's integers wrap at 2^64).
return function(tensors)
  local h = -3750763034362895579 -- 0xcbf29ce484222325
  for _, t in ipairs(tensors) do
    for _, v in ipairs(t:contiguous():view { t:numel() }:totable()) do
      for i = 1, 4 do
        h = (h ~ string.byte(string.pack("<f", v), i)) * 0x100000001b3
      end
    end
  end
  return ("%016x"):format(h)
end
