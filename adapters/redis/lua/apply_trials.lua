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
-- ARGV[2]  "1" when a trial comes more than once in the chunk, else "0"
-- ARGV[3]  the writer's id, kept in the change entry so it can skip its
--          own changes
-- ARGV[4 .. n+3]  the trials in delivery order, each its trials field
--          (KEYS[1]) JSON [model, question, prior, trial]
-- ARGV[n+4 .. 2n+3]  each trial's counts cell (KEYS[2]) JSON [model,
--          question, prior, category]: the same text as its trials field
--          up to the last comma, then its category
-- ARGV[2n+4 .. 3n+3]  each trial's category, a decimal integer
-- ARGV[3n+4 ..]  four per trial that reported a cost: trial number,
--          model as a JSON string, tokens, seconds ("" when not reported)
--
-- Returns "<version>|<previous categories>": the run's version after this
-- chunk (after "=" when this chunk left it as it was, so a version another
-- writer made is never taken for this one's), then the previous category
-- of every trial, comma-separated, -1 for a new one, or "new" when every
-- trial was new. A repeat inside the chunk sees the delivery before it, as
-- monitor.ledger does. Every read happens before the first write, so an
-- error (a key of the wrong type, a count that is not an integer) leaves
-- the keys untouched.
--
-- Redis's time goes to the commands this script calls, per field, so each
-- hash is read with one HMGET and written with one HSET per slice (not an
-- HINCRBY per cell), and no number is turned into text per trial (Lua 5.1
-- numbers are doubles: tostring of one runs printf's float formatting).

local argv = ARGV
local n = tonumber(argv[1])
local repeats, writer = argv[2] == '1', argv[3]
-- Where the trials' fields, cells and categories start in ARGV (before
-- the first).
local at_fields, at_cells, at_categories = 3, n + 3, 2 * n + 3

-- unpack() is bounded by the Lua stack, so long argument lists go in slices.
local SLICE = 1000
local function read_hash(key, fields, offset, count)
  if count == 0 then
    return {}
  end
  local values = redis.call('HMGET', key, unpack(fields, offset + 1,
    offset + math.min(SLICE, count)))
  for first = SLICE + 1, count, SLICE do
    local got = redis.call('HMGET', key, unpack(fields, offset + first,
      offset + math.min(first + SLICE - 1, count)))
    for k = 1, #got do
      values[first + k - 1] = got[k]
    end
  end
  return values
end
local function write_hash(key, pairs_)
  for first = 1, #pairs_, 2 * SLICE do
    redis.call('HSET', key,
      unpack(pairs_, first, math.min(first + 2 * SLICE - 1, #pairs_)))
  end
end
-- Integers as text, exact past 2^31 ('%d' takes a C long), each once.
local texts = {}
local function text(number)
  local found = texts[number]
  if not found then
    found = string.format('%d', number)
    texts[number] = found
  end
  return found
end
-- A stored integer as a number; past 2^53 a double would round it.
local function integer(value, what)
  if not value then
    return 0
  end
  local number = tonumber(value)
  if not number or number % 1 ~= 0 or math.abs(number) >= 2 ^ 53 then
    error('apply_trials: ' .. what .. ' is not an integer: ' .. value)
  end
  return number
end

local cost_at, costs = {}, false
for j = at_categories + n + 1, #argv, 4 do
  cost_at[tonumber(argv[j])] = j
  costs = true
end

-- Reads: the trials' stored categories, the log's newest version (an
-- entry id must grow, and a failing XADD after the writes below would leave
-- them half done), then the totals.
local stored = read_hash(KEYS[1], argv, at_fields, n)
local newest = redis.call('XREVRANGE', KEYS[5], '+', '-', 'COUNT', 1)
local logged = 0
if newest[1] then
  logged = tonumber(string.match(newest[1][1], '^(%d+)'))
end
local totals = redis.call('HMGET', KEYS[3],
  'trials', 'duplicates', 'corrections', 'version')

-- The cells whose count moves, each once, in the order first met.
local latest, deltas, spent, models, previous, writes = {}, {}, {}, {}, {}, {}
local cells, cell_count, written = {}, 0, 0
local new, duplicates, corrections = 0, 0, 0
local function add(cell, delta)
  local sum = deltas[cell]
  if sum then
    deltas[cell] = sum + delta
  else
    deltas[cell] = delta
    cell_count = cell_count + 1
    cells[cell_count] = cell
  end
end
for i = 1, n do
  local field, cell = argv[at_fields + i], argv[at_cells + i]
  local category = argv[at_categories + i]
  local before = stored[i]
  if repeats then
    local seen = latest[field]
    if seen ~= nil then
      before = seen
    end
    latest[field] = category
  end
  if not before then
    new = new + 1
    local sum = deltas[cell]
    if sum then
      deltas[cell] = sum + 1
    else
      deltas[cell] = 1
      cell_count = cell_count + 1
      cells[cell_count] = cell
    end
    local j = costs and cost_at[i]
    if j then
      local model = argv[j + 1]
      local sums = spent[model]
      if not sums then
        sums = { 0, 0, 0 }
        spent[model] = sums
        models[#models + 1] = model
      end
      sums[1] = sums[1] + 1
      sums[2] = sums[2] + (tonumber(argv[j + 2]) or 0)
      sums[3] = sums[3] + (tonumber(argv[j + 3]) or 0)
    end
  elseif before == category then
    previous[i] = before
    duplicates = duplicates + 1
  else
    previous[i] = before
    corrections = corrections + 1
    local gone = string.sub(cell, 1, -#category - 2) .. before .. ']'
    add(gone, -1)
    add(cell, 1)
  end
  if before ~= category then
    -- A repeat's later write wins, as HSET sets its pairs in order.
    writes[written + 1] = field
    writes[written + 2] = category
    written = written + 2
  end
end

-- The cells that moved, their counts and their numbers.
local moved, moved_by, moves = {}, {}, 0
for c = 1, cell_count do
  local delta = deltas[cells[c]]
  if delta ~= 0 then
    moves = moves + 1
    moved[moves] = cells[c]
    moved_by[moves] = delta
  end
end
local counts = read_hash(KEYS[2], moved, 0, moves)
local numbers = read_hash(KEYS[6], moved, 0, moves)
local numbered = redis.call('LLEN', KEYS[7])
local counted = {
  integer(totals[1], 'trials'), integer(totals[2], 'duplicates'),
  integer(totals[3], 'corrections'), integer(totals[4], 'version'),
}
local sums, delta_texts, unnumbered, numbering = {}, {}, {}, {}
local new_cells = 0
for m = 1, moves do
  local cell, delta = moved[m], moved_by[m]
  local count = counts[m]
  sums[2 * m - 1] = cell
  sums[2 * m] = text((count and integer(count, 'a count') or 0) + delta)
  delta_texts[m] = text(delta)
  if not numbers[m] then
    local number = text(numbered + new_cells)
    new_cells = new_cells + 1
    numbers[m] = number
    unnumbered[new_cells] = cell
    numbering[2 * new_cells - 1] = cell
    numbering[2 * new_cells] = number
  end
end
-- The costs this chunk adds to (read so a wrong value fails here).
local cost_fields = {}
for k = 1, #models do
  local model = models[k]
  cost_fields[3 * k - 2] = '[' .. model .. ',"trials"]'
  cost_fields[3 * k - 1] = '[' .. model .. ',"tokens"]'
  cost_fields[3 * k] = '[' .. model .. ',"seconds"]'
end
local costs_before = read_hash(KEYS[4], cost_fields, 0, #cost_fields)
for k = 1, #cost_fields do
  if k % 3 ~= 0 then
    integer(costs_before[k], 'a cost')
  elseif costs_before[k] and not tonumber(costs_before[k]) then
    error('apply_trials: a cost is not a number: ' .. costs_before[k])
  end
end

-- Writes, now that every read succeeded.
write_hash(KEYS[1], writes)
write_hash(KEYS[2], sums)
for first = 1, #unnumbered, SLICE do
  redis.call('RPUSH', KEYS[7],
    unpack(unnumbered, first, math.min(first + SLICE - 1, #unnumbered)))
end
write_hash(KEYS[6], numbering)
local version = counted[4]
if new + corrections > 0 then
  version = version + 1
end
redis.call('HSET', KEYS[3],
  'trials', text(counted[1] + new),
  'duplicates', text(counted[2] + duplicates),
  'corrections', text(counted[3] + corrections),
  'version', text(version))
local sums_out = {}
for k = 1, #models do
  local model, spent_sums = models[k], spent[models[k]]
  local trials, tokens = text(spent_sums[1]), text(spent_sums[2])
  local seconds = string.format('%.17g', spent_sums[3])
  -- HINCRBYFLOAT adds as Redis always has (long double), not in Lua.
  redis.call('HINCRBY', KEYS[4], cost_fields[3 * k - 2], trials)
  redis.call('HINCRBY', KEYS[4], cost_fields[3 * k - 1], tokens)
  redis.call('HINCRBYFLOAT', KEYS[4], cost_fields[3 * k], seconds)
  sums_out[k] = '[' .. model .. ',' .. trials .. ',' .. tokens .. ','
    .. seconds .. ']'
end
-- Other workers follow the counts through this log, not a full re-read (a
-- version missing from it makes them read the counts whole).
if new + corrections > 0 and version > logged then
  redis.call('XADD', KEYS[5], 'MAXLEN', '~', 10000, text(version) .. '-0',
    'w', writer, 'i', table.concat(numbers, ','),
    'n', table.concat(delta_texts, ','),
    'c', '[' .. table.concat(sums_out, ',') .. ']')
end
local answer = text(version)
if new + corrections == 0 then
  answer = '=' .. answer
end
if new == n then
  return answer .. '|new'
end
for i = 1, n do
  if not previous[i] then
    previous[i] = '-1'
  end
end
return answer .. '|' .. table.concat(previous, ',')
