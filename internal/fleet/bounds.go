package fleet

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A shared crawl's Redis is a trust boundary: any machine that can write to it can write
// anything. What the package reads back is checked against the bounds below before it is
// used to allocate or to loop; a value out of bounds is named (its key, its field, its
// contents quoted and cut) and never halts a worker (docs/guarantees.md "Hostile contents in
// Redis").

// MaxPartitions bounds a crawl's partitions: the --partitions a crawl may be created with,
// and what a crawl's configuration may say (a bigger number is damage, not a crawl).
const MaxPartitions = 1 << 16

// MaxLeaseTTL bounds a worker's lease TTL (Options.LeaseTTL, the crawler's --lease-ttl): a
// heartbeat that says a lease ends later than that from now is damage, and no lease.
const MaxLeaseTTL = time.Hour

// maxCount bounds a counter of a partition (URLs queued, fetched, …): more is damage. It has
// 15 digits, the most the scripts' countOK lets HINCRBY change.
const maxCount = 999_999_999_999_999

// errBadValue is wrapped by the errors naming a value read from Redis that is out of its
// bounds or unreadable.
var errBadValue = errors.New("fleet: bad value in Redis")

// badValue is the error for value v of key (field, if not "") that is not what want says.
func badValue(key, field, v, want string) error {
	if field != "" {
		key += " field " + field
	}
	return fmt.Errorf("%w: %s holds %q (%d bytes), want %s", errBadValue, key, clip(v), len(v), want)
}

// intIn parses v, read from key's field, as a decimal integer in [lo, hi].
func intIn(key, field, v string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, badValue(key, field, v, fmt.Sprintf("an integer from %d to %d", lo, hi))
	}
	return n, nil
}

// configInt returns the integer of setting name in a crawl's configuration cfg (key's
// value: space-separated name=value settings), which must be in [lo, hi]; ok is false when
// cfg does not set it.
func configInt(key, cfg, name string, lo, hi int64) (n int64, ok bool, err error) {
	for _, f := range strings.Fields(cfg) {
		if v, found := strings.CutPrefix(f, name+"="); found {
			n, err := intIn(key, name, v, lo, hi)
			return n, true, err
		}
	}
	return 0, false, nil
}

// countOf reads a partition counter (field of the counts hash key) as Redis holds it: absent
// is 0; ok is false for a value that is not an integer in [0, maxCount], which the partition's
// owner recounts (Store.recount).
func countOf(key, field, v string) (n int, ok bool) {
	c, err := intIn(key, field, v, 0, maxCount)
	return int(c), err == nil
}

// The set-aside list of a partition ({p}:bad) keeps the last maxBadKept values that could not
// be read (queue items, in-flight members, outbox payloads), each as its key, a newline and
// its first maxBadBytes bytes; the partition's counter "bad" counts them all.
const (
	maxBadKept  = 1000
	maxBadBytes = 4096
)

// bad is partition p's set-aside list.
func (k keys) bad(p int) string { return k.part(p, "bad") }

// asideNote tells of a value read from Redis that could not be used, moved to its
// partition's set-aside list (List) and counted there: From is the key it was read from, Err
// says why.
type asideNote struct {
	From, List string
	Err        error
}

// setAsideScript: KEYS owner, inflight, counts, bad; ARGV token, then per member: the
// in-flight member, the key it was read from. Moves each member still in flight to the bad
// list (its key, a newline, its first maxBadBytes bytes), keeps the list's last maxBadKept,
// and counts them out of queued and inflight into bad. Returns how many it moved.
var setAsideScript = redis.NewScript(fence + safeCount + `
local n = 0
for i = 2, #ARGV, 2 do
  if redis.call('ZREM', KEYS[2], ARGV[i]) == 1 then
    redis.call('RPUSH', KEYS[4], ARGV[i+1] .. '\n' .. string.sub(ARGV[i], 1, ` + strconv.Itoa(maxBadBytes) + `))
    n = n + 1
  end
end
if n > 0 then
  redis.call('LTRIM', KEYS[4], -` + strconv.Itoa(maxBadKept) + `, -1)
  cincr(KEYS[3], 'queued', -n)
  cincr(KEYS[3], 'inflight', -n)
  cincr(KEYS[3], 'bad', n)
end
return n
`)

