package fleet

import (
	"context"
	"time"
)

// partUse is what the worker does with a partition it holds.
type partUse int

const (
	partActive   partUse = iota // leases its URLs
	partDraining                // surplus: leases nothing more, lets its requests finish, then releases it
)

// held is a partition in use.
type held struct {
	o      Ownership
	use    partUse
	since  time.Time       // partDraining: local time the draining began
	ctx    context.Context // requests to the partition's hosts; cancelled when it is dropped
	cancel context.CancelFunc
	parent context.Context // ctx's parent (HostContext's argument)
}

// partTable is the partitions a Frontier uses: those its Keeper holds, each active or
// draining, and the timer that drops them when their lease may run out. A partition enters in
// sync and leaves in dropLocked, nowhere else. Guarded by Frontier.mu.
type partTable struct {
	inUse map[int]*held // by partition
	lapse lapseTimer
}

// lapseTimer fires at the earliest local stop time of the partitions in use, so that they are
// dropped (their requests cancelled) on time rather than at Run's next round, which a slow
// Redis call may hold up. Guarded by Frontier.mu.
type lapseTimer struct {
	t     *time.Timer // nil until first armed
	ended bool        // Run has returned: not armed again
}

// HostContext returns the context requests to host run under: derived from ctx (the same ctx
// on every call of one crawl run), and cancelled when host's partition is dropped. For a host
// of a partition not in use it returns a cancelled context.
func (f *Frontier) HostContext(ctx context.Context, host string) context.Context {
	p, placed := f.partitionOf(host)
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.parts.inUse[p]
	if !placed || h == nil || h.o.StateAt(time.Now()) == Lapsed {
		c, cancel := context.WithCancel(ctx)
		cancel()
		return c
	}
	if h.ctx == nil || h.parent != ctx {
		if h.cancel != nil {
			h.cancel()
		}
		h.ctx, h.cancel = context.WithCancel(ctx)
		h.parent = ctx
	}
	return h.ctx
}

// Holds reports whether host is this worker's at local time now: its partition is in use and
// its lease cannot have run out. A request is sent only while it holds.
func (f *Frontier) Holds(host string, now time.Time) bool {
	p, placed := f.partitionOf(host)
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.parts.inUse[p]
	return placed && h != nil && h.o.StateAt(now) != Lapsed
}

// partitionOf returns host's partition, asking Redis (bounded by the frontier's timeout) when
// it is not known; placed is false when it cannot be told (Redis unreachable, or a host never
// placed), which callers treat as a partition not in use.
func (f *Frontier) partitionOf(host string) (p int, placed bool) {
	if p, ok := f.s.knownPartition(host); ok {
		return p, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.opts.Timeout)
	defer cancel()
	p, placed, err := f.s.partitionOf(ctx, host)
	return p, placed && err == nil
}

// mayHold reports whether o's partition may still be this worker's at local time at.
func (f *Frontier) mayHold(o Ownership, at time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.parts.inUse[o.Partition]
	return h != nil && h.o.Epoch == o.Epoch && h.o.StateAt(at) != Lapsed
}

// sync makes the partitions in use those the keeper holds after a Tick that changed ch, and
// starts draining the surplus.
func (f *Frontier) sync(ctx context.Context, now time.Time, ch Change) {
	owned := map[int]Ownership{}
	for _, o := range f.k.Owned(now) {
		owned[o.Partition] = o
	}
	f.mu.Lock()
	for _, p := range ch.Surplus {
		if h := f.parts.inUse[p]; h != nil && h.use == partActive {
			h.use, h.since = partDraining, now
			f.forgetHostsLocked(p)
		}
	}
	for p := range f.parts.inUse {
		if _, ok := owned[p]; !ok {
			f.dropLocked(p, "lost or surplus")
		}
	}
	for p, o := range owned {
		if h := f.parts.inUse[p]; h != nil && h.o.Epoch == o.Epoch {
			h.o = o // renewed
			continue
		} else if h != nil {
			f.dropLocked(p, "acquired again")
		}
		f.parts.inUse[p] = &held{o: o}
		f.view.heldAt = time.Time{} // read the new partitions at this round
		f.stats.Reacquired++
	}
	f.armLapseLocked()
	f.mu.Unlock()
}

