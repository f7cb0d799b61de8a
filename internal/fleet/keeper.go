package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"
)

// Keeper holds one worker's fair share of a crawl's partitions. The worker's lease is its
// heartbeat (one entry of the crawl's workers set, scored by the lease's end on Redis' clock):
// on each Tick the Keeper renews it, which keeps every ownership it holds; a partition's owner
// key has no expiry. It then moves toward ceil(partitions / live workers) by acquiring free
// partitions (no owner, or an owner whose lease ended; their in-flight URLs reclaimed) or by
// naming its surplus. If its lease ended in Redis, or on its own clock (Ownership.StateAt),
// every ownership is lost.
//
// One goroutine ticks a Keeper, at least every third of the lease TTL; Owned, Release and the
// HostStates store may be used from others (mu is held for the whole of a Tick).
type Keeper struct {
	s     *Store
	mu    sync.Mutex
	owned map[int]Ownership // guarded by mu
	scan  scanState         // guarded by mu
}

// scanState is what a Keeper below its fair share knew at its last look for free partitions
// (reading every owner key), so that it looks again only when something may have changed: the
// live workers, a partition released, the last look acquired some (there may be more), this
// Tick lost some, or rescanEvery passed.
type scanState struct {
	at       time.Time // local time of the last look (zero: none yet)
	live     string    // the live workers then
	released string    // the crawl's released counter then
	again    bool      // the last look acquired a partition or lost one to a race
	// unsure: an acquire's answer was lost (its script may have run) or a release failed, so an
	// owner key may name this worker for a partition it does not hold; look again even at the
	// fair share
	unsure bool
}

// rescanEvery, in lease TTLs, is how often a Keeper below its fair share looks for free
// partitions when nothing says there may be some.
const rescanEvery = 3

// Change is what one Tick changed.
type Change struct {
	Acquired []int // newly owned (their in-flight URLs already returned to their queues)
	Lost     []int // no longer owned: lapsed, or the worker's lease ended; stop using them at once
	Surplus  []int // owned beyond the fair share: stop using them, then Release them
	Live     int   // workers alive, this one included
}

// NewKeeper returns a Keeper of s's worker holding no partition.
func (s *Store) NewKeeper() *Keeper { return &Keeper{s: s, owned: make(map[int]Ownership)} }

// Owned returns the ownerships usable at local time now (not Lapsed), by partition.
func (k *Keeper) Owned(now time.Time) []Ownership {
	k.mu.Lock()
	defer k.mu.Unlock()
	var os []Ownership
	for _, o := range k.owned {
		if o.StateAt(now) != Lapsed {
			os = append(os, o)
		}
	}
	slices.SortFunc(os, func(a, b Ownership) int { return a.Partition - b.Partition })
	return os
}

// holding returns the ownership of partition p if it is usable at local time now.
func (k *Keeper) holding(p int, now time.Time) (Ownership, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	o, ok := k.owned[p]
	return o, ok && o.StateAt(now) != Lapsed
}

// Tick does one round of the keeper's work at local time now (taken just before the call):
// the heartbeat, then the fair share. A partition whose owner key names this worker but which
// it does not hold (lost on its own clock, or acquired by a call whose answer was lost) is
// taken again within the fair share and released beyond it: no other worker takes a partition
// from a live owner.
func (k *Keeper) Tick(ctx context.Context, now time.Time) (Change, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var ch Change
	s := k.s
	b, err := s.heartbeat(ctx)
	if err != nil {
		return ch, err // the ownerships lapse on the local clock unless a later Tick renews them
	}
	ch.Live = len(b.live)
	for _, p := range k.sorted() {
		o := k.owned[p]
		if b.lease == leaseStarted || o.StateAt(now) == Lapsed {
			delete(k.owned, p)
			s.dropSeen(p, o.token)
			ch.Lost = append(ch.Lost, p)
			continue
		}
		o.sent = now // the lease they hang on was renewed by a request sent after now
		k.owned[p] = o
	}
	target := fairShare(s.opts.Partitions, len(b.live))
	if held := k.sorted(); len(held) > target {
		ch.Surplus = held[target:]
		return ch, nil
	}
	if len(k.owned) == target && !k.scan.unsure && len(ch.Lost) == 0 {
		return ch, nil
	}
	released, err := s.rdb.Get(ctx, s.k.released()).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return ch, fmt.Errorf("fleet: read released partitions: %w", err)
	}
	live := strings.Join(b.live, " ")
	sc := k.scan
	if !sc.at.IsZero() && !sc.again && !sc.unsure && len(ch.Lost) == 0 && sc.live == live && sc.released == released &&
		now.Sub(sc.at) < rescanEvery*s.opts.LeaseTTL {
		return ch, nil
	}
	k.scan = scanState{at: now, live: live, released: released}
	free, err := k.free(ctx, b.live)
	if err != nil {
		k.scan.unsure = sc.unsure // not looked at yet
		return ch, err
	}
	for _, c := range free {
		if len(k.owned) >= target {
			// Named here but not held (it lapsed on this worker's clock, or an acquire's answer
			// was lost): no other worker takes a partition from a live owner, so give it back.
			if c.owner != "" && tokenWorker(c.owner) == s.worker {
				err := s.Release(ctx, Ownership{Partition: c.p, token: c.owner})
				if err != nil && !errors.Is(err, ErrFenced) {
					k.scan.unsure = true
					return ch, err
				}
			}
			continue
		}
		o, ok, err := s.acquireFrom(ctx, now, c.p, c.owner)
		if err != nil {
			k.scan.unsure = true
			return ch, err
		}
		k.scan.again = true
		if !ok {
			continue
		}
		k.owned[c.p] = o
		ch.Acquired = append(ch.Acquired, c.p)
		if _, err := s.Reclaim(ctx, o); err != nil {
			return ch, err
		}
	}
	return ch, nil
}