// aside is an in-flight member that cannot be read: its key of origin and the error.
type aside struct {
	member, from string
	err          error
}

// setAside moves the in-flight members as of o's partition to its set-aside list (fenced),
// and tells the Store's watcher (Store.watchSetAside) of each.
func (s *Store) setAside(ctx context.Context, o Ownership, as []aside) error {
	if len(as) == 0 {
		return nil
	}
	p := o.Partition
	args := []any{o.token}
	for _, a := range as {
		args = append(args, a.member, a.from)
	}
	err := setAsideScript.Run(ctx, s.rdb, []string{s.k.owner(p), s.k.inflight(p), s.k.counts(p), s.k.bad(p)}, args...).Err()
	if err = scriptErr(err); err != nil {
		return fmt.Errorf("fleet: set aside %d unreadable items of partition %d: %w", len(as), p, err)
	}
	if fn := s.asideFn.Load(); fn != nil {
		for _, a := range as {
			(*fn)(asideNote{From: a.from, List: s.k.bad(p), Err: a.err})
		}
	}
	return nil
}

// watchSetAside makes fn be called for every value the Store sets aside.
func (s *Store) watchSetAside(fn func(asideNote)) { s.asideFn.Store(&fn) }

// safeCount is Lua for the scripts that change counters: countOK(v) says whether v (an
// HGET's answer) is a counter HINCRBY may change (absent, or a decimal integer of at most 15
// characters); cincr(key, field, d) adds d to a counter that is, and leaves a damaged one
// as it is, for the partition's owner to recount (Store.recount).
const safeCount = `
local function countOK(v)
  return not v or (#v <= 15 and string.match(v, '^%-?%d+$') ~= nil)
end
local function cincr(key, f, d)
  if d ~= 0 and countOK(redis.call('HGET', key, f)) then redis.call('HINCRBY', key, f, d) end
end
`

// maxRetryDelay bounds how far ahead of Redis' clock a delayed URL may be due: one scored
// later (damage, or hostile) is due now. hostlimit delays no host for longer.
const maxRetryDelay = 24 * time.Hour

// recountScript: KEYS owner, counts, inflight, outbox, inbox, then per host of the partition
// its queue and its delayed set; ARGV token. Sets queued, delayed, inflight, outbox and inbox to what
// the keys hold, deletes the other counters that are not counts (countOK and not negative:
// fetched, failed:REASON… cannot be counted again), and counts the fields it changed in
// "repaired". Returns {field, old value}… of each field changed.
var recountScript = redis.NewScript(fence + safeCount + `
local queued, delayed = 0, 0
for i = 6, #KEYS, 2 do
  queued = queued + redis.call('LLEN', KEYS[i])
  delayed = delayed + redis.call('ZCARD', KEYS[i+1])
end
local inflight = redis.call('ZCARD', KEYS[3])
local want = {queued = queued + delayed + inflight, delayed = delayed, inflight = inflight, outbox = redis.call('LLEN', KEYS[4]), inbox = redis.call('LLEN', KEYS[5])}
local all = redis.call('HGETALL', KEYS[2])
local fixed = {}
for i = 1, #all, 2 do
  local f, v = all[i], all[i+1]
  if want[f] == nil and not (countOK(v) and tonumber(v) >= 0) then
    redis.call('HDEL', KEYS[2], f)
    fixed[#fixed+1] = f; fixed[#fixed+1] = v
  end
end
for _, f in ipairs({'queued', 'delayed', 'inflight', 'outbox', 'inbox'}) do
  local v = redis.call('HGET', KEYS[2], f)
  if tonumber(v or '0') ~= want[f] or (v and not countOK(v)) then
    redis.call('HSET', KEYS[2], f, want[f])
    fixed[#fixed+1] = f; fixed[#fixed+1] = v or ''
  end
end
if #fixed > 0 then cincr(KEYS[2], 'repaired', #fixed / 2) end
return fixed
`)

