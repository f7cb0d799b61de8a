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
// owner key to EPOCH:WORKER, with no expiry: the worker's heartbeat is the lease. An epoch key
// that is not a counter (damage) starts again from Redis' time in ms, above any drawn. Returns
// {epoch, token}, or {0, current token} when the owner changed since the caller read it.
var acquireScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1]) or ''
if cur ~= ARGV[1] then return {0, cur} end
local last = redis.call('GET', KEYS[2])
if last and not (#last <= 15 and string.match(last, '^%d+$')) then
  local t = redis.call('TIME') -- damaged: start again above any epoch drawn (ms since 1970)
  redis.call('SET', KEYS[2], tonumber(t[1]) * 1000)
end
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

// counters defines counter(key) -> inc(field, delta) and flush(): the changes of a batch to the
// counters hash key, written at flush with one HINCRBY when one field changed, else with one
// HMGET and one HSET; a damaged counter (not countOK) is left as it is.
const counters = safeCount + `
local function counter(key)
  local inc, order = {}, {}
  local function add(f, d)
    if not inc[f] then inc[f] = 0; order[#order+1] = f end
    inc[f] = inc[f] + d
  end
  local function flush()
    local fs = {}
    for _, f in ipairs(order) do if inc[f] ~= 0 then fs[#fs+1] = f end end
    if #fs == 1 then cincr(key, fs[1], inc[fs[1]]) end
    if #fs < 2 then return end
    local cur = redis.call('HMGET', key, unpack(fs))
    local kv = {}
    for i, f in ipairs(fs) do -- a damaged counter is left for the owner to recount
      if countOK(cur[i]) then kv[#kv+1] = f; kv[#kv+1] = tonumber(cur[i] or '0') + inc[f] end
    end
    if #kv > 0 then redis.call('HSET', key, unpack(kv)) end
  end
  return add, flush
end
`

// addEntries defines add_entries(hosts, used, budget, k, a, n, inc), after counters: it records
// n groups of new entries (appendWrites; the owner found their URLs not in the partition's
// seen-set), whose keys start at KEYS[k] (per group its host's queue) and whose arguments start
// at ARGV[a]; per group: host, state ('1' to queue, '4' excluded), exclusion reason, count c,
// then, for state '1', the c items. It counts in inc what it queued ('queued') and excluded
// ('excluded', 'excluded:REASON'). A group's items are pushed with one RPUSH, so a script does
// per host, not per URL, what touches a host's keys. With a budget (> 0), a host's URLs ever
// queued are counted in used (read and written once per group), and the items of a host beyond
// its budget are excluded ('limit') instead of queued. A host with URLs queued is put in the
// hosts set (lease removes it only once it has none).
// Returns how many it queued and excluded.
const addEntries = `
local function add_entries(hosts, used, budget, k, a, n, inc)
  local added, excluded = 0, 0
  for g = 0, n - 1 do
    local host, st, reason, c = ARGV[a], ARGV[a+1], ARGV[a+2], tonumber(ARGV[a+3])
    if st == '1' then
      local take = c
      if budget > 0 then take = math.max(0, math.min(c, budget - (tonumber(redis.call('HGET', used, host) or '0') or 0))) end
      if take > 0 then
        local last = a + 3 + take
        for i = a + 4, last, 1000 do redis.call('RPUSH', KEYS[k+g], unpack(ARGV, i, math.min(i + 999, last))) end
        redis.call('SADD', hosts, host)
        if budget > 0 then cincr(used, host, take) end
        added = added + take
      end
      if take < c then
        excluded = excluded + c - take
        inc('excluded:limit', c - take)
      end
      a = a + 4 + c
    else
      excluded = excluded + c
      inc('excluded:' .. reason, c)
      a = a + 4
    end
  end
  inc('queued', added)
  inc('excluded', excluded)
  return added, excluded
end
`

// record (owner): KEYS owner, hosts, counts, used, seen log, inbox, bad, then per group of
// entries its host's queue; ARGV token, host budget (0: none), the new fingerprints packed (8
// bytes each: one more element of the seen log), t, the number of the inbox's payloads to drop, then the
// unreadable payloads among them, then the groups' arguments of add_entries. Records the
// entries, drops the inbox's first t payloads (the unreadable ones kept in the bad list, as
// setAside does), all at once. Returns {queued, excluded}.
var recordScript = redis.NewScript(fence + counters + addEntries + `
local t, nbad = tonumber(ARGV[4]), tonumber(ARGV[5])
local inc, flush = counter(KEYS[3])
local added, excluded = add_entries(KEYS[2], KEYS[4], tonumber(ARGV[2]), 8, 6 + nbad, #KEYS - 7, inc)
if ARGV[3] ~= '' then redis.call('RPUSH', KEYS[5], ARGV[3]) end
if t > 0 then
  redis.call('LTRIM', KEYS[6], t, -1)
  inc('inbox', -t)
end
for i = 6, 5 + nbad do redis.call('RPUSH', KEYS[7], KEYS[6] .. '\n' .. string.sub(ARGV[i], 1, ` + strconv.Itoa(maxBadBytes) + `)) end
if nbad > 0 then
  redis.call('LTRIM', KEYS[7], -` + strconv.Itoa(maxBadKept) + `, -1)
  inc('bad', nbad)
end
flush()
return {added, excluded}
`)

// deliver (any worker, not fenced: the owner checks what it delivers): KEYS inbox, counts; ARGV
// payloads. Appends the payloads to the partition's inbox and counts them.
var deliverScript = redis.NewScript(safeCount + `
redis.call('RPUSH', KEYS[1], unpack(ARGV))
cincr(KEYS[2], 'inbox', #ARGV)
return #ARGV
`)

// repairLog (owner): KEYS owner, seen log, counts; ARGV token. Deletes a seen log that is not a
// list (damage: it held nothing the scripts wrote) and counts one repair.
var repairLogScript = redis.NewScript(fence + safeCount + `
local t = redis.call('TYPE', KEYS[2]).ok
if t == 'none' or t == 'list' then return 0 end
redis.call('DEL', KEYS[2])
cincr(KEYS[3], 'repaired', 1)
return 1
`)

// lease: KEYS owner, queue, delayed, inflight, hosts, counts; ARGV token, host, url-ttl-ms, n,
// in-flight prefix. Moves the host's due retries (and those due more than maxRetryDelay from
// now: damage) to the queue's tail, pops up to n items from
// the head into the in-flight set (after the prefix, as in-flight members are) scored by their
// deadline, and drops the host from the hosts set when it has nothing left. Returns
// {deadline-ms, now-ms, item…} (the items as queued), or {next-due-ms or -1, now-ms} with no
// item.
var leaseScript = redis.NewScript(fence + safeCount + `
local now = nowms()
local n = tonumber(ARGV[4])
local far = '(' .. (now + ` + strconv.FormatInt(maxRetryDelay.Milliseconds(), 10) + `)
local due = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)
local absurd = redis.call('ZRANGEBYSCORE', KEYS[3], far, '+inf')
for _, it in ipairs(absurd) do due[#due+1] = it end
if #due > 0 then
  for i = 1, #due, 1000 do redis.call('RPUSH', KEYS[2], unpack(due, i, math.min(i + 999, #due))) end
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  if #absurd > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[3], far, '+inf') end
  cincr(KEYS[6], 'delayed', -#due)
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
for i = 1, #z, 1000 do redis.call('ZADD', KEYS[4], unpack(z, i, math.min(i + 999, #z))) end -- pairs: unpack is bounded
cincr(KEYS[6], 'inflight', #items)
local out = {deadline, now}
for _, it in ipairs(items) do out[#out+1] = it end
return out
`)

// complete: KEYS owner, inflight, counts, outbox, hosts, used, seen log, then per result its
// host's delayed set, then per group of entries of this partition its host's queue (the keys of
// add_entries); ARGV token, outbox payload (empty for none), number of results, host budget (0:
// none), the new fingerprints packed (8 bytes each, one more element of the seen log: the links the owner found not in its
// seen-set, and any completed URL missing there), then per result: in-flight member, kind ('f'
// fetched, 'F' failed, 'x' excluded, 'r' retry), retry item, retry not-before-ms, host, reason
// (failed, excluded), then the groups' arguments of add_entries. Returns per result 1, or 0
// when its URL was not in flight (its state is then left alone). The entries are the new links
// (and exclusions) of the batch's fetched pages that belong to this partition, added at once;
// the payload holds the others, for Forward. Counters change once per batch.
var completeScript = redis.NewScript(fence + counters + addEntries + `
local nres = tonumber(ARGV[3])
local add, flush = counter(KEYS[3])
local names = {f='fetched', F='failed', x='excluded'}
local members, res, gone = {}, {}, {}
for i = 0, nres - 1 do members[i+1] = ARGV[6 + 6*i] end
for i = 1, #members, 1000 do
  local part = {unpack(members, i, math.min(i + 999, #members))}
  local sc = redis.call('ZMSCORE', KEYS[2], unpack(part))
  for j = 1, #part do
    if sc[j] then res[i+j-1] = 1; gone[#gone+1] = part[j] else res[i+j-1] = 0 end
  end
end
for i = 1, #gone, 1000 do redis.call('ZREM', KEYS[2], unpack(gone, i, math.min(i + 999, #gone))) end
add('inflight', -#gone)
for i = 0, nres - 1 do
  if res[i+1] == 1 then
    local a = 6 + 6*i
    local k = ARGV[a+1]
    if k == 'r' then
      redis.call('ZADD', KEYS[8+i], ARGV[a+3], ARGV[a+2])
      redis.call('SADD', KEYS[5], ARGV[a+4])
      add('delayed', 1)
    else
      add('queued', -1)
      add(names[k], 1)
      if k ~= 'f' then add(names[k] .. ':' .. ARGV[a+5], 1) end
    end
  end
end
local kg = 8 + nres
add_entries(KEYS[5], KEYS[6], tonumber(ARGV[4]), kg, 6 + 6*nres, #KEYS - kg + 1, add)
if ARGV[5] ~= '' then redis.call('RPUSH', KEYS[7], ARGV[5]) end
if ARGV[2] ~= '' then
  redis.call('RPUSH', KEYS[4], ARGV[2])
  add('outbox', 1)
end
flush()
return res
`)

// reclaim: KEYS owner, inflight, hosts, counts, then one queue per item; ARGV token, then per
// item: in-flight member, item to queue (attempt + 1), host. Returns how many it moved.
var reclaimScript = redis.NewScript(fence + safeCount + `
local n = 0
for i = 0, #KEYS - 5 do
  if redis.call('ZREM', KEYS[2], ARGV[2+3*i]) == 1 then
    redis.call('LPUSH', KEYS[5+i], ARGV[3+3*i])
    redis.call('SADD', KEYS[3], ARGV[4+3*i])
    n = n + 1
  end
end
cincr(KEYS[4], 'inflight', -n)
return n
`)

// trim: KEYS owner, outbox, counts, bad; ARGV token, n, then the payloads among them that
// could not be read. Drops the outbox's first n payloads, and keeps those unreadable in the
// partition's bad list as setAside does.
var trimScript = redis.NewScript(fence + safeCount + `
redis.call('LTRIM', KEYS[2], ARGV[2], -1)
cincr(KEYS[3], 'outbox', -tonumber(ARGV[2]))
for i = 3, #ARGV do redis.call('RPUSH', KEYS[4], KEYS[2] .. '\n' .. string.sub(ARGV[i], 1, ` + strconv.Itoa(maxBadBytes) + `)) end
if #ARGV > 2 then
  redis.call('LTRIM', KEYS[4], -` + strconv.Itoa(maxBadKept) + `, -1)
  cincr(KEYS[3], 'bad', #ARGV - 2)
end
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
// the workers whose lease ended (and those whose lease would end more than MaxLeaseTTL from
// now, which no worker's can: damage), and returns {1 if the caller's lease was still live (0: none,
// or it had ended), the live workers…}.
var heartbeatScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local far = now + ` + strconv.FormatInt(MaxLeaseTTL.Milliseconds(), 10) + `
local cur = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
local kept = 0
if cur and cur > now and cur <= far then kept = 1 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '(' .. far, '+inf')
local out = redis.call('ZRANGE', KEYS[1], 0, -1)
table.insert(out, 1, kept)
return out
`)

// alive: KEYS workers; ARGV worker ids. Returns, per id, 1 if its lease is live now (Redis
// clock) and ends within MaxLeaseTTL, else 0. Read-only.
var aliveScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local far = now + ` + strconv.FormatInt(MaxLeaseTTL.Milliseconds(), 10) + `
local out = {}
for i, id in ipairs(ARGV) do
  local sc = tonumber(redis.call('ZSCORE', KEYS[1], id))
  if sc and sc > now and sc <= far then out[i] = 1 else out[i] = 0 end
end
return out
`)

// putBack: KEYS owner, inflight, queue, hosts, counts; ARGV token, in-flight member, host,
// item. Puts a leased URL back at the head of its queue as it was (no attempt counted).
var putBackScript = redis.NewScript(fence + safeCount + `
if redis.call('ZREM', KEYS[2], ARGV[2]) == 0 then return redis.error_reply('NOTINFLIGHT') end
redis.call('LPUSH', KEYS[3], ARGV[4])
redis.call('SADD', KEYS[4], ARGV[3])
cincr(KEYS[5], 'inflight', -1)
return 1
`)
