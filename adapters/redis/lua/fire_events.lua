-- fire_events.lua: keep the events of one run that never fired, numbered.
--
-- KEYS[1]  fired      hash    JSON [kind, subject] -> sequence number
-- KEYS[2]  event_seq  string  the run's last sequence number
-- KEYS[3]  events     stream  one entry per fired event, id "<seq>-0"
--
-- ARGV, five per event in firing order:
--          fired field (JSON [kind, subject]), kind, subject,
--          payload (JSON), ts
--
-- Returns one number per event: its new sequence number, or 0 when an
-- event with the same kind and subject fired before (also earlier in ARGV).

local result = {}
for i = 1, #ARGV, 5 do
  local seq = tonumber(redis.call('GET', KEYS[2]) or '0') + 1
  if redis.call('HSETNX', KEYS[1], ARGV[i], seq) == 1 then
    redis.call('INCR', KEYS[2])
    redis.call('XADD', KEYS[3], seq .. '-0',
      'kind', ARGV[i + 1], 'subject', ARGV[i + 2],
      'payload', ARGV[i + 3], 'ts', ARGV[i + 4])
    result[#result + 1] = seq
  else
    result[#result + 1] = 0
  end
end
return result
