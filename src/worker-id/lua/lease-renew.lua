--[[
  Renews a holder's lease and raises its id's mark, if the registry still names the holder and was
  written by this same Redis (else its holder must take the id again, through the guard).

  KEYS[1] hash, the registry (see lease-take.lua)
  KEYS[2] string, the id's lease
  ARGV[1] worker id
  ARGV[2] the holder's token
  ARGV[3] lease, ms
  ARGV[4] the new mark, epoch ms (the mark never goes down here)

  Returns: 1 renewed, 0 lost (another holder, no record, or the registry may have lost writes).
]]
local function current_run_id()
  local info = redis.call('INFO', 'server', 'replication')
  return string.match(info, 'run_id:(%x+)') .. ':' .. (string.match(info, 'master_replid:(%x+)') or '')
end

local registry, lease = KEYS[1], KEYS[2]
local id, token = ARGV[1], ARGV[2]
if redis.call('HGET', registry, '#fence') ~= current_run_id() then return 0 end
local record = redis.call('HGET', registry, id)
if not record then return 0 end
local mark, holder, identity = string.match(record, '^([^|]*)|([^|]*)|(.*)$')
if holder ~= token then return 0 end
local current = redis.call('GET', lease)
-- A lease key that expired (slow renewals, eviction) while the record still names the holder: nobody
-- took the id, so the holder may extend it.
if current and string.match(current, '^([^|]*)') ~= token then return 0 end
redis.call('SET', lease, token .. '|' .. identity, 'PX', ARGV[3])
if tonumber(ARGV[4]) > tonumber(mark) then mark = ARGV[4] end
redis.call('HSET', registry, id, mark .. '|' .. token .. '|' .. identity)
return 1
