-- read_cells.lua: the counts fields of a range of numbered cells, in one reply.
--
-- KEYS[1]  cells  list  the counts fields in number order (see apply_trials)
--
-- ARGV[1], ARGV[2]  the first and the last number wanted
--
-- Returns the fields joined by newlines (none holds one: a JSON text written
-- by apply_trials has no raw newline), so the reader parses one string
-- instead of one reply per cell.

return table.concat(redis.call('LRANGE', KEYS[1], ARGV[1], ARGV[2]), '\n')
