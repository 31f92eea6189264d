--[[
  Records demand for a pool whose takes do not run through a Redis script (Kafka pool topics),
  so its refills size targets from the same demand ring as Redis pools.
  KEYS[1]  meta  {prefix}idmint:{tag}[:shard]:meta
  ARGV[1]  count          IDs asked for, integer >= 1
  ARGV[2]  bucketSeconds  width of a demand bucket
  ARGV[3]  slots          number of demand buckets kept
  Returns  0 recorded;  -1 count is not a positive integer
]]
local count = tonumber(ARGV[1])
if not count or count < 1 or count ~= math.floor(count) then
  return -1
end
record_demand(KEYS[1], count, tonumber(ARGV[2]), tonumber(ARGV[3]))
return 0
