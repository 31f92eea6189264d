-- Shared prologue (prepended to every pool script by scripts.ts, not loaded alone).
-- The fence: a pool's meta hash records the run_id and replication id of the Redis that wrote
-- it. A Redis restored from an older snapshot has another run_id; a promoted replica (or an old
-- master promoted again) has another master_replid. Either may hold IDs already handed out, so
-- the pool is dropped before anything is served or added (invariant 1).
-- Requires: META (the meta key) and DATA (the keys holding IDs) to be set by the caller.
-- Sets: FENCED = true when stale data was dropped.
local function current_run_id()
  -- One INFO call for both sections (Redis 7): this runs on every take.
  local info = redis.call('INFO', 'server', 'replication')
  return string.match(info, 'run_id:(%x+)') .. ':' .. (string.match(info, 'master_replid:(%x+)') or '')
end

local function fence(meta, data)
  local run_id = current_run_id()
  local stored = redis.call('HGET', meta, 'fence')
  if stored == run_id then
    return false
  end
  local dropped = false
  for i = 1, #data do
    if redis.call('DEL', data[i]) > 0 then dropped = true end
  end
  redis.call('HSET', meta, 'fence', run_id)
  -- A missing fence with no data is a new pool, not a stale one.
  return dropped or stored ~= false
end

-- Demand: a ring of `slots` buckets, `bucketSeconds` wide, in the meta hash (e<i> = bucket
-- number, c<i> = IDs asked for). Redis time keeps every process on one clock.
local function record_demand(meta, wanted, bucketSeconds, slots)
  local now = tonumber(redis.call('TIME')[1])
  local bucket = math.floor(now / bucketSeconds)
  local slot = bucket % slots
  local e = 'e' .. slot
  local c = 'c' .. slot
  if tonumber(redis.call('HGET', meta, e) or '-1') ~= bucket then
    redis.call('HSET', meta, e, bucket, c, 0)
  end
  redis.call('HINCRBY', meta, c, wanted)
end

local function fmt(n)
  return string.format('%.0f', n)
end
