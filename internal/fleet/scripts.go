package fleet

import "github.com/redis/go-redis/v9"

// Every script that writes as a partition's owner takes the owner key as KEYS[1] and the
// ownership's token as ARGV[1] and begins with fence: a write from a worker whose lease expired
// or was taken over changes nothing. All keys a script touches are passed in KEYS and carry the
// partition's hash tag, so each script runs on one Redis Cluster slot. Times come from the
// server's TIME, in milliseconds.
const fence = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('FENCED') end
local function nowms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`

// acquire: KEYS owner, epoch; ARGV expected owner token (empty for none), worker. If the owner
// key still holds the expected token (or is absent, for empty), draws the next epoch and sets the
// owner key to EPOCH:WORKER, with no expiry: the worker's heartbeat is the lease. Returns
// {epoch, token}, or {0, current token} when the owner changed since the caller read it.
var acquireScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1]) or ''
if cur ~= ARGV[1] then return {0, cur} end
local e = redis.call('INCR', KEYS[2])
local tok = e .. ':' .. ARGV[2]
redis.call('SET', KEYS[1], tok)
return {e, tok}
`)

// release: KEYS owner; ARGV token.
var releaseScript = redis.NewScript(fence + `
redis.call('DEL', KEYS[1])
return 1
`)

// addEntries defines add_entries(hosts, counts, used, budget, k, a, n, inc): it adds n
// entries whose keys start at KEYS[k] (per entry its seen bucket and its host's queue) and
// whose arguments start at ARGV[a] (per entry: fingerprint field, state ('q' to queue, 'x'
// excluded), host, item, exclusion reason), and returns how many it queued and excluded. With
// a budget (> 0), a host's URLs ever queued are counted in used, and an unseen URL of a host at
// its budget is excluded ('limit') instead of queued. inc(field, delta) records the changes of
// the counters but 'queued' and 'excluded'. A host's first queued URL puts it in the hosts
// set (a host with URLs queued is always there: lease removes it only once it has none).
const addEntries = `
local function add_entries(hosts, counts, used, budget, k, a, n, inc)
  local added, excluded = 0, 0
  for i = 0, n - 1 do
    local b = a + 5*i
    local fp, st, host, item, reason = ARGV[b], ARGV[b+1], ARGV[b+2], ARGV[b+3], ARGV[b+4]
    local bucket, queue = KEYS[k+2*i], KEYS[k+1+2*i]
    if st == 'q' and budget > 0 and redis.call('HEXISTS', bucket, fp) == 0
        and tonumber(redis.call('HGET', used, host) or '0') >= budget then
      st, reason = 'x', 'limit'
    end
    if redis.call('HSETNX', bucket, fp, st) == 1 then
      if st == 'q' then
        if redis.call('RPUSH', queue, item) == 1 then redis.call('SADD', hosts, host) end
        if budget > 0 then redis.call('HINCRBY', used, host, 1) end
        added = added + 1
      else
        excluded = excluded + 1
        inc('excluded:' .. reason, 1)
      end
    end
  end
  return added, excluded
end
`

// add (any worker, not fenced: it only inserts, and the seen-set makes it idempotent):
// KEYS hosts, counts, used, then per entry its seen bucket and its host's queue; ARGV the host
// budget (0: none), then per entry the five arguments of add_entries. Returns {queued,
// excluded}.
var addScript = redis.NewScript(addEntries + `
local added, excluded = add_entries(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[1]), 4, 2, (#KEYS - 3) / 2,
  function(f, d) redis.call('HINCRBY', KEYS[2], f, d) end)
if added > 0 then redis.call('HINCRBY', KEYS[2], 'queued', added) end
if excluded > 0 then redis.call('HINCRBY', KEYS[2], 'excluded', excluded) end
return {added, excluded}
`)

// lease: KEYS owner, queue, delayed, inflight, hosts, counts; ARGV token, host, url-ttl-ms, n.
// Moves the host's due retries to the queue's tail, pops up to n items from the head into the
// in-flight set scored by their deadline, and drops the host from the hosts set when it has
// nothing left. Returns {deadline-ms, now-ms, item…}, or {next-due-ms or -1, now-ms} with no item.
var leaseScript = redis.NewScript(fence + `
local now = nowms()
local n = tonumber(ARGV[4])
local due = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)
if #due > 0 then
  for i = 1, #due, 1000 do redis.call('RPUSH', KEYS[2], unpack(due, i, math.min(i + 999, #due))) end
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  redis.call('HINCRBY', KEYS[6], 'delayed', -#due)
end
local items = redis.call('LPOP', KEYS[2], n) or {}
if (#items < n or redis.call('LLEN', KEYS[2]) == 0) and redis.call('ZCARD', KEYS[3]) == 0 then
  redis.call('SREM', KEYS[5], ARGV[2])
end
if #items == 0 then
  local nxt = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  if #nxt == 0 then return {-1, now} end
  return {tonumber(nxt[2]), now}
end
local deadline = now + tonumber(ARGV[3])
local z = {}
for i, it in ipairs(items) do z[2*i-1] = deadline; z[2*i] = it end
redis.call('ZADD', KEYS[4], unpack(z))
redis.call('HINCRBY', KEYS[6], 'inflight', #items)
local out = {deadline, now}
for _, it in ipairs(items) do out[#out+1] = it end
return out
`)

