package fleet

import (
	"strconv"
	"strings"

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

// seenSet is the seen-set of one partition: a header hash (n buckets, urls members) and n
// bucket sets of seenMember integers, grown by linear hashing so that a bucket holds seenLoad
// members on average (docs/fleet.md "Seen-set"). A URL is looked up and recorded by one SADD,
// in C: no bucket is copied into Lua.
//
// Every bucket a script may touch is declared in KEYS: the caller, from what it last knew of
// the header (seenView, n_w), passes the "seen block": in KEYS the bucket keys, in ARGV n_w,
// the splits k it allows, the number of buckets nb and their numbers, packed in one argument
// (4 bytes each, little-endian: read by struct.unpack, not parsed from text). The buckets are
// those of each fingerprint under every bucket count from n_w to n_w + k, the pairs split on
// the way there, and bucket n_w - 1.
//
//	seenOpen(meta, kb, ab) reads the header (bucket keys from KEYS[kb], the block's
//	arguments from ARGV[ab]) and returns an error reply before anything is written: STALE n
//	urls when n is not in [n_w, n_w + k], or when urls needs more splits than k and k is not
//	the most allowed (the caller asks again with the buckets of that header),
//	SEENDAMAGED when the header is not two integers in range or bucket n-1 is missing (the
//	caller recounts the buckets, Store.repairSeen). seenAdd(m) records member m and says
//	whether it was new, splitting while the load is over seenLoad and n below n_w + k (a
//	split left is done by a later script). seenClose() writes the header.
//
// A bucket key that is not a set is deleted (it held nothing of the seen-set) and counted in
// seenRepaired (the scripts count it in the partition's "repaired" counter).
var seenSet = `
local seenMeta, seenN, seenM, seenURLs, seenKeys, seenTo, seenDirty
local seenLoad = ` + strconv.Itoa(seenLoad) + `
local seenMaxN = ` + strconv.Itoa(seenMaxN) + `
local seenMaxSplits = ` + strconv.Itoa(seenMaxSplits) + `
local seenIntset = ` + strconv.Itoa(seenIntset) + `
local seenRepaired = false
local seenFmt = '<` + strings.Repeat("I4", 200) + `' -- a constant: made when the script loads
local function seenU32(s) -- the little-endian 32-bit integers packed in s (the caller's), in order
  local out, n, pos, i = {}, math.floor(#s / 4), 1, 0
  while i < n do
    local c = math.min(n - i, 200)
    local v = {struct.unpack(c == 200 and seenFmt or string.sub(seenFmt, 1, 1 + 2 * c), s, pos)}
    for j = 1, c do out[i + j] = v[j] end
    pos, i = v[c + 1], i + c
  end
  return out
end
local function seenTop()
  seenM = 1
  while seenM * 2 <= seenN do seenM = seenM * 2 end
end
local function seenInt(v, lo, hi) -- v if it is an integer in [lo, hi], else nil
  local n = tonumber(v)
  if n and n == math.floor(n) and n >= lo and n <= hi then return n end
  return nil
end
local function seenOpen(meta, kb, ab)
  seenMeta, seenKeys, seenDirty = meta, {}, false
  local nw, k, nb = tonumber(ARGV[ab]), tonumber(ARGV[ab+1]), tonumber(ARGV[ab+2])
  local bs = seenU32(ARGV[ab+3])
  for i = 1, nb do seenKeys[bs[i]] = KEYS[kb+i-1] end
  seenTo = nw + k
  local v = redis.call('HMGET', meta, 'n', 'urls')
  seenN, seenURLs = 1, 0
  if v[1] or v[2] then
    seenN = seenInt(v[1] or '', 1, seenMaxN)
    seenURLs = seenInt(v[2] or '', 0, seenLoad * seenMaxN)
    if not seenN or not seenURLs then return redis.error_reply('SEENDAMAGED') end
  end
  local short = seenURLs > seenLoad * seenTo and k < seenMaxSplits and seenTo < seenMaxN
  if seenN < nw or seenN > seenTo or short then return redis.error_reply('STALE ' .. seenN .. ' ' .. seenURLs) end
  if seenN > 1 and redis.call('EXISTS', seenKeys[seenN - 1]) == 0 then return redis.error_reply('SEENDAMAGED') end
  seenTop()
  return nil
end
-- Members are read as numbers by arithmetic, which parses a string once (tonumber parses it
-- twice, and a member's 19 digits cost strtod about 1,000 instructions each time) and raises
-- an error on one that is not a number: seenAdd is given only the caller's members, and
-- seenSplit partitions a bucket's inside pcall.
-- seenParts(ms, move, keep) puts in move the members of ms whose bit L of h is set (seenM =
-- 2^L), the others in keep: floor(m / (10^10·2^L)) is floor(h / 2^L) (10^10·2^L is a double
-- and the division by 2^L exact), so bit L is set when that quotient mod 2 is 1 or more.
local function seenParts(ms, move, keep)
  local d, nm, nk = 1e10 * seenM, 0, 0
  for i = 1, #ms do
    local x = ms[i]
    if (x / d) % 2 >= 1 then nm = nm + 1; move[nm] = x else nk = nk + 1; keep[nk] = x end
  end
end
local function seenSadd(k, ...) -- SADD; a key that is not a set is deleted first
  local r = redis.pcall('SADD', k, ...)
  if r == 1 or r == 0 then return r end -- the usual reply, without a call to type()
  if type(r) == 'table' then
    redis.call('DEL', k)
    seenRepaired = true
    r = redis.call('SADD', k, ...)
  end
  return r
end
local function seenSplit()
  local src, dst = seenKeys[seenN - seenM], seenKeys[seenN]
  local ms = redis.pcall('SMEMBERS', src)
  if ms.err then redis.call('DEL', src); seenRepaired = true; ms = {} end
  local move, keep = {}, {}
  if not pcall(seenParts, ms, move, keep) then -- a member that is not a number (damage): as h 0
    move, keep = {}, {}
    for _, x in ipairs(ms) do
      if math.floor(math.floor((tonumber(x) or 0) / 1e10) / seenM) % 2 == 1 then move[#move+1] = x else keep[#keep+1] = x end
    end
  end
  local big = #ms > seenIntset -- not an intset: written again, as one if it is small enough now
  if big then redis.call('DEL', src) end
  for i = 1, math.max(#move, big and #keep or 0), 1000 do
    if big and i <= #keep then redis.call('SADD', src, unpack(keep, i, math.min(i + 999, #keep))) end
    if i <= #move then
      local last = math.min(i + 999, #move)
      if not big then redis.call('SREM', src, unpack(move, i, last)) end
      seenSadd(dst, unpack(move, i, last))
    end
  end
  seenN = seenN + 1
  seenDirty = true
  seenTop()
end
local function seenHashOf(m) -- h of member m, one of the caller's
  local q = m / 1e10
  return q - q % 1 -- floor(q): h, the digits before the last ten (exact: h·10^10 is a double)
end
local function seenAdd(m, h) -- records member m, whose hash is h; true when it was not seen before
  local b = h % (2 * seenM)
  if b >= seenN then b = h % seenM end
  if seenSadd(seenKeys[b], m) == 0 then return false end
  seenURLs = seenURLs + 1
  seenDirty = true
  while seenURLs > seenLoad * seenN and seenN < seenTo do seenSplit() end
  return true
end
local function seenClose()
  if seenDirty then redis.call('HSET', seenMeta, 'n', seenN, 'urls', seenURLs) end
end
`

// seenMaxN bounds a seen-set's buckets: a bucket is picked by seenHash's 29 bits.
const seenMaxN = 1 << 29

// seenLoad is the seen-set's members per bucket: a partition splits a bucket whenever it holds
// more (docs/fleet.md "Seen-set"). Buckets average seenLoad members (1 KiB) and the fullest
// (those the split pointer has not reached) twice that, well below Redis' set-max-intset-entries
// (512), past which a bucket would take about 40 bytes a member instead of 8.
const seenLoad = 128

// seenIntset is Redis' default set-max-intset-entries: a set of more members is a hash table.
const seenIntset = 512

// seenSlackMin and seenSlackMax bound the splits beyond its own that a script's seen block
// allows (writes of other workers to the partition between what the caller knew and the
// script's run; Store.seenSlackOf); seenMaxSplits bounds the splits one script may do.
const (
	seenSlackMin  = 2
	seenSlackMax  = 32
	seenMaxSplits = 1024
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
// the c members' seenHash packed (4 bytes each, little-endian), then c members (seenMember),
// then, for state '1', the c items in the same order. It counts in inc what it queued
// ('queued') and excluded ('excluded', 'excluded:REASON'); the caller
// closes the seen-set. A group's new items are pushed with one RPUSH, so a script does per
// host, not per URL, what touches a host's keys. With a budget (> 0), a host's URLs ever
// queued are counted in used (read and written once per group), and an unseen URL of a host at
// its budget is excluded ('limit') instead of queued. A host's first queued URL puts it in the
// hosts set (a host with URLs queued is always there: lease removes it only once it has none).
// Returns how many it queued and excluded.
const addEntries = `
local function add_entries(hosts, used, budget, k, a, n, inc)
  local added, excluded = 0, 0
  for g = 0, n - 1 do
    local host, st, reason, c = ARGV[a], ARGV[a+1], ARGV[a+2], tonumber(ARGV[a+3])
    local queue = st == '1'
    local room -- with a budget: how many more of host's URLs may be queued
    if queue and budget > 0 then room = budget - (tonumber(redis.call('HGET', used, host) or '0') or 0) end
    local items, ni = {}, 0
    local hs = seenU32(ARGV[a+4])
    for i = a + 5, a + 4 + c do
      if seenAdd(ARGV[i], hs[i - a - 4]) then
        if queue and (not room or room > 0) then
          ni = ni + 1
          items[ni] = ARGV[i + c]
          if room then room = room - 1 end
        else
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
    a = a + 5 + c * (queue and 2 or 1)
  end
  inc('queued', added)
  inc('excluded', excluded)
  return added, excluded
end
`

// add (any worker, not fenced: it only inserts, and the seen-set makes it idempotent):
// KEYS hosts, counts, used, seen-set header, the nb bucket keys of the seen block, then per
// group of entries its host's queue; ARGV the host budget (0: none), the seen block (n_w, k,
// nb, the nb bucket numbers packed as seenU32 reads them), then the groups' arguments of
// add_entries. Returns {queued, excluded, n, urls} (the header after), or seenOpen's error
// reply having written nothing.
var addScript = redis.NewScript(seenSet + counters + addEntries + `
local nb = tonumber(ARGV[4])
local stale = seenOpen(KEYS[4], 5, 2)
if stale then return stale end
local inc, flush = counter(KEYS[2])
local added, excluded = add_entries(KEYS[1], KEYS[3], tonumber(ARGV[1]), 5 + nb, 6, #KEYS - 4 - nb, inc)
if seenRepaired then inc('repaired', 1) end
seenClose()
flush()
return {added, excluded, seenN, seenURLs}
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

// complete: KEYS owner, inflight, counts, outbox, hosts, used, seen-set header, then per result
// its host's delayed set, then the nb bucket keys of the seen block, then per group of entries
// of this partition its host's queue (the keys of add_entries); ARGV token, outbox payload
// (empty for none), number of results, host budget (0: none), then per result: in-flight
// member, seen member (seenMember), kind ('f' fetched, 'F' failed, 'x' excluded, 'r' retry),
// retry item, retry not-before-ms, host, reason (failed, excluded), then the seen block (n_w,
// k, nb, the nb bucket numbers packed), then the groups' arguments of add_entries. Returns per
// result 1, or 0 when its URL was not in flight (its state is then left alone), then the header's n
// and urls after; or, having written nothing, seenOpen's error reply. The entries are the links
// (and exclusions) of the batch's fetched pages that belong to this partition, added at once;
// the payload holds the others, for Forward. A completed URL's member is recorded (one missing
// is added). Counters change once per batch.
var completeScript = redis.NewScript(fence + seenSet + counters + addEntries + `
local nres = tonumber(ARGV[3])
local sb = 5 + 7*nres -- the seen block's arguments
local nb = tonumber(ARGV[sb+2])
local stale = seenOpen(KEYS[7], 8 + nres, sb)
if stale then return stale end
local add, flush = counter(KEYS[3])
local names = {f='fetched', F='failed', x='excluded'}
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
for i = 0, nres - 1 do
  if res[i+1] == 1 then
    local a = 5 + 7*i
    local k = ARGV[a+2]
    if k == 'r' then
      redis.call('ZADD', KEYS[8+i], ARGV[a+4], ARGV[a+3])
      redis.call('SADD', KEYS[5], ARGV[a+5])
      add('delayed', 1)
    else
      seenAdd(ARGV[a+1], seenHashOf(ARGV[a+1]))
      add('queued', -1)
      add(names[k], 1)
      if k ~= 'f' then add(names[k] .. ':' .. ARGV[a+6], 1) end
    end
  end
end
local kg = 8 + nres + nb
add_entries(KEYS[5], KEYS[6], tonumber(ARGV[4]), kg, sb + 4, #KEYS - kg + 1, add)
if ARGV[2] ~= '' then
  redis.call('RPUSH', KEYS[4], ARGV[2])
  add('outbox', 1)
end
if seenRepaired then add('repaired', 1) end
seenClose()
flush()
res[#res+1] = seenN
res[#res+1] = seenURLs
return res
`)

// repairSeen: KEYS seen-set header, counts; ARGV the header's n and urls as read (” for
// none), then the recounted n and urls. Writes them, and counts one repair, only if the header
// still holds what was read. Returns 1 if it wrote.
var repairSeenScript = redis.NewScript(safeCount + `
local v = redis.call('HMGET', KEYS[1], 'n', 'urls')
if (v[1] or '') ~= ARGV[1] or (v[2] or '') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'n', ARGV[3], 'urls', ARGV[4])
cincr(KEYS[2], 'repaired', 1)
return 1
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
