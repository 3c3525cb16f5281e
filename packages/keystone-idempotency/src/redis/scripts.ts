import { createHash } from 'node:crypto';

/**
 * The store's Lua scripts: each conditional write is one script, so Redis runs its check and its writes with nothing
 * in between (a script is atomic: no other command runs while it does). Every script names all the keys it touches
 * in KEYS, all in the store's hash slot: KEYS[1] the record, KEYS[2] the recovery set, KEYS[3] the expiry set,
 * KEYS[4..] the effects' keys (a claim's sweep also deletes records the expiry set names: keys of the same slot).
 *
 * A script is not a transaction: a command that fails half way leaves the writes before it. So each script checks
 * everything first (the record's condition, then every effect's), and writes only once nothing can refuse. The
 * `#!lua` line (Redis 7, Valkey 7.2) makes the server refuse a writing script at its start when it is out of memory,
 * rather than at its first write; a read is flagged `no-writes`.
 *
 * Times are the engine's (`now` in ARGV); the server's clock decides nothing. Only a finished record (completed,
 * released, abandoned) carries a TTL, set relative to that `now` (PEXPIRE, the time left until `expiresAt` as the
 * engine counts it), so a skew between the caller's clock and the server's never deletes a record early. An unfinished
 * one carries none, so that no `volatile-*` eviction can take it from its owner: a recoverable one is in the recovery
 * set, any other in the expiry set by its `expiresAt`, and a later claim deletes it once that has passed.
 *
 * Replies: `{'written'}`, `{'met', field, value, ...}` (the record as stored, HGETALL's pairs; none when absent), or
 * `{'effect', i}` (effect i, from 1, refused by its own condition; nothing written).
 */

