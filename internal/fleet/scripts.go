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

// seenSet is the seen-set of one partition: one hash whose fields are buckets, each a string
// of 8-byte records (a URL's fingerprint, seenFP, then its state's byte), grown by linear
// hashing so that a bucket holds seenLoad records on average at any size (docs/fleet.md
// "Seen-set"). A script reads every bucket it needs with one HMGET and writes every bucket it
// changed with one HSET, however many URLs it looks up.
//
//	seenOpen(key) reads the bucket count; seenPreload(fps) reads the buckets of fps in one
//	call; seenState(fp) is fp's state byte, or nil when unseen; seenPut(fp, st) records fp in
//	state st (appended when new, which may split buckets); seenFind(fp) is fp's bucket and
//	its record's position there (nil when unseen), and seenAppend(b, fp, st) records an unseen
//	fp in its bucket b, one search for a URL added; seenClose() writes what changed.
//
// Lookups that miss the preloaded buckets (after a split) read their bucket on their own.
// A bucket count n that is not an integer from 1 to the buckets the hash holds (its fields but
// n and urls; at most seenMaxN) is taken from the hash's fields, a URL count urls that is not
// an integer in [0, seenLoad·n] is counted from the buckets' lengths (work in proportion to
// what is stored, and only then), and a value repaired sets seenRepaired (the scripts count
// it in the partition's "repaired" counter): no value makes a script loop beyond what the
// hash holds.
var seenSet = `
local seenKey, seenN, seenM, seenURLs, seenB, seenDirty, seenNames
local seenLoad = ` + strconv.Itoa(seenLoad) + `
local seenMaxN = ` + strconv.Itoa(seenMaxN) + `
local function seenTop()
  seenM = 1
  while seenM * 2 <= seenN do seenM = seenM * 2 end
end
local function seenInt(v, lo, hi) -- v if it is an integer in [lo, hi], else nil
  local n = tonumber(v)
  if n and n == math.floor(n) and n >= lo and n <= hi then return n end
  return nil
end
local seenRepaired = false
local function seenOpen(key)
  seenKey, seenB, seenDirty, seenNames = key, {}, {}, {}
  local v = redis.call('HMGET', key, 'n', 'urls')
  seenN, seenURLs = 1, 0
  if v[1] or v[2] then
    local buckets = redis.call('HLEN', key) - (v[1] and 1 or 0) - (v[2] and 1 or 0)
    seenN = seenInt(v[1] or '', 1, math.min(math.max(buckets, 1), seenMaxN))
    if not seenN then -- damaged: every bucket 0..n-1 is a field, beside n and urls
      seenN = math.max(1, math.min(buckets, seenMaxN))
      seenRepaired = true
    end
    seenURLs = seenInt(v[2] or '', 0, seenLoad * seenN)
    if not seenURLs then -- damaged, or over the load: count the records (8 bytes each)
      local bytes = 0
      for b = 0, seenN - 1 do bytes = bytes + redis.call('HSTRLEN', key, b) end
      seenURLs = math.floor(bytes / 8)
      seenRepaired = tostring(seenURLs) ~= v[2]
    end
  end
  if seenRepaired then
    redis.log(redis.LOG_WARNING, 'crawl: seen-set ' .. key .. ': damaged n or urls, repaired to ' .. seenN .. ', ' .. seenURLs)
  end
  seenTop()
end
local function seenHash(fp) -- the first 31 bits of fp
  local a, b, c, d = string.byte(fp, 1, 4)
  return ((a * 256 + b) * 256 + c) * 128 + math.floor(d / 2)
end
local function seenIndex(fp)
  local h = seenHash(fp)
  local b = h % (2 * seenM)
  if b >= seenN then b = h % seenM end
  return b
end
local function seenField(b) -- bucket b's field: an integer's digits, formatted once
  local f = seenNames[b]
  if not f then f = string.format('%d', b); seenNames[b] = f end
  return f
end
local function seenPreload(fps)
  local want, names = {}, {}
  for _, fp in ipairs(fps) do
    local b = seenIndex(fp)
    if seenB[b] == nil then seenB[b] = ''; want[#want+1] = b; names[#names+1] = seenField(b) end
  end
  for i = 1, #want, 1000 do -- in chunks: unpack is bounded
    local last = math.min(i + 999, #want)
    local r = redis.call('HMGET', seenKey, unpack(names, i, last))
    for j = i, last do seenB[want[j]] = r[j - i + 1] or '' end
  end
end
local function seenBucket(b)
  if seenB[b] == nil then seenB[b] = redis.call('HGET', seenKey, b) or '' end
  return seenB[b]
end
local function seenFind(fp) -- fp's bucket, and its record's position there or nil
  local b = seenIndex(fp)
  local s, i = seenBucket(b), 1
  while true do
    local p = string.find(s, fp, i, true)
    if not p then return b, nil end
    if p % 8 == 1 then return b, p end
    i = p + 1
  end
end
local function seenState(fp)
  local b, p = seenFind(fp)
  if p then return string.sub(seenB[b], p + 7, p + 7) end
  return nil
end
local function seenSplit()
  local src = seenN - seenM
  local s, keep, move = seenBucket(src), {}, {}
  for i = 1, #s - 7, 8 do
    local r = string.sub(s, i, i + 7)
    if math.floor(seenHash(r) / seenM) % 2 == 1 then move[#move+1] = r else keep[#keep+1] = r end
  end
  seenB[src], seenB[seenN] = table.concat(keep), table.concat(move)
  seenDirty[src], seenDirty[seenN] = true, true
  seenN = seenN + 1
  seenTop()
end
local function seenAppend(b, fp, st) -- records fp, unseen, in b: its bucket (seenFind's)
  seenB[b] = seenB[b] .. fp .. st
  seenDirty[b] = true
  seenURLs = seenURLs + 1
  while seenURLs > seenLoad * seenN and seenN < seenMaxN do seenSplit() end
end
local function seenPut(fp, st)
  local b, p = seenFind(fp)
  if not p then return seenAppend(b, fp, st) end
  local s = seenB[b]
  seenDirty[b] = true
  seenB[b] = string.sub(s, 1, p + 6) .. st .. string.sub(s, p + 8)
end
local function seenClose()
  local kv = {}
  for b in pairs(seenDirty) do kv[#kv+1] = seenField(b); kv[#kv+1] = seenB[b] end
  if #kv == 0 and not seenRepaired then return end
  kv[#kv+1] = 'n'; kv[#kv+1] = seenN; kv[#kv+1] = 'urls'; kv[#kv+1] = seenURLs
  for i = 1, #kv, 1000 do redis.call('HSET', seenKey, unpack(kv, i, math.min(i + 999, #kv))) end
end
`

