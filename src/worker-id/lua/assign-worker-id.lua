--[[
  Assigns a worker id to an identity (app:ip:port), once: a known identity gets its old id back.
  Ids are handed out in order and never reused, so two identities never share one.

  KEYS[1] hash: identity -> id, plus the reserved field "#next" (the next unassigned id)
  ARGV[1] identity, "app:ip:port" (always contains ':', so it never meets "#next")
  ARGV[2] maxWorkerId

  Returns: the id (>= 0), or -1 when the id space is exhausted (nothing is written then).
]]
local id = redis.call('HGET', KEYS[1], ARGV[1])
if id then
  return tonumber(id)
end
local nextId = tonumber(redis.call('HGET', KEYS[1], '#next') or '0')
if nextId > tonumber(ARGV[2]) then
  return -1
end
redis.call('HSET', KEYS[1], ARGV[1], nextId, '#next', nextId + 1)
return nextId
