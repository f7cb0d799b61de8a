package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
)

// Keeper holds one worker's fair share of a crawl's partitions: on each Tick it sends the
// worker's heartbeat, renews the ownerships that are due, drops those that lapsed, and moves
// toward ceil(partitions / live workers) by acquiring free partitions (reclaiming their
// in-flight URLs) or by naming its surplus. A worker is alive while its heartbeat is younger
// than the lease TTL, on Redis' clock.
//
// One goroutine ticks a Keeper, at least every third of the lease TTL; Owned, Release and the
// HostStates store may be used from others (mu is held for the whole of a Tick).
type Keeper struct {
	s     *Store
	mu    sync.Mutex
	owned map[int]Ownership // guarded by mu
}

// Change is what one Tick changed.
type Change struct {
	Acquired []int // newly owned (their in-flight URLs already returned to their queues)
	Lost     []int // no longer owned: lapsed, or fenced at renewal; stop using them at once
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

// Tick does one round of the keeper's work at local time now (taken just before the call).
func (k *Keeper) Tick(ctx context.Context, now time.Time) (Change, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var ch Change
	s := k.s
	live, err := heartbeatScript.Run(ctx, s.rdb, []string{s.k.workers()}, s.worker, s.opts.LeaseTTL.Milliseconds()).Int()
	if err != nil {
		return ch, fmt.Errorf("fleet: heartbeat: %w", err)
	}
	ch.Live = live
	var renewErr error // one partition's node unreachable (a cluster's failover) does not stop the others' renewals
	for _, p := range k.sorted() {
		o := k.owned[p]
		switch o.StateAt(now) {
		case Lapsed:
			delete(k.owned, p)
			ch.Lost = append(ch.Lost, p)
		case RenewDue:
			o, err := s.Renew(ctx, now, o)
			if errors.Is(err, ErrFenced) {
				delete(k.owned, p)
				ch.Lost = append(ch.Lost, p)
				continue
			}
			if err != nil {
				renewErr = cmp.Or(renewErr, err)
				continue
			}
			k.owned[p] = o
		}
	}
	if renewErr != nil {
		return ch, renewErr
	}
	target := fairShare(s.opts.Partitions, live)
	if held := k.sorted(); len(held) > target {
		ch.Surplus = held[target:]
		return ch, nil
	}
	if len(k.owned) == target {
		return ch, nil
	}
	free, err := k.free(ctx)
	if err != nil {
		return ch, err
	}
	for _, p := range free {
		if len(k.owned) >= target {
			break
		}
		o, ok, err := s.Acquire(ctx, now, p)
		if err != nil {
			return ch, err
		}
		if !ok {
			continue
		}
		k.owned[p] = o
		ch.Acquired = append(ch.Acquired, p)
		if _, err := s.Reclaim(ctx, o); err != nil {
			return ch, err
		}
	}
	return ch, nil
}

// Release hands partition p back (after the caller stopped using it). Releasing a partition
// the keeper no longer holds does nothing.
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

// free (k.mu held) lists the partitions without an owner, starting at an offset of the worker's own so
// that workers starting together try different partitions first.
func (k *Keeper) free(ctx context.Context) ([]int, error) {
	s := k.s
	n := s.opts.Partitions
	start := int(xxhash.Sum64String(s.worker) % uint64(n))
	pipe := s.rdb.Pipeline()
	var ps []int
	for i := range n {
		p := (start + i) % n
		if _, ok := k.owned[p]; !ok {
			ps = append(ps, p)
			pipe.Exists(ctx, s.k.owner(p))
		}
	}
	cmds, err := pipe.Exec(ctx)
	if err != nil {
		return nil, fmt.Errorf("fleet: list free partitions: %w", err)
	}
	var free []int
	for i, c := range cmds {
		if c.(interface{ Val() int64 }).Val() == 0 {
			free = append(free, ps[i])
		}
	}
	return free, nil
}

// fairShare is how many of n partitions each of live workers should hold: ceil(n / live), so
// that the shares cover every partition.
func fairShare(n, live int) int {
	if live < 1 {
		live = 1
	}
	return (n + live - 1) / live
}
