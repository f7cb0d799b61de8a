package fleet

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A gate's pace is what the workers of a crawl share about one gate (a host, or a server's
// address with --key-by-ip) that the sub-requests of rendered pages go to, whoever owns it: the
// fleet's next send time, a pause, and the interval of the worker last refused there, its
// leader (docs/fleet.md "Rendered pages' sub-requests"). It is one hash, {p}:pace:GATE, p being
// the gate's partition, read and written by one script per sub-request; it expires PaceTTL after
// its last use. It holds no slot of any worker: a reservation is a time, so a worker that dies
// holds nothing.

// PaceState says what Pace did.
type PaceState int

const (
	// PaceReserved: the caller has the fleet's next send slot, Wait from now.
	PaceReserved PaceState = iota + 1
	// PacePaused: the gate is paused fleet-wide for Wait; nothing was reserved, ask again then.
	PacePaused
)

// PaceSlot is Pace's answer.
type PaceSlot struct {
	State PaceState
	Wait  time.Duration // in [0, MaxPaceWait]
	// Late is, for PaceReserved, the most the caller may send after its slot: the next slot is
	// that much and an interval after it. A caller that would send later reserves again.
	Late time.Duration
}

const (
	// PaceTTL is how long a gate's pace outlives its last use.
	PaceTTL = time.Minute
	// MaxPaceWait bounds what a pace holds: a send time or a pause read further ahead is
	// damage, read as now; a pause asked for longer is held for MaxPaceWait (a page's render
	// ends sooner).
	MaxPaceWait = 10 * time.Minute
	// leadLapse is how long the leader's interval paces the fleet after its last call: a
	// worker that stopped (or died) leads no longer.
	leadLapse = 10 * time.Second
	// lateDecay is what the fleet's lateness keeps of itself at each reservation, as a Lua
	// number: the greatest lateness a worker reports holds for tens of reservations.
	lateDecay = "0.95"
)

// paceHead begins both pace scripts: now is ARGV[1] (ms; tests give it), or Redis' TIME when
// it is negative; num reads a field, 0 unless a finite number; a send time or pause beyond far
// is damage, read as now.
var paceHead = `
local now = tonumber(ARGV[1])
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function num(v)
  local n = tonumber(v)
  if n == nil or n ~= n or n == math.huge or n == -math.huge then return 0 end
  return n
end
local far = now + ` + strconv.FormatInt(MaxPaceWait.Milliseconds(), 10) + `
local f = redis.call('HMGET', KEYS[1], 'next', 'until', 'lead', 'lgap', 'lat', 'late')
local nxt, untl, lead, lgap, lat, late = num(f[1]), num(f[2]), f[3], num(f[4]), num(f[5]), num(f[6])
if nxt > far then nxt = now end
if untl > far then untl = now end
`

// pace: KEYS pace; ARGV now (ms, <0: TIME), worker, interval (ms), lateness (ms), ttl (ms),
// lapse (ms). The leader's interval (refreshed when the leader calls; dropped lapse after its
// last call, or when out of bounds) or else the caller's spaces the fleet's sends. Paused:
// returns {2, wait}. Otherwise reserves the first slot at or after now and the next send time,
// moves the next send time to the slot + interval + the fleet's lateness (the most a worker
// sends after its slot: the greatest the callers reported, decaying by lateDecay a call), and
// returns {1, slot - now, that lateness}.
var paceScript = redis.NewScript(paceHead + `
local gap = tonumber(ARGV[3])
if lead then
  if lead == ARGV[2] then
    lgap, lat = gap, now
    redis.call('HSET', KEYS[1], 'lgap', lgap, 'lat', lat)
  elseif now - lat > math.max(tonumber(ARGV[6]), 3 * lgap) or lgap <= 0 or lgap > far - now or lat > now then
    lead = false
    redis.call('HDEL', KEYS[1], 'lead', 'lgap', 'lat')
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[5])
if untl > now then return {2, untl - now} end
if lead then gap = lgap end
late = math.min(math.max(tonumber(ARGV[4]), late * ` + lateDecay + `), far - now)
local slot = math.max(now, nxt)
redis.call('HSET', KEYS[1], 'next', slot + gap + late, 'late', late)
return {1, slot - now, late}
`)

