-- append_history.lua: keep a look's summary unless the run's last has as
-- many trials; past the bound, drop every other point between the first
-- and the newest half (monitor.stores.history.to_thin).
--
-- KEYS[1]  history  list  look summaries as JSON, oldest first
--
-- ARGV[1]  the point (JSON with a "trials" field)
-- ARGV[2]  its trials
-- ARGV[3]  the bound (points kept per run)
--
-- Returns 1 when the point was kept, 0 when the last had as many trials.

local last = redis.call('LINDEX', KEYS[1], -1)
local trials = tonumber(ARGV[2])
if last and cjson.decode(last)['trials'] >= trials then
  return 0
end
local count = redis.call('RPUSH', KEYS[1], ARGV[1])
local limit = tonumber(ARGV[3])
if count <= limit then
  return 1
end
local points = redis.call('LRANGE', KEYS[1], 0, -1)
local recent_from = count - math.floor(limit / 2)
local kept = {}
for index = 1, count do
  -- 0-based position index - 1; drop 2, 4, ... below recent_from.
  local position = index - 1
  if position < 2 or position >= recent_from or position % 2 == 1 then
    kept[#kept + 1] = points[index]
  end
end
redis.call('DEL', KEYS[1])
for first = 1, #kept, 500 do
  redis.call('RPUSH', KEYS[1], unpack(kept, first, math.min(first + 499, #kept)))
end
return 1
