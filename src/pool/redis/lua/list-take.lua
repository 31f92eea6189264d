--[[
  Takes up to `count` IDs from a tag's list pool together with the length left, atomically.
  KEYS[1]  list  {prefix}idmint:{tag}[:shard]:ids
  KEYS[2]  meta  {prefix}idmint:{tag}[:shard]:meta  (fence, target, demand ring)
  ARGV[1]  count          IDs wanted, integer >= 1
  ARGV[2]  bucketSeconds  width of a demand bucket
  ARGV[3]  slots          number of demand buckets kept
  ARGV[4]  useFence       '1' to check the fence (see fence.lua)
  Returns  { code, remaining, target, ids }
    code  0  served (ids may be fewer than count, or empty)
    code  1  the pool was stale (another Redis run) and was dropped; ids empty
    code -1  count is not a positive integer
  target is the refill processor's last target depth, or -1 when none was set.
]]
local list, meta = KEYS[1], KEYS[2]
local count = tonumber(ARGV[1])
if not count or count < 1 or count ~= math.floor(count) then
  return { -1, 0, -1, {} }
end
local code = 0
if ARGV[4] == '1' and fence(meta, { list }) then
  code = 1
end
record_demand(meta, count, tonumber(ARGV[2]), tonumber(ARGV[3]))
local ids = {}
if code == 0 then
  ids = redis.call('LPOP', list, count) or {}
end
local remaining = redis.call('LLEN', list)
local target = tonumber(redis.call('HGET', meta, 'target') or '-1')
return { code, remaining, target, ids }
