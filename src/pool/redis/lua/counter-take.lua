--[[
  Takes up to `count` IDs from a counter pool: the current range (cur..last) in a hash, then
  queued ranges "start-end" from a list. Segments of one tag are not contiguous (concurrent
  refills interleave), so each range is consumed on its own; nothing assumes `max += step`.
  KEYS[1]  state   {prefix}idmint:{tag}[:shard]:counter  (cur, last, queued)
  KEYS[2]  ranges  {prefix}idmint:{tag}[:shard]:ranges   (list of "start-end")
  KEYS[3]  meta    {prefix}idmint:{tag}[:shard]:meta
  ARGV[1]  count          IDs wanted, integer >= 1
  ARGV[2]  bucketSeconds  width of a demand bucket
  ARGV[3]  slots          number of demand buckets kept
  ARGV[4]  useFence       '1' to check the fence
  Returns  { code, remaining, target, ranges }
    ranges is a flat list start1, end1, start2, end2... (decimal strings, inclusive)
    code  0  served;  1  stale pool dropped, nothing served;  -1  bad count
]]
local state, ranges, meta = KEYS[1], KEYS[2], KEYS[3]
local count = tonumber(ARGV[1])
if not count or count < 1 or count ~= math.floor(count) then
  return { -1, 0, -1, {} }
end
local code = 0
if ARGV[4] == '1' and fence(meta, { state, ranges }) then
  code = 1
end
record_demand(meta, count, tonumber(ARGV[2]), tonumber(ARGV[3]))
local v = redis.call('HMGET', state, 'cur', 'last', 'queued')
local cur, last, queued = tonumber(v[1] or '1'), tonumber(v[2] or '0'), tonumber(v[3] or '0')
local out = {}
local want = count
if code == 0 then
  while want > 0 do
    if cur > last then
      local r = redis.call('LPOP', ranges)
      if not r then break end
      local s, e = string.match(r, '^(%d+)-(%d+)$')
      cur, last = tonumber(s), tonumber(e)
      queued = queued - (last - cur + 1)
    end
    local n = math.min(want, last - cur + 1)
    out[#out + 1] = fmt(cur)
    out[#out + 1] = fmt(cur + n - 1)
    cur = cur + n
    want = want - n
  end
  redis.call('HSET', state, 'cur', fmt(cur), 'last', fmt(last), 'queued', fmt(queued))
end
local remaining = queued
if cur <= last then remaining = remaining + (last - cur + 1) end
local target = tonumber(redis.call('HGET', meta, 'target') or '-1')
return { code, remaining, target, out }