// Release hands partition p back (after the caller stopped using it). Releasing a partition
// the keeper no longer holds does nothing. The keeper stops holding p even when Release fails:
// the owner key may still name this live worker, so no other worker would take p, and the
// next Tick looks again and hands it back.
func (k *Keeper) Release(ctx context.Context, p int) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.releaseLocked(ctx, p)
}

// releaseLocked is Release; it requires that k.mu is held.
func (k *Keeper) releaseLocked(ctx context.Context, p int) error {
	o, ok := k.owned[p]
	if !ok {
		return nil
	}
	delete(k.owned, p)
	if err := k.s.Release(ctx, o); err != nil && !errors.Is(err, ErrFenced) {
		k.scan.unsure = true
		return err
	}
	return nil
}

// ReleaseAll hands back every partition and removes the worker's heartbeat: what a worker
// does when it stops (SIGINT, SIGTERM), so others take over at once.
func (k *Keeper) ReleaseAll(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	var errs []error
	for _, p := range k.sorted() {
		errs = append(errs, k.releaseLocked(ctx, p))
	}
	errs = append(errs, k.s.rdb.ZRem(ctx, k.s.k.workers(), k.s.worker).Err())
	return errors.Join(errs...)
}

// sorted returns the partitions held, in order; it requires that k.mu is held.
func (k *Keeper) sorted() []int {
	ps := make([]int, 0, len(k.owned))
	for p := range k.owned {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// freePart is a partition a Keeper may take, with the owner token it read there ("" for none).
type freePart struct {
	p     int
	owner string
}

// free (k.mu held) lists the partitions this worker may take, starting at an offset of the
// worker's own so that workers starting together try different partitions first: those with
// no owner, those whose owner key names this worker (held before its lease ended), and those
// whose owner's lease has ended. The owner keys are read first, then the owners' leases
// (acquireFrom says why that order); live lists the workers the heartbeat found live.
func (k *Keeper) free(ctx context.Context, live []string) ([]freePart, error) {
	s := k.s
	n := s.opts.Partitions
	start := int(xxhash.Sum64String(s.worker) % uint64(n))
	pipe := s.rdb.Pipeline()
	var ps []int
	var cmds []*redis.StringCmd
	for i := range n {
		p := (start + i) % n
		if _, ok := k.owned[p]; !ok {
			ps = append(ps, p)
			cmds = append(cmds, pipe.Get(ctx, s.k.owner(p)))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("fleet: list free partitions: %w", err)
	}
	var cands []freePart
	var suspects []string // owners the heartbeat did not find live
	for i, c := range cmds {
		tok, err := c.Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("fleet: list free partitions: %w", err)
		}
		id := tokenWorker(tok)
		if tok != "" && id != s.worker {
			if _, ok := slices.BinarySearch(live, id); ok {
				continue
			}
			if !slices.Contains(suspects, id) {
				suspects = append(suspects, id)
			}
		}
		cands = append(cands, freePart{ps[i], tok})
	}
	if len(suspects) == 0 {
		return cands, nil
	}
	alive, err := s.alive(ctx, suspects)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(cands, func(c freePart) bool { return alive[tokenWorker(c.owner)] }), nil
}

// fairShare is how many of n partitions each of live workers should hold: ceil(n / live), so
// that the shares cover every partition.
func fairShare(n, live int) int {
	if live < 1 {
		live = 1
	}
	return (n + live - 1) / live
}
