--[[
  Takes worker id ARGV[1] for a new holder when its lease is free (or is one of the tokens in
  ARGV[6..]: earlier processes of the taker's data directory, which are gone).

  KEYS[1] hash, the registry: field "<id>" = "<markMs>|<holder token>|<identity>" (the mark: no ID
          under the id is stamped above it), "#fence" = run_id:master_replid of the Redis that last
          wrote the registry, "#guard" = a floor (epoch ms) every take honours
  KEYS[2] string, the lease of the id: "<token>|<identity>", expiring after the lease (PX)
  ARGV[1] worker id
  ARGV[2] the new holder's token
  ARGV[3] its identity
  ARGV[4] lease, ms
  ARGV[5] the caller's clock plus two leases: the guard, set when this Redis is not the one that
          wrote the registry (a restart, a restore, a failover, or a new registry), since what it
          holds may lack acknowledged writes
  ARGV[6..] tokens whose live lease may be taken over

  Returns: {1, floorMs, guardMs, previous holder token or ""} when taken;
           {0, holder identity, holder token} when the lease is live.
]]
local function current_run_id()
  local info = redis.call('INFO', 'server', 'replication')
  return string.match(info, 'run_id:(%x+)') .. ':' .. (string.match(info, 'master_replid:(%x+)') or '')
end

local registry, lease = KEYS[1], KEYS[2]
local id, token, identity = ARGV[1], ARGV[2], ARGV[3]

local run = current_run_id()
if redis.call('HGET', registry, '#fence') ~= run then
  local guard = tonumber(redis.call('HGET', registry, '#guard') or '0')
  if tonumber(ARGV[5]) > guard then redis.call('HSET', registry, '#guard', ARGV[5]) end
  redis.call('HSET', registry, '#fence', run)
end
local guard = redis.call('HGET', registry, '#guard') or '0'

local current = redis.call('GET', lease)
if current then
  local holder = string.match(current, '^([^|]*)')
  local successor = false
  for i = 6, #ARGV do
    if ARGV[i] == holder then successor = true end
  end
  if not successor then
    return {0, string.sub(current, #holder + 2), holder}
  end
end

redis.call('SET', lease, token .. '|' .. identity, 'PX', ARGV[4])
local mark, previous = '0', ''
local record = redis.call('HGET', registry, id)
if record then
  mark, previous = string.match(record, '^([^|]*)|([^|]*)')
end
redis.call('HSET', registry, id, mark .. '|' .. token .. '|' .. identity)
return {1, mark, guard, previous}