// seenMaxN bounds a seen-set's buckets: a bucket is picked by 31 bits of a fingerprint.
const seenMaxN = 1 << 31

// seenLoad is the seen-set's records per bucket: a partition splits a bucket whenever it holds
// more (docs/fleet.md "Seen-set"). Buckets average seenLoad records (512 bytes) and the fullest
// (those the split pointer has not reached) twice that.
const seenLoad = 64

// The seen-set's states: a record's last byte. A fetched URL keeps seenQueued ("recorded"):
// whether it is still queued is what the queues and the in-flight set say.
const (
	seenQueued   = "1"
	seenFailed   = "3"
	seenExcluded = "4"
)

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

// addEntries defines add_entries(hosts, used, budget, k, a, n, inc), after seenSet and
// counters, with the seen-set open (seenOpen): it adds n groups of entries (appendWrites),
// whose keys start at KEYS[k] (per group its host's queue) and whose arguments start at
// ARGV[a]; per group: host, state ('1' to queue, '4' excluded), exclusion reason, count c,
// then c fingerprints (seenFP), then, for state '1', the c items in the same order. The caller
// preloads their buckets: seenPreload(group_fps({}, a, n)). It counts in inc what it queued
// ('queued') and excluded ('excluded', 'excluded:REASON'); the caller closes the seen-set. A
// group's new items are pushed with one RPUSH, so a script does per host, not per URL, what
// touches a host's keys. With a budget (> 0), a host's URLs ever queued are counted in used
// (read and written once per group), and an unseen URL of a host at its budget is excluded
// ('limit') instead of queued. A host's first queued URL puts it in the hosts set (a host with
// URLs queued is always there: lease removes it only once it has none). Returns how many it
// queued and excluded.
const addEntries = `
local function group_fps(fps, a, n) -- appends the fingerprints of n groups from ARGV[a]
  for _ = 1, n do
    local c = tonumber(ARGV[a+3])
    for i = a + 4, a + 3 + c do fps[#fps+1] = ARGV[i] end
    a = a + 4 + c * (ARGV[a+1] == '1' and 2 or 1)
  end
  return fps
end
local function add_entries(hosts, used, budget, k, a, n, inc)
  local added, excluded = 0, 0
  for g = 0, n - 1 do
    local host, st, reason, c = ARGV[a], ARGV[a+1], ARGV[a+2], tonumber(ARGV[a+3])
    local queue = st == '1'
    local room -- with a budget: how many more of host's URLs may be queued
    if queue and budget > 0 then room = budget - (tonumber(redis.call('HGET', used, host) or '0') or 0) end
    local items = {}
    for i = a + 4, a + 3 + c do
      local fp = ARGV[i]
      local b, p = seenFind(fp)
      if not p then
        if queue and (not room or room > 0) then
          seenAppend(b, fp, '1')
          items[#items+1] = ARGV[i + c]
          if room then room = room - 1 end
        else
          seenAppend(b, fp, '4')
          excluded = excluded + 1
          inc('excluded:' .. (queue and 'limit' or reason), 1)
        end
      end
    end
    if #items > 0 then
      local len
      for i = 1, #items, 1000 do len = redis.call('RPUSH', KEYS[k+g], unpack(items, i, math.min(i + 999, #items))) end
      if len == #items then redis.call('SADD', hosts, host) end
      if budget > 0 then cincr(used, host, #items) end
      added = added + #items
    end
    a = a + 4 + c * (queue and 2 or 1)
  end
  inc('queued', added)
  inc('excluded', excluded)
  return added, excluded
end
`