const PRELUDE = `
local record, recovery, expiry = KEYS[1], KEYS[2], KEYS[3]

local function met()
  local reply = redis.call('HGETALL', record)
  table.insert(reply, 1, 'met')
  return reply
end

-- Absent, or past its expiry and not in the recovery set: an unfinished recoverable operation is never free.
local function free(now)
  if redis.call('EXISTS', record) == 0 then return true end
  local f = redis.call('HMGET', record, 'recoverAt', 'expiresAt')
  return (not f[1]) and f[2] ~= false and tonumber(f[2]) * 1000 <= now
end

-- After a write. Unfinished: no TTL (a volatile-* policy evicts only keys with one), and listed where it will be
-- found: the recovery set by recoverAt, or else the expiry set by expiresAt. Finished: in neither, with the TTL its
-- expiry leaves from now.
local function settle(key, now)
  local f = redis.call('HMGET', record, 'status', 'recoverAt', 'expiresAt')
  if f[2] then
    redis.call('PERSIST', record)
    redis.call('ZADD', recovery, f[2], key)
    redis.call('ZREM', expiry, key)
  elseif f[1] == 'IN_PROGRESS' then
    redis.call('PERSIST', record)
    redis.call('ZREM', recovery, key)
    if f[3] then redis.call('ZADD', expiry, f[3], key) else redis.call('ZREM', expiry, key) end
  else
    redis.call('ZREM', recovery, key)
    redis.call('ZREM', expiry, key)
    if f[3] then
      redis.call('PEXPIRE', record, math.max(tonumber(f[3]) * 1000 - now, 1000))
    else
      redis.call('PERSIST', record)
    end
  end
end

-- In-progress records nobody came back for (not recoverable, past their expiry, so free to any claim and absent to
-- every read): deleted a few at a time by later claims, as a TTL would have. One listed whose record moved on since is
-- only taken off the list.
local SWEEP = 4
local function sweep(recordPrefix, now)
  local lapsed = redis.call('ZRANGE', expiry, '-inf', now / 1000, 'BYSCORE', 'LIMIT', 0, SWEEP)
  for _, key in ipairs(lapsed) do
    local r = recordPrefix .. key
    local f = redis.call('HMGET', r, 'status', 'recoverAt', 'expiresAt')
    if f[1] == 'IN_PROGRESS' and not f[2] and f[3] and tonumber(f[3]) * 1000 > now then
      redis.call('ZADD', expiry, f[3], key)
    else
      if f[1] == 'IN_PROGRESS' and not f[2] and f[3] then redis.call('DEL', r) end
      redis.call('ZREM', expiry, key)
    end
  end
end

-- An integer as INCRBY reads one (Redis's string2ll): '0', or an optional '-', a digit 1-9, then digits; so no '+',
-- no space, no leading zero, no '-0'. The store keeps every count a safe integer besides (2^53 - 1 at most, what a
-- JavaScript number holds exactly), so a longer one is refused too. nil when it is not one.
local MAX_SAFE = 9007199254740991
local function safeInteger(text)
  if text == '0' then return 0 end
  if #text > 17 or not string.match(text, '^%-?[1-9]%d*$') then return nil end
  local n = tonumber(text)
  if math.abs(n) > MAX_SAFE then return nil end
  return n
end

-- The effects' conditions, each against the data as the effects before it leave it: the order Redis runs them in.
-- A script can't roll back, so an effect Redis would refuse half way (INCRBY on a hash a HSET before it made) must be
-- found here, before the first write. The first refused (from 1), or 0.
local function refusedEffect(at, n)
  local state = {}
  -- A key as the commit has left it so far: its type, and (read when needed) the count it holds, and its hash fields.
  local function stateOf(key)
    local s = state[key]
    if not s then
      s = { type = redis.call('TYPE', key).ok, fields = {}, stored = true }
      state[key] = s
    end
    return s
  end
  local function count(s, key)
    if s.type == 'none' then return 0 end
    if s.type ~= 'string' then return nil end
    if s.count == nil and s.stored then s.count = safeInteger(redis.call('GET', key)) or false end
    return s.count or nil
  end
  for i = 1, n do
    local key, base = KEYS[3 + i], at + (i - 1) * 4
    local kind, a, nx = ARGV[base], ARGV[base + 1], ARGV[base + 3]
    local s = stateOf(key)
    if kind == 'set' then
      if nx == '1' and s.type ~= 'none' then return i end
      s.type, s.count, s.fields, s.stored = 'string', safeInteger(a) or false, {}, false
    elseif kind == 'hset' then
      if s.type ~= 'none' and s.type ~= 'hash' then return i end
      if nx == '1' then
        local exists = s.fields[a]
        if exists == nil then exists = s.stored and s.type == 'hash' and redis.call('HEXISTS', key, a) == 1 end
        if exists then return i end
      end
      s.type = 'hash'
      s.fields[a] = true
    elseif kind == 'incrBy' then
      local current = count(s, key)
      if current == nil then return i end
      local sum = current + tonumber(a)
      if math.abs(sum) > MAX_SAFE then return i end
      s.type, s.count, s.fields = 'string', sum, {}
    elseif kind == 'require' then
      if s.type == 'none' then return i end
    else
      return i
    end
  end
  return 0
end

local function writeEffects(at, n)
  for i = 1, n do
    local key, base = KEYS[3 + i], at + (i - 1) * 4
    local kind, a, b = ARGV[base], ARGV[base + 1], ARGV[base + 2]
    if kind == 'set' then
      redis.call('SET', key, a)
    elseif kind == 'hset' then
      redis.call('HSET', key, a, b)
    elseif kind == 'incrBy' then
      redis.call('INCRBY', key, a)
    end
  end
end
`;

/**
 * putFresh, takeOver and commitOneShot: the whole record written in place of what is there, on a fresh claim's
 * condition (no lease token given: absent, or expired and not in the recovery set) or a takeover's (the stored record
 * still has the lease token and status seen), with the effects of a one-shot commit.
 *
 * ARGV: key, now, seen lease token ('' for a fresh claim), seen status, number of record fields, the fields (name,
 * value, ...), number of effects, the effects (4 each).
 */
