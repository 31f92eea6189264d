--[[
  Ends a holder's lease: sets its id's mark to the highest timestamp the holder approved (it has
  stopped approving) and deletes the lease, if the registry still names the holder.

  KEYS[1] hash, the registry (see lease-take.lua)
  KEYS[2] string, the id's lease
  ARGV[1] worker id
  ARGV[2] the holder's token
  ARGV[3] the final mark, epoch ms

  Returns: 1 released, 0 not this holder's any more (nothing written).
]]
local registry, lease = KEYS[1], KEYS[2]
local id, token = ARGV[1], ARGV[2]
local record = redis.call('HGET', registry, id)
if not record then return 0 end
local holder, identity = string.match(record, '^[^|]*|([^|]*)|(.*)$')
if holder ~= token then return 0 end
redis.call('HSET', registry, id, ARGV[3] .. '|' .. token .. '|' .. identity)
local current = redis.call('GET', lease)
if current and string.match(current, '^([^|]*)') == token then redis.call('DEL', lease) end
return 1
