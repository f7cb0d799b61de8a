package fleet

import (
	"strconv"

	"github.com/redis/go-redis/v9"
)

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

// seenSet is the seen-set of one partition: Redis sets of integers (intset encoding, 8 bytes
// each), one per bucket, grown by linear hashing so that every bucket stays under
// set-max-intset-entries (512 by default) at any size (docs/fleet.md "Seen-set"). A member is
// a URL's fingerprint fp (decimal, from seenBase) followed by its state's digit.
//
//	seenOpen(meta, prefix) reads the bucket count; seenKey(fp) names fp's bucket (the last
//	nine digits of fp pick it); seenState(key, fp) is fp's state digit, or nil when unseen;
//	seenGrew(n) records n new fingerprints and splits buckets while the partition holds more
//	than seenLoad per bucket; seenClose(n) writes the counts back if anything changed.
//
// Bucket keys are prefix..index, in the partition's slot; they cannot be listed in KEYS, as
// the bucket count is only known inside the script.
var seenSet = `
local seenMeta, seenPrefix, seenN, seenURLs, seenSplit
local seenLoad = ` + strconv.Itoa(seenLoad) + `
local function seenOpen(meta, prefix)
  seenMeta, seenPrefix, seenSplit = meta, prefix, 0
  local v = redis.call('HMGET', meta, 'buckets', 'urls')
  seenN, seenURLs = tonumber(v[1] or '1'), tonumber(v[2] or '0')
end
local function seenTop()
  local m = 1
  while m * 2 <= seenN do m = m * 2 end
  return m
end
local function seenIndex(fp, m)
  local h = tonumber(string.sub(fp, -9))
  local b = h % (2 * m)
  if b >= seenN then b = h % m end
  return b
end
local function seenKey(fp)
  return seenPrefix .. seenIndex(fp, seenTop())
end
local function seenState(key, fp)
  local r = redis.call('SMISMEMBER', key, fp .. '1', fp .. '2', fp .. '3', fp .. '4')
  for i = 1, 4 do
    if r[i] == 1 then return tostring(i) end
  end
  return nil
end
local function seenAdd(key, ms) -- in chunks: unpack is bounded, a hostile bucket is not
  for i = 1, #ms, 1000 do redis.call('SADD', key, unpack(ms, i, math.min(i + 999, #ms))) end
end
local function seenGrew(n)
  seenURLs = seenURLs + n
  while seenURLs > seenLoad * seenN do
    local m = seenTop()
    local src = seenPrefix .. (seenN - m)
    local keep, move = {}, {}
    for _, v in ipairs(redis.call('SMEMBERS', src)) do
      local t = keep
      if math.floor(tonumber(string.sub(v, -10, -2)) / m) % 2 == 1 then t = move end
      t[#t+1] = v
    end
    redis.call('DEL', src)
    seenAdd(src, keep)
    seenAdd(seenPrefix .. seenN, move)
    seenN = seenN + 1
    seenSplit = seenSplit + 1
  end
end
local function seenClose(n)
  if n > 0 or seenSplit > 0 then
    redis.call('HSET', seenMeta, 'buckets', seenN, 'urls', seenURLs)
  end
end
`

// seenLoad is the seen-set's fingerprints per bucket: a partition splits a bucket whenever it
// holds more (docs/fleet.md "Seen-set"). Its buckets then average seenLoad fingerprints, and
// the fullest (those the split pointer has not reached, twice as full) stay under the 512
// members of an intset.
const seenLoad = 200

// The seen-set's states: a member's last digit.
const (
	seenQueued   = "1"
	seenFetched  = "2"
	seenFailed   = "3"
	seenExcluded = "4"
)

// addEntries defines add_entries(hosts, counts, used, budget, k, a, n, inc), after seenSet
// and with the seen-set open (seenOpen): it adds n entries whose keys start at KEYS[k] (per
// entry its host's queue) and whose arguments start at ARGV[a] (per entry: fingerprint
// (seenBase), state ('1' to queue, '4' excluded), host, item, exclusion reason), and returns
// how many it queued and excluded (each a new fingerprint, recorded with seenGrew; the caller
// closes the seen-set). With a budget (> 0), a host's URLs ever queued are counted in used,
// and an unseen URL of a host at its budget is excluded ('limit') instead of queued.
// inc(field, delta) records the changes of the counters but 'queued' and 'excluded'. A host's
// first queued URL puts it in the hosts set (a host with URLs queued is always there: lease
// removes it only once it has none).
const addEntries = `
local function add_entries(hosts, counts, used, budget, k, a, n, inc)
  local added, excluded = 0, 0
  for i = 0, n - 1 do
    local b = a + 5*i
    local fp, st, host, item, reason = ARGV[b], ARGV[b+1], ARGV[b+2], ARGV[b+3], ARGV[b+4]
    local bucket, queue = seenKey(fp), KEYS[k+i]
    if not seenState(bucket, fp) then
      if st == '1' and budget > 0 and tonumber(redis.call('HGET', used, host) or '0') >= budget then
        st, reason = '4', 'limit'
      end
      redis.call('SADD', bucket, fp .. st)
      if st == '1' then
        if redis.call('RPUSH', queue, item) == 1 then redis.call('SADD', hosts, host) end
        if budget > 0 then redis.call('HINCRBY', used, host, 1) end
        added = added + 1
      else
        excluded = excluded + 1
        inc('excluded:' .. reason, 1)
      end
      seenGrew(1)
    end
  end
  return added, excluded
end
`