// recount sets o's partition's counters of what is queued, delayed, in flight and in its
// outbox and inbox to what its keys hold (those of the hosts its hosts set lists), and deletes the
// other counters that are damaged. It returns each counter it changed, with its old value
// quoted (none when they were right).
func (s *Store) recount(ctx context.Context, o Ownership) ([]string, error) {
	p := o.Partition
	hosts, err := s.rdb.SMembers(ctx, s.k.hosts(p)).Result()
	if err != nil {
		return nil, fmt.Errorf("fleet: recount partition %d: %w", p, err)
	}
	ks := []string{s.k.owner(p), s.k.counts(p), s.k.inflight(p), s.k.outbox(p), s.k.inbox(p)}
	for _, h := range hosts {
		ks = append(ks, s.k.queue(p, h), s.k.delayed(p, h))
	}
	r, err := recountScript.Run(ctx, s.rdb, ks, o.token).StringSlice()
	if err = scriptErr(err); err != nil {
		return nil, fmt.Errorf("fleet: recount partition %d: %w", p, err)
	}
	var fixed []string
	for i := 0; i+1 < len(r); i += 2 {
		fixed = append(fixed, fmt.Sprintf("%s was %q", r[i], clip(r[i+1])))
	}
	return fixed, nil
}

// repairCounts recounts the partitions in use whose counters cannot be right: damaged (not
// counts), fewer queued than in flight, or URLs queued beyond those in flight while the
// partition lists no host with work (members, as readHeld read them this round). Without
// it such a partition would never look idle, or never be leased from, and the crawl would
// stall without a word.
func (f *Frontier) repairCounts(ctx context.Context, members map[int][]string) error {
	type suspect struct {
		o     Ownership
		stale bool // the last read of every partition's counters saw it damaged
	}
	f.mu.Lock()
	var suspects []suspect
	for p, h := range f.parts.inUse {
		c := f.view.held[p]
		hosts, read := members[p]
		full := f.view.counts != nil && p < len(f.view.counts) && len(f.view.counts[p].Damaged) > 0
		if len(c.Damaged) > 0 || full || c.Queued < c.InFlight || read && len(hosts) == 0 && c.Queued > c.InFlight {
			suspects = append(suspects, suspect{h.o, full})
		}
	}
	f.mu.Unlock()
	for _, sp := range suspects {
		o := sp.o
		fixed, err := f.s.recount(ctx, o)
		if errors.Is(err, ErrFenced) {
			continue
		}
		if err != nil {
			return err
		}
		f.mu.Lock()
		if len(fixed) > 0 || sp.stale { // read them again (a suspicion from a race changes nothing)
			f.view.heldAt = time.Time{}
			f.view.age.mark()
		}
		if len(fixed) > 0 {
			f.stats.Recounted++
		}
		f.mu.Unlock()
		if len(fixed) > 0 {
			f.opts.Log.Warn("damaged counters in Redis recounted from the partition's keys", "partition", o.Partition, "key", f.s.k.counts(o.Partition), "changed", strings.Join(fixed, ", "))
		}
	}
	return nil
}

// reasonName is a failure or exclusion reason as a counter's field names it: the crawl's
// reasons are 1 to 48 of [a-z0-9_-]; any other field (damage) is counted as "unreadable", so
// that what Redis holds can neither flood nor garble a report.
func reasonName(r string) string {
	if r == "" || len(r) > 48 {
		return "unreadable"
	}
	for _, c := range r {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return "unreadable"
		}
	}
	return r
}