// paceHold: KEYS pace; ARGV now (ms, <0: TIME), worker, interval (ms), pause (ms), refused (1
// or 0), ttl (ms). Pauses the fleet's sends for pause from now (a longer pause held stays), and
// moves the next send time past it; a refusal also makes the caller the leader, its interval
// (its gate's after the refusal) the fleet's.
var paceHoldScript = redis.NewScript(paceHead + `
local gap = tonumber(ARGV[3])
untl = math.max(untl, now + math.min(tonumber(ARGV[4]), far - now))
local next = math.max(nxt, untl)
if ARGV[5] == '1' then
  next = math.max(next, now + gap)
  redis.call('HSET', KEYS[1], 'lead', ARGV[2], 'lgap', gap, 'lat', now)
end
redis.call('HSET', KEYS[1], 'next', next, 'until', untl)
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return 1
`)

// paceKey is gate's pace: in the gate's partition, for its Redis Cluster slot.
func (s *Store) paceKey(gate string) string {
	return s.k.part(PartitionOf(gate, s.opts.Partitions), "pace:"+gate)
}

// Pace reserves for the caller the fleet's next send slot to gate (a host, or an address key):
// the caller sends after Wait, which spaces it at least interval (its gate's, or the leader's)
// after the sends reserved before, and lateness is the most the caller sends after its slot.
// While gate is paused fleet-wide (PaceHold), nothing is reserved: PacePaused, ask again after
// Wait. One script on Redis' clock.
func (s *Store) Pace(ctx context.Context, gate string, interval, lateness time.Duration) (PaceSlot, error) {
	return s.paceAt(ctx, -1, gate, interval, lateness)
}

// paceAt is Pace at Redis time at (ms), or Redis' TIME when at < 0.
func (s *Store) paceAt(ctx context.Context, at int64, gate string, interval, lateness time.Duration) (PaceSlot, error) {
	r, err := paceScript.Run(ctx, s.rdb, []string{s.paceKey(gate)}, at, s.worker, paceMs(interval), paceMs(lateness),
		PaceTTL.Milliseconds(), leadLapse.Milliseconds()).Int64Slice()
	if err != nil {
		return PaceSlot{}, fmt.Errorf("fleet: pace of %q: %w", gate, err)
	}
	if len(r) < 2 || (r[0] != int64(PaceReserved) && r[0] != int64(PacePaused)) {
		return PaceSlot{}, fmt.Errorf("fleet: pace of %q: unexpected reply %v", gate, r)
	}
	ms := func(v int64) time.Duration {
		return time.Duration(min(max(v, 0), MaxPaceWait.Milliseconds())) * time.Millisecond
	}
	slot := PaceSlot{State: PaceState(r[0]), Wait: ms(r[1])}
	if slot.State == PaceReserved && len(r) > 2 {
		slot.Late = ms(r[2])
	}
	return slot, nil
}

// PaceHold tells gate's pace what an answer taught the caller: pause (the answer's Retry-After
// or spent quota) holds every worker's sends to gate until it ends; refused (a 429 or 503)
// makes the caller the fleet's leader there, interval (its gate's after the refusal) spacing
// every worker's sends until the leader stops calling. One script on Redis' clock.
func (s *Store) PaceHold(ctx context.Context, gate string, interval, pause time.Duration, refused bool) error {
	return s.paceHoldAt(ctx, -1, gate, interval, pause, refused)
}

func (s *Store) paceHoldAt(ctx context.Context, at int64, gate string, interval, pause time.Duration, refused bool) error {
	ref := 0
	if refused {
		ref = 1
	}
	err := paceHoldScript.Run(ctx, s.rdb, []string{s.paceKey(gate)}, at, s.worker, paceMs(interval),
		paceMs(pause), ref, PaceTTL.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("fleet: pause the pace of %q: %w", gate, err)
	}
	return nil
}

// paceMs is d in whole ms, rounded up (a pace never shortens an interval), within
// [0, MaxPaceWait].
func paceMs(d time.Duration) int64 {
	d = min(max(d, 0), MaxPaceWait)
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// Pace is Store.Pace bounded by the frontier's timeout (and ctx).
func (f *Frontier) Pace(ctx context.Context, gate string, interval, lateness time.Duration) (PaceSlot, error) {
	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	return f.s.Pace(ctx, gate, interval, lateness)
}

// PaceHold is Store.PaceHold bounded by the frontier's timeout.
func (f *Frontier) PaceHold(gate string, interval, pause time.Duration, refused bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), f.opts.Timeout)
	defer cancel()
	return f.s.PaceHold(ctx, gate, interval, pause, refused)
}