// complete: KEYS owner, inflight, counts, outbox, hosts, used, then per result its URL's seen
// bucket and its host's delayed set, then per entry of this partition the two keys of
// add_entries; ARGV token, outbox payload (empty for none), number of results, host budget
// (0: none), then per result: in-flight item, fingerprint field, kind ('f' fetched, 'F'
// failed, 'x' excluded, 'r' retry), retry item, retry not-before-ms, host, reason (failed,
// excluded), then per entry the five arguments of add_entries. Returns per result 1, or 0 when
// its URL was not in flight (its state is then left alone). The entries are the links (and
// exclusions) of the batch's fetched pages that belong to this partition, added at once; the
// payload holds the others, for Forward. Counters change once per batch.
var completeScript = redis.NewScript(fence + addEntries + `
local inc, order = {}, {}
local function add(k, d)
  if not inc[k] then inc[k] = 0; order[#order+1] = k end
  inc[k] = inc[k] + d
end
local names = {f='fetched', F='failed', x='excluded'}
local res = {}
local nres = tonumber(ARGV[3])
for i = 0, nres - 1 do
  local a = 5 + 7*i
  if redis.call('ZREM', KEYS[2], ARGV[a]) == 0 then
    res[i+1] = 0
  else
    res[i+1] = 1
    add('inflight', -1)
    local k = ARGV[a+2]
    if k == 'r' then
      redis.call('ZADD', KEYS[8+2*i], ARGV[a+4], ARGV[a+3])
      redis.call('SADD', KEYS[5], ARGV[a+5])
      add('delayed', 1)
    else
      redis.call('HSET', KEYS[7+2*i], ARGV[a+1], k)
      add('queued', -1)
      add(names[k], 1)
      if k ~= 'f' then add(names[k] .. ':' .. ARGV[a+6], 1) end
    end
  end
end
local added, excluded = add_entries(KEYS[5], KEYS[3], KEYS[6], tonumber(ARGV[4]), 7 + 2*nres, 5 + 7*nres,
  (#KEYS - 6 - 2*nres) / 2, add)
add('queued', added)
add('excluded', excluded)
if ARGV[2] ~= '' then
  redis.call('RPUSH', KEYS[4], ARGV[2])
  add('outbox', 1)
end
for _, k in ipairs(order) do
  if inc[k] ~= 0 then redis.call('HINCRBY', KEYS[3], k, inc[k]) end
end
return res
`)

// reclaim: KEYS owner, inflight, hosts, counts, then one queue per item; ARGV token, then per
// item: in-flight member, item to queue (attempt + 1), host. Returns how many it moved.
var reclaimScript = redis.NewScript(fence + `
local n = 0
for i = 0, #KEYS - 5 do
  if redis.call('ZREM', KEYS[2], ARGV[2+3*i]) == 1 then
    redis.call('LPUSH', KEYS[5+i], ARGV[3+3*i])
    redis.call('SADD', KEYS[3], ARGV[4+3*i])
    n = n + 1
  end
end
if n > 0 then redis.call('HINCRBY', KEYS[4], 'inflight', -n) end
return n
`)

// trim: KEYS owner, outbox, counts; ARGV token, n. Drops the outbox's first n payloads.
var trimScript = redis.NewScript(fence + `
redis.call('LTRIM', KEYS[2], ARGV[2], -1)
redis.call('HINCRBY', KEYS[3], 'outbox', -tonumber(ARGV[2]))
return 1
`)

// set fenced: KEYS owner, then the keys to set; ARGV token, expiry-ms (0: none), then their
// values (hosts' states, a host's robots.txt).
var setFencedScript = redis.NewScript(fence + `
local ttl = tonumber(ARGV[2])
for i = 2, #KEYS do
  if ttl > 0 then redis.call('SET', KEYS[i], ARGV[i+1], 'PX', ttl)
  else redis.call('SET', KEYS[i], ARGV[i+1]) end
end
return #KEYS - 1
`)

// heartbeat: KEYS workers; ARGV worker, ttl-ms. The workers set scores each worker by the
// end of its lease (ms, Redis clock): the heartbeat sets the caller's to now + ttl, forgets
// the workers whose lease ended, and returns {1 if the caller's lease was still live (0: none,
// or it had ended), the live workers…}.
var heartbeatScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cur = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
local kept = 0
if cur and cur > now then kept = 1 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local out = redis.call('ZRANGE', KEYS[1], 0, -1)
table.insert(out, 1, kept)
return out
`)

// alive: KEYS workers; ARGV worker ids. Returns, per id, 1 if its lease is live now (Redis
// clock), else 0. Read-only.
var aliveScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for i, id in ipairs(ARGV) do
  local sc = tonumber(redis.call('ZSCORE', KEYS[1], id))
  if sc and sc > now then out[i] = 1 else out[i] = 0 end
end
return out
`)

// putBack: KEYS owner, inflight, queue, hosts, counts; ARGV token, in-flight item, host. Puts
// a leased URL back at the head of its queue as it was (no attempt counted).
var putBackScript = redis.NewScript(fence + `
if redis.call('ZREM', KEYS[2], ARGV[2]) == 0 then return redis.error_reply('NOTINFLIGHT') end
redis.call('LPUSH', KEYS[3], ARGV[2])
redis.call('SADD', KEYS[4], ARGV[3])
redis.call('HINCRBY', KEYS[5], 'inflight', -1)
return 1
`)