// add (any worker, not fenced: it only inserts, and the seen-set makes it idempotent):
// KEYS hosts, counts, used, seen-set, then per group of entries its host's queue; ARGV the
// host budget (0: none), then the groups' arguments of add_entries. Returns {queued, excluded}.
var addScript = redis.NewScript(seenSet + counters + addEntries + `
seenOpen(KEYS[4])
seenPreload(group_fps({}, 2, #KEYS - 4))
local inc, flush = counter(KEYS[2])
local added, excluded = add_entries(KEYS[1], KEYS[3], tonumber(ARGV[1]), 5, 2, #KEYS - 4, inc)
if seenRepaired then inc('repaired', 1) end
seenClose()
flush()
return {added, excluded}
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

// complete: KEYS owner, inflight, counts, outbox, hosts, used, seen-set, then per result its
// host's delayed set, then per group of entries of this partition its host's queue (the keys
// of add_entries); ARGV token, outbox payload (empty for none), number of results, host budget
// (0: none), then per result: in-flight member, fingerprint (seenFP), kind ('f' fetched, 'F'
// failed, 'x' excluded, 'r' retry), retry item, retry not-before-ms, host, reason (failed,
// excluded), then the groups' arguments of add_entries. Returns per result 1, or 0 when
// its URL was not in flight (its state is then left alone). The entries are the links (and
// exclusions) of the batch's fetched pages that belong to this partition, added at once; the
// payload holds the others, for Forward. A fetched URL's record keeps its state (recorded; one
// missing is added), a failed or excluded one's changes. The seen-set buckets of the results
// and entries are read with one HMGET. Counters change once per batch.
var completeScript = redis.NewScript(fence + seenSet + counters + addEntries + `
seenOpen(KEYS[7])
local add, flush = counter(KEYS[3])
local names = {f='fetched', F='failed', x='excluded'}
local states = {F='3', x='4'}
local nres = tonumber(ARGV[3])
local members, res, gone = {}, {}, {}
for i = 0, nres - 1 do members[i+1] = ARGV[5 + 7*i] end
for i = 1, #members, 1000 do
  local part = {unpack(members, i, math.min(i + 999, #members))}
  local sc = redis.call('ZMSCORE', KEYS[2], unpack(part))
  for j = 1, #part do
    if sc[j] then res[i+j-1] = 1; gone[#gone+1] = part[j] else res[i+j-1] = 0 end
  end
end
for i = 1, #gone, 1000 do redis.call('ZREM', KEYS[2], unpack(gone, i, math.min(i + 999, #gone))) end
add('inflight', -#gone)
local fps = {}
for i = 0, nres - 1 do
  if res[i+1] == 1 and ARGV[7 + 7*i] ~= 'r' then fps[#fps+1] = ARGV[6 + 7*i] end
end
seenPreload(group_fps(fps, 5 + 7*nres, #KEYS - 7 - nres))
for i = 0, nres - 1 do
  if res[i+1] == 1 then
    local a = 5 + 7*i
    local k = ARGV[a+2]
    if k == 'r' then
      redis.call('ZADD', KEYS[8+i], ARGV[a+4], ARGV[a+3])
      redis.call('SADD', KEYS[5], ARGV[a+5])
      add('delayed', 1)
    else
      if states[k] then seenPut(ARGV[a+1], states[k])
      elseif not seenState(ARGV[a+1]) then seenPut(ARGV[a+1], '1') end
      add('queued', -1)
      add(names[k], 1)
      if k ~= 'f' then add(names[k] .. ':' .. ARGV[a+6], 1) end
    end
  end
end
add_entries(KEYS[5], KEYS[6], tonumber(ARGV[4]), 8 + nres, 5 + 7*nres, #KEYS - 7 - nres, add)
if ARGV[2] ~= '' then
  redis.call('RPUSH', KEYS[4], ARGV[2])
  add('outbox', 1)
end
if seenRepaired then add('repaired', 1) end
seenClose()
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
