--[[
  Appends IDs of one fresh segment (or one chunk of it) to a tag's list pool.
  KEYS[1]  list  {prefix}idmint:{tag}[:shard]:ids
  KEYS[2]  meta  {prefix}idmint:{tag}[:shard]:meta
  ARGV[1]  useFence  '1' to check the fence first (stale IDs are dropped, never mixed with new ones)
  ARGV[2..] the IDs, decimal strings, in order
  Returns  { code, length }
    code 0  pushed
    code 1  the pool was stale and was dropped, then pushed
]]
local list, meta = KEYS[1], KEYS[2]
local code = 0
if ARGV[1] == '1' and fence(meta, { list }) then
  code = 1
end
-- unpack() is limited to a few thousand values per call.
local n = #ARGV
local i = 2
while i <= n do
  local j = math.min(i + 3999, n)
  redis.call('RPUSH', list, unpack(ARGV, i, j))
  i = j + 1
end
return { code, redis.call('LLEN', list) }
