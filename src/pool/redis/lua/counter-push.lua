--[[
  Queues one fresh segment as a range behind a counter pool's current one.
  KEYS[1]  state   {prefix}idmint:{tag}[:shard]:counter
  KEYS[2]  ranges  {prefix}idmint:{tag}[:shard]:ranges
  KEYS[3]  meta    {prefix}idmint:{tag}[:shard]:meta
  ARGV[1]  useFence  '1' to check the fence first
  ARGV[2]  start     first ID, decimal
  ARGV[3]  end       last ID, decimal (inclusive)
  Returns  { code, depth }   code 0 queued; 1 stale pool dropped, then queued
]]
local state, ranges, meta = KEYS[1], KEYS[2], KEYS[3]
local code = 0
if ARGV[1] == '1' and fence(meta, { state, ranges }) then
  code = 1
end
local s, e = tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('RPUSH', ranges, fmt(s) .. '-' .. fmt(e))
local queued = redis.call('HINCRBY', state, 'queued', e - s + 1)
local v = redis.call('HMGET', state, 'cur', 'last')
local cur, last = tonumber(v[1] or '1'), tonumber(v[2] or '0')
local depth = queued
if cur <= last then depth = depth + (last - cur + 1) end
return { code, depth }
