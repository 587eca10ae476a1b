-- apply_trials.lua: classify and record one chunk of one run's trials.
--
-- KEYS[1]  trials  hash  JSON [model, question, prior, trial] -> category
-- KEYS[2]  counts  hash  JSON [model, question, prior, category] -> trials
-- KEYS[3]  totals  hash  trials | duplicates | corrections -> count;
--                        version -> how many chunks changed the counts
-- KEYS[4]  costs   hash  JSON [model, "trials"|"tokens"|"seconds"] -> sum
-- KEYS[5]  changes stream  one entry per version, id "<version>-0": field
--                        w the writer; i the changed counts cells by number
--                        (KEYS[7]), comma-separated; n their deltas, in the
--                        same order; c the cost sums as JSON [[model,
--                        trials, tokens, seconds], ...]; capped at about
--                        10,000 entries
-- KEYS[6]  cell_numbers hash  counts field (as in KEYS[2]) -> its number
-- KEYS[7]  cells   list  the counts fields in number order (from 0), so a
--                        reader of the log decodes each field once
--
-- ARGV[1]  n, the number of trials in the chunk
-- ARGV[2]  r, the number of distinct rows
-- ARGV[3 .. r+2]  the rows: JSON [model, question, prior] (prior 0 or 1)
-- ARGV[r+3 .. r+n+2]  the trials in delivery order, one string each:
--          "<row number>:<category>:<trial id as a JSON string>"
--          (two decimal integers, then the JSON text verbatim)
-- ARGV[r+n+3 ..]  four per trial that reported a cost: trial number,
--          model as a JSON string, tokens, seconds ("" when not reported)
-- ARGV[#ARGV]  the writer's id, kept in the change entry so it can skip
--          its own changes
--
-- Returns "<version>|<previous categories>": the run's version after this
-- chunk, then the previous category of every trial, comma-separated, -1 for
-- a new one. A repeat inside the chunk sees the delivery before it, as
-- monitor.ledger does. Every read happens before the first write, so an
-- error (a key of the wrong type) leaves the keys untouched.

local n, r = tonumber(ARGV[1]), tonumber(ARGV[2])
local heads = {}
for row = 1, r do
  heads[row] = string.sub(ARGV[row + 2], 1, -2) .. ','
end
local trial_heads, fields, categories = {}, {}, {}
for i = 1, n do
  local row, category, trial = string.match(ARGV[r + 2 + i], '^(%d+):(%d+):(.*)$')
  local head = heads[tonumber(row)]
  trial_heads[i] = head
  fields[i] = head .. trial .. ']'
  categories[i] = category
end
local cost_at = {}
local writer = ARGV[#ARGV]
for j = r + n + 3, #ARGV - 1, 4 do
  cost_at[tonumber(ARGV[j])] = j
end

-- unpack() is bounded by the Lua stack, so long argument lists go in slices.
local SLICE = 1000
local stored = {}
for first = 1, n, SLICE do
  local values = redis.call('HMGET', KEYS[1],
    unpack(fields, first, math.min(first + SLICE - 1, n)))
  for k = 1, #values do
    stored[first + k - 1] = values[k]
  end
end

-- The log's newest version: an entry id must grow, and a failing XADD after
-- the writes below would leave them half done.
local newest = redis.call('XREVRANGE', KEYS[5], '+', '-', 'COUNT', 1)
local logged = 0
if newest[1] then
  logged = tonumber(string.match(newest[1][1], '^(%d+)'))
end

local latest, changed, deltas, spent, previous = {}, {}, {}, {}, {}
local new, duplicates, corrections = 0, 0, 0
local function add(field, delta)
  deltas[field] = (deltas[field] or 0) + delta
end
for i = 1, n do
  local field, category = fields[i], categories[i]
  local before = latest[field]
  if before == nil then
    before = stored[i]
  end
  if not before then
    previous[i] = -1
    new = new + 1
    add(trial_heads[i] .. category .. ']', 1)
    local j = cost_at[i]
    if j then
      local model = ARGV[j + 1]
      local sums = spent[model] or { 0, 0, 0 }
      sums[1] = sums[1] + 1
      sums[2] = sums[2] + (tonumber(ARGV[j + 2]) or 0)
      sums[3] = sums[3] + (tonumber(ARGV[j + 3]) or 0)
      spent[model] = sums
    end
  elseif before == category then
    previous[i] = before
    duplicates = duplicates + 1
  else
    previous[i] = before
    corrections = corrections + 1
    add(trial_heads[i] .. before .. ']', -1)
    add(trial_heads[i] .. category .. ']', 1)
  end
  if before ~= category then
    changed[field] = true
  end
  latest[field] = category
end

-- The cells that moved, and their numbers (new ones go at the list's end).
local moved, moved_by = {}, {}
for field, delta in pairs(deltas) do
  if delta ~= 0 then
    moved[#moved + 1] = field
    moved_by[#moved_by + 1] = delta
  end
end
local numbers = {}
for first = 1, #moved, SLICE do
  local values = redis.call('HMGET', KEYS[6],
    unpack(moved, first, math.min(first + SLICE - 1, #moved)))
  for k = 1, #values do
    numbers[first + k - 1] = values[k]
  end
end
local numbered = redis.call('LLEN', KEYS[7])

local writes = {}
for field in pairs(changed) do
  writes[#writes + 1] = field
  writes[#writes + 1] = latest[field]
end
for first = 1, #writes, 2 * SLICE do
  redis.call('HSET', KEYS[1],
    unpack(writes, first, math.min(first + 2 * SLICE - 1, #writes)))
end
for m = 1, #moved do
  redis.call('HINCRBY', KEYS[2], moved[m], moved_by[m])
end
local unnumbered, numbering = {}, {}
for m = 1, #moved do
  if not numbers[m] then
    numbers[m] = numbered + #unnumbered
    unnumbered[#unnumbered + 1] = moved[m]
    numbering[#numbering + 1] = moved[m]
    numbering[#numbering + 1] = numbers[m]
  end
end
for first = 1, #unnumbered, SLICE do
  redis.call('RPUSH', KEYS[7],
    unpack(unnumbered, first, math.min(first + SLICE - 1, #unnumbered)))
end
for first = 1, #numbering, 2 * SLICE do
  redis.call('HSET', KEYS[6],
    unpack(numbering, first, math.min(first + 2 * SLICE - 1, #numbering)))
end
if new > 0 then
  redis.call('HINCRBY', KEYS[3], 'trials', new)
end
if duplicates > 0 then
  redis.call('HINCRBY', KEYS[3], 'duplicates', duplicates)
end
if corrections > 0 then
  redis.call('HINCRBY', KEYS[3], 'corrections', corrections)
end
local version = redis.call('HGET', KEYS[3], 'version') or '0'
local sums_out = {}
for model, sums in pairs(spent) do
  local tokens = string.format('%d', sums[2])
  local seconds = string.format('%.17g', sums[3])
  redis.call('HINCRBY', KEYS[4], '[' .. model .. ',"trials"]', sums[1])
  redis.call('HINCRBY', KEYS[4], '[' .. model .. ',"tokens"]', tokens)
  redis.call('HINCRBYFLOAT', KEYS[4], '[' .. model .. ',"seconds"]', seconds)
  sums_out[#sums_out + 1] =
    '[' .. model .. ',' .. sums[1] .. ',' .. tokens .. ',' .. seconds .. ']'
end
if new + corrections > 0 then
  version = redis.call('HINCRBY', KEYS[3], 'version', 1)
end
-- Other workers follow the counts through this log, not a full re-read (a
-- version missing from it makes them read the counts whole).
if new + corrections > 0 and version > logged then
  redis.call('XADD', KEYS[5], 'MAXLEN', '~', 10000, version .. '-0',
    'w', writer, 'i', table.concat(numbers, ','),
    'n', table.concat(moved_by, ','),
    'c', '[' .. table.concat(sums_out, ',') .. ']')
end
return version .. '|' .. table.concat(previous, ',')