const PLACE = `#!lua
${PRELUDE}
local key, now, seenToken, seenStatus = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local fieldCount = tonumber(ARGV[5])
local effectsAt = 6 + fieldCount
local effectCount = tonumber(ARGV[effectsAt])
if seenToken == '' then
  if not free(now) then return met() end
else
  local f = redis.call('HMGET', record, 'leaseToken', 'status')
  if f[1] ~= seenToken or f[2] ~= seenStatus then return met() end
end
local refused = refusedEffect(effectsAt + 1, effectCount)
if refused > 0 then return {'effect', refused} end
writeEffects(effectsAt + 1, effectCount)
redis.call('DEL', record)
redis.call('HSET', record, unpack(ARGV, 6, 5 + fieldCount))
settle(key, now)
sweep(string.sub(record, 1, #record - #key), now)
return {'written'}
`;

/**
 * commit: completes the record (its response, a new expiry, out of the recovery set) and writes the effects, only if
 * it holds the lease token and is in progress.
 *
 * ARGV: key, now, lease token, response (JSON), expiresAt (s), number of effects, the effects.
 */
const COMMIT = `#!lua
${PRELUDE}
local key, now, token = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local effectCount = tonumber(ARGV[6])
local f = redis.call('HMGET', record, 'leaseToken', 'status')
if f[1] ~= token or f[2] ~= 'IN_PROGRESS' then return met() end
local refused = refusedEffect(7, effectCount)
if refused > 0 then return {'effect', refused} end
writeEffects(7, effectCount)
redis.call('HSET', record, 'status', 'COMPLETED', 'response', ARGV[4], 'expiresAt', ARGV[5])
redis.call('HDEL', record, 'recoverAt')
settle(key, now)
return {'written'}
`;

/**
 * endLease: a release or an abandonment, only if the record holds the lease token and is in progress. recoverAt and
 * expiresAt: '' leaves the field as it is, '-' removes it, a number sets it.
 *
 * ARGV: key, now, lease token, status, recoverAt, expiresAt.
 */
const END_LEASE = `#!lua
${PRELUDE}
local key, now, token = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local f = redis.call('HMGET', record, 'leaseToken', 'status')
if f[1] ~= token or f[2] ~= 'IN_PROGRESS' then return met() end
redis.call('HSET', record, 'status', ARGV[4], 'leaseExpiresAt', ARGV[2])
local changes = { recoverAt = ARGV[5], expiresAt = ARGV[6] }
for field, value in pairs(changes) do
  if value == '-' then redis.call('HDEL', record, field) elseif value ~= '' then redis.call('HSET', record, field, value) end
end
settle(key, now)
return {'written'}
`;

/** read: the record as stored (HGETALL's pairs), past its expiry or not. */
const READ = `#!lua flags=no-writes
return redis.call('HGETALL', KEYS[1])
`;

/** findDue: the recovery set's members due at ARGV[1] (recoverAt <= now), oldest first, at most ARGV[2], with scores. */
const FIND_DUE = `#!lua flags=no-writes
return redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, ARGV[2], 'WITHSCORES')
`;

/**
 * What the store checks of the server that holds its slot (KEYS[1] routes it there on a cluster): its eviction policy
 * and whether it keeps an append-only file, from INFO, which a script may run where CONFIG is refused (ElastiCache
 * renames or blocks CONFIG). Reply: {maxmemory_policy or '', aof_enabled or ''}.
 */
const SERVER_SETTINGS = `#!lua flags=no-writes
local memory = redis.call('INFO', 'memory')
local persistence = redis.call('INFO', 'persistence')
return {
  string.match(memory, 'maxmemory_policy:([%w%-]+)') or '',
  string.match(persistence, 'aof_enabled:(%d)') or '',
}
`;

/** A script and its SHA-1, the name EVALSHA runs it by. */
export interface Script {
  readonly name: string;
  readonly source: string;
  readonly sha: string;
}

function script(name: string, source: string): Script {
  return { name, source, sha: createHash('sha1').update(source).digest('hex') };
}

export const SCRIPTS = {
  place: script('place', PLACE),
  commit: script('commit', COMMIT),
  endLease: script('endLease', END_LEASE),
  read: script('read', READ),
  findDue: script('findDue', FIND_DUE),
  serverSettings: script('serverSettings', SERVER_SETTINGS),
} as const;