// dropLapsed drops the partitions whose lease may have run out at now.
func (f *Frontier) dropLapsed(now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for p, h := range f.parts.inUse {
		if h.o.StateAt(now) == Lapsed {
			f.dropLocked(p, "lapsed")
		}
	}
	f.armLapseLocked()
}

// armLapseLocked sets the lapse timer to the earliest stop time of the partitions in use, or
// stops it when none is in use. It requires f.mu to be held.
func (f *Frontier) armLapseLocked() {
	var first time.Time
	for _, h := range f.parts.inUse {
		if at := h.o.StopAt(); first.IsZero() || at.Before(first) {
			first = at
		}
	}
	switch {
	case f.parts.lapse.ended || first.IsZero():
		if f.parts.lapse.t != nil {
			f.parts.lapse.t.Stop()
		}
	case f.parts.lapse.t == nil:
		f.parts.lapse.t = time.AfterFunc(time.Until(first), func() { f.dropLapsed(time.Now()) })
	default:
		f.parts.lapse.t.Reset(time.Until(first))
	}
}

// endLapse stops the lapse timer for good; Run calls it as it returns.
func (f *Frontier) endLapse() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.parts.lapse.ended = true
	f.armLapseLocked()
}

// releaseDrained releases the draining partitions whose requests have all ended, or which
// have drained for a lease TTL (their requests are then cancelled).
func (f *Frontier) releaseDrained(ctx context.Context, now time.Time) {
	f.mu.Lock()
	var draining []int
	for p, h := range f.parts.inUse {
		if h.use == partDraining {
			draining = append(draining, p)
		}
	}
	f.mu.Unlock()
	f.putBackBatches(ctx, draining)
	f.mu.Lock()
	busy := map[int]bool{}
	for _, l := range f.inflight.leases {
		busy[l.Partition] = true
	}
	var release []int
	for p, h := range f.parts.inUse {
		if h.use == partDraining && (!busy[p] || now.Sub(h.since) >= f.s.opts.LeaseTTL) {
			f.dropLocked(p, "surplus")
			release = append(release, p)
		}
	}
	save := f.save
	f.mu.Unlock()
	if len(release) > 0 && save != nil {
		if err := save(); err != nil {
			f.opts.Log.Warn("hosts' learned state not saved before a handover; the next owner starts from the last checkpoint", "err", err)
		}
	}
	for _, p := range release {
		rctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
		if err := f.k.Release(rctx, p); err != nil {
			f.opts.Log.Warn("cannot release a surplus partition; the next tick of the keeper will", "partition", p, "err", err)
		}
		cancel()
	}
}

// dropLocked stops using partition p (f.mu held): its requests are cancelled and its hosts
// forgotten. Leases of p stay recorded: Complete sends their results, which fencing refuses
// if another worker holds p by then.
func (f *Frontier) dropLocked(p int, why string) {
	h := f.parts.inUse[p]
	if h == nil {
		return
	}
	if h.cancel != nil {
		h.cancel()
	}
	delete(f.parts.inUse, p)
	f.forgetHostsLocked(p)
	f.takeBatchesLocked(p) // in flight in Redis: the partition's next owner reclaims them
	f.stats.Dropped++
	f.opts.Log.Debug("partition dropped", "partition", p, "why", why)
}

// forgetHostsLocked forgets the hosts of partition p (f.mu held).
func (f *Frontier) forgetHostsLocked(p int) {
	for name := range f.hosts.All() {
		if q, ok := f.s.knownPartition(name); !ok || q == p { // an unknown one is listed again if need be
			f.hosts.Forget(name)
		}
	}
}