// add (any worker, not fenced: it only inserts, and the seen-set makes it idempotent):
// KEYS hosts, counts, used, seen meta, then per entry its host's queue; ARGV the host budget
// (0: none), the seen buckets' key prefix, then per entry the five arguments of add_entries.
// Returns {queued, excluded}.
var addScript = redis.NewScript(seenSet + addEntries + `
seenOpen(KEYS[4], ARGV[2])
local added, excluded = add_entries(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[1]), 5, 3, #KEYS - 4,
  function(f, d) redis.call('HINCRBY', KEYS[2], f, d) end)
seenClose(added + excluded)
if added > 0 then redis.call('HINCRBY', KEYS[2], 'queued', added) end
if excluded > 0 then redis.call('HINCRBY', KEYS[2], 'excluded', excluded) end
return {added, excluded}
`)

// lease: KEYS owner, queue, delayed, inflight, hosts, counts; ARGV token, host, url-ttl-ms, n,
// in-flight prefix. Moves the host's due retries to the queue's tail, pops up to n items from
// the head into the in-flight set (after the prefix, as in-flight members are) scored by their
// deadline, and drops the host from the hosts set when it has nothing left. Returns
// {deadline-ms, now-ms, item…} (the items as queued), or {next-due-ms or -1, now-ms} with no
// item.
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
for i, it in ipairs(items) do z[2*i-1] = deadline; z[2*i] = ARGV[5] .. it end
redis.call('ZADD', KEYS[4], unpack(z))
redis.call('HINCRBY', KEYS[6], 'inflight', #items)
local out = {deadline, now}
for _, it in ipairs(items) do out[#out+1] = it end
return out
`)

// complete: KEYS owner, inflight, counts, outbox, hosts, used, seen meta, then per result its
// host's delayed set, then per entry of this partition its host's queue (the keys of
// add_entries); ARGV token, outbox payload (empty for none), the seen buckets' key prefix,
// number of results, host budget (0: none), then per result: in-flight member, fingerprint
// (seenBase), kind ('f' fetched, 'F' failed, 'x' excluded, 'r' retry), retry item, retry
// not-before-ms, host, reason (failed, excluded), then per entry the five arguments of
// add_entries. Returns per result 1, or 0 when its URL was not in flight (its state is then
// left alone). The entries are the links (and exclusions) of the batch's fetched pages that
// belong to this partition, added at once; the payload holds the others, for Forward.
// Counters change once per batch.
var completeScript = redis.NewScript(fence + seenSet + addEntries + `
seenOpen(KEYS[7], ARGV[3])
local inc, order = {}, {}
local function add(k, d)
  if not inc[k] then inc[k] = 0; order[#order+1] = k end
  inc[k] = inc[k] + d
end
local names = {f='fetched', F='failed', x='excluded'}
local states = {f='2', F='3', x='4'}
local res, grew = {}, 0
local nres = tonumber(ARGV[4])
for i = 0, nres - 1 do
  local a = 6 + 7*i
  if redis.call('ZREM', KEYS[2], ARGV[a]) == 0 then
    res[i+1] = 0
  else
    res[i+1] = 1
    add('inflight', -1)
    local k = ARGV[a+2]
    if k == 'r' then
      redis.call('ZADD', KEYS[8+i], ARGV[a+4], ARGV[a+3])
      redis.call('SADD', KEYS[5], ARGV[a+5])
      add('delayed', 1)
    else
      local fp = ARGV[a+1]
      local bucket = seenKey(fp)
      if redis.call('SREM', bucket, fp .. '1') == 1 then
        redis.call('SADD', bucket, fp .. states[k])
      else -- not in state queued (not added through add): set its state all the same
        local cur = seenState(bucket, fp)
        if cur then redis.call('SREM', bucket, fp .. cur) else grew = grew + 1 end
        redis.call('SADD', bucket, fp .. states[k])
        if not cur then seenGrew(1) end
      end
      add('queued', -1)
      add(names[k], 1)
      if k ~= 'f' then add(names[k] .. ':' .. ARGV[a+6], 1) end
    end
  end
end
local added, excluded = add_entries(KEYS[5], KEYS[3], KEYS[6], tonumber(ARGV[5]), 8 + nres, 6 + 7*nres,
  #KEYS - 7 - nres, add)
add('queued', added)
add('excluded', excluded)
if ARGV[2] ~= '' then
  redis.call('RPUSH', KEYS[4], ARGV[2])
  add('outbox', 1)
end
for _, k in ipairs(order) do
  if inc[k] ~= 0 then redis.call('HINCRBY', KEYS[3], k, inc[k]) end
end
seenClose(grew + added + excluded)
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

// putBack: KEYS owner, inflight, queue, hosts, counts; ARGV token, in-flight member, host,
// item. Puts a leased URL back at the head of its queue as it was (no attempt counted).
var putBackScript = redis.NewScript(fence + `
if redis.call('ZREM', KEYS[2], ARGV[2]) == 0 then return redis.error_reply('NOTINFLIGHT') end
redis.call('LPUSH', KEYS[3], ARGV[4])
redis.call('SADD', KEYS[4], ARGV[3])
redis.call('HINCRBY', KEYS[5], 'inflight', -1)
return 1
`)
