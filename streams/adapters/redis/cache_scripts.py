"""The conversation cache's append script (Lua, run atomically by Redis).

A conversation's history is two keys under one hash tag: the list of messages
(JSON, newest at index 0) and a sorted set of the event ids in the list,
scored by push order. Everything that writes them keeps the pair in step —
push to both, trim both to the same newest ``cap`` entries, delete both — so
``LLEN == ZCARD`` holds for every list memstream wrote. A list without it
(written before the id set existed, or one of the pair evicted) is dropped by
the next write and is a miss for a read, which rebuilds it.

The id set makes the append idempotent per event: an event whose id is in the
set, or that came earlier in the same call, is not pushed again — whoever
appends it, however often.
"""

from __future__ import annotations

import hashlib

# KEYS: list, version, ids.
# ARGV: mode (create|extend|drop), cap, ttl, n, then n event ids, then n messages
#       (oldest first).
# Returns the number of messages pushed, or -1 when the pair was out of step and
# was dropped.
APPEND_SCRIPT = """
local list, ids = KEYS[1], KEYS[3]
local mode, cap, ttl = ARGV[1], tonumber(ARGV[2]), ARGV[3]
redis.call('INCR', KEYS[2])
redis.call('EXPIRE', KEYS[2], ttl)
local len = redis.call('LLEN', list)
if mode == 'drop' then
  redis.call('DEL', list, ids)
  return 0
end
if len ~= redis.call('ZCARD', ids) then
  redis.call('DEL', list, ids)
  return -1
end
if len == 0 and mode ~= 'create' then return 0 end
local n = tonumber(ARGV[4])
local top = 0
if len > 0 then
  top = tonumber(redis.call('ZRANGE', ids, -1, -1, 'WITHSCORES')[2])
end
if n == 0 then return 0 end
local listed = {}
if len > 0 then listed = redis.call('ZMSCORE', ids, unpack(ARGV, 5, 4 + n)) end
local seen, docs, scored = {}, {}, {}
for i = 1, n do
  local id = ARGV[4 + i]
  if not seen[id] and not listed[i] then
    seen[id] = true
    top = top + 1
    docs[#docs + 1] = ARGV[4 + n + i]
    scored[#scored + 1] = top
    scored[#scored + 1] = id
  end
end
if #docs == 0 then return 0 end
redis.call('LPUSH', list, unpack(docs))
redis.call('ZADD', ids, unpack(scored))
if len + #docs > cap then
  redis.call('LTRIM', list, 0, cap - 1)
  redis.call('ZREMRANGEBYRANK', ids, 0, len + #docs - cap - 1)
end
redis.call('EXPIRE', list, ttl)
redis.call('EXPIRE', ids, ttl)
return #docs
"""
APPEND_SCRIPT_SHA = hashlib.sha1(APPEND_SCRIPT.encode()).hexdigest()
