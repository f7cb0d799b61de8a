package fleet

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/readyset"
	"github.com/redis/go-redis/v9"
)

// inFlight is what a Frontier took from Redis and has not recorded yet: the URLs Lease handed
// out (until Complete or Release), those taken with them and not handed out yet, and the
// leases Release could not hand back. Guarded by Frontier.mu.
type inFlight struct {
	leases  map[string]leased     // handed out, by URL
	batches map[string]*hostBatch // taken from Redis, not handed out yet, by host
	putBack []leased              // Release could not hand them back (Redis unreachable); Run retries
}

// leased is a URL in flight with the ownership it was leased under.
type leased struct {
	Lease
	o Ownership
}

// hostBatch is what the worker took from a host's queue in one call (Store.TakeN) and has not
// handed out yet: those URLs are in flight in Redis. A host leased from often gets bigger
// batches (doubling up to maxTake while each take follows the last within batchWindow); one
// leased from seldom, one URL at a time.
type hostBatch struct {
	o    Ownership
	ls   []Lease
	n    int       // how many the last take asked for
	last time.Time // local time of the last take
}

const (
	maxTake     = 16
	batchWindow = 250 * time.Millisecond
)

// Lease takes host's next URL from Redis. It returns no lease, and no error, when the host's
// partition is not in use (or lapsed), when the host has nothing ready, and when Redis cannot
// be reached (the host then waits a second). When it returns no lease, Ready(host) is false
// until TakeReady names the host again: a caller that waits for a ready host never waits on
// one that has nothing for it.
func (f *Frontier) Lease(now time.Time, host string) (frontier.Lease, bool, error) {
	p, placed := f.partitionOf(host)
	f.mu.Lock()
	h := f.parts.inUse[p]
	if placed && h != nil && h.o.StateAt(now) == Lapsed {
		f.dropLocked(p, "lapsed")
		h = nil
	}
	if !placed || h == nil || h.use != partActive {
		f.hosts.Forget(host)
		f.mu.Unlock()
		return frontier.Lease{}, false, nil
	}
	o := h.o
	b := f.inflight.batches[host]
	if b != nil && len(b.ls) > 0 && b.o.Epoch == o.Epoch {
		l := b.ls[0]
		b.ls = b.ls[1:]
		f.inflight.leases[l.URL] = leased{Lease: l, o: o}
		f.mu.Unlock()
		f.recent.remember([]uint64{Fingerprint(l.URL)})
		return l.Lease, true, nil
	}
	n := 1
	if b != nil && now.Sub(b.last) < batchWindow {
		n = min(2*b.n, maxTake)
	}
	f.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), f.opts.Timeout)
	ls, next, err := f.s.TakeN(ctx, o, host, n)
	cancel()
	var l Lease
	ok := len(ls) > 0
	if ok {
		l = ls[0]
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case errors.Is(err, ErrFenced):
		if cur := f.parts.inUse[p]; cur != nil && cur.o.Epoch == o.Epoch {
			f.dropLocked(p, "fenced")
		} else { // acquired again meanwhile: ask again at the next round
			f.hosts.Wait(host, time.Now().Add(f.opts.Refresh))
		}
		return frontier.Lease{}, false, nil
	case err != nil:
		f.hosts.Wait(host, time.Now().Add(time.Second))
		return frontier.Lease{}, false, nil
	case !ok && next.IsZero():
		f.hosts.Idle(host)
		return frontier.Lease{}, false, nil
	case !ok:
		f.hosts.Wait(host, next.Add(-f.view.offset))
		return frontier.Lease{}, false, nil
	}
	if cur := f.parts.inUse[p]; cur == nil || cur.o.Epoch != o.Epoch {
		// dropped (and perhaps acquired again) while Take ran: the URL stays in flight until
		// the partition's next Acquire reclaims it; the host is asked again at the next round
		f.hosts.Wait(host, time.Now().Add(f.opts.Refresh))
		return frontier.Lease{}, false, nil
	}
	// (a partition that began draining while Take ran keeps this lease until it ends, and
	// puts the rest taken with it back: releaseDrained)
	if f.hosts.State(host) == readyset.Unknown {
		f.hosts.Ready(host)
	}
	f.inflight.leases[l.URL] = leased{Lease: l, o: o}
	f.inflight.batches[host] = &hostBatch{o: o, ls: ls[1:], n: n, last: now}
	f.recent.remember([]uint64{Fingerprint(l.URL)})
	return l.Lease, true, nil
}

// Release hands l back to its host's queue unchanged. When Redis cannot take it now, Run
// retries while the partition is this worker's.
func (f *Frontier) Release(fl frontier.Lease) {
	f.mu.Lock()
	l, ok := f.inflight.leases[fl.URL]
	delete(f.inflight.leases, fl.URL)
	if ok && f.hosts.State(fl.Host) != readyset.Unknown {
		f.hosts.Ready(fl.Host)
	}
	f.mu.Unlock()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.opts.Timeout)
	err := f.s.PutBack(ctx, l.o, l.Lease)
	cancel()
	switch {
	case errors.Is(err, ErrFenced), errors.Is(err, ErrNotInFlight):
		f.refused(l.URL, err.Error())
	case err != nil:
		f.mu.Lock()
		f.inflight.putBack = append(f.inflight.putBack, l)
		f.mu.Unlock()
	}
}

// takeBatchesLocked removes and returns the URLs taken but not handed out of partition p's
// hosts (f.mu held).
func (f *Frontier) takeBatchesLocked(p int) []Lease {
	var out []Lease
	for host, b := range f.inflight.batches {
		if b.o.Partition == p {
			out = append(out, b.ls...)
			delete(f.inflight.batches, host)
		}
	}
	return out
}

// putBackBatches hands the URLs taken but not handed out back to their queues: at the end of
// Run, and for partitions released as surplus. (A partition lost keeps them in flight until
// its next owner reclaims them.)
func (f *Frontier) putBackBatches(ctx context.Context, parts []int) {
	f.mu.Lock()
	type back struct {
		o  Ownership
		ls []Lease
	}
	var backs []back
	for _, p := range parts {
		if h := f.parts.inUse[p]; h != nil {
			if ls := f.takeBatchesLocked(p); len(ls) > 0 {
				backs = append(backs, back{h.o, ls})
			}
		}
	}
	f.mu.Unlock()
	for _, b := range backs {
		for _, l := range b.ls {
			rctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
			err := f.s.PutBack(rctx, b.o, l)
			cancel()
			if err != nil && !errors.Is(err, ErrFenced) && !errors.Is(err, ErrNotInFlight) {
				return // Redis unreachable: the partition's next owner reclaims them
			}
		}
	}
}

// retryPutBacks hands back the leases an earlier Release could not.
func (f *Frontier) retryPutBacks(ctx context.Context) {
	f.mu.Lock()
	pending := f.inflight.putBack
	f.inflight.putBack = nil
	f.mu.Unlock()
	for i, l := range pending {
		err := f.s.PutBack(ctx, l.o, l.Lease)
		switch {
		case errors.Is(err, ErrFenced), errors.Is(err, ErrNotInFlight):
			f.refused(l.URL, err.Error())
		case err != nil:
			f.mu.Lock()
			f.inflight.putBack = append(f.inflight.putBack, pending[i:]...)
			f.mu.Unlock()
			return
		}
	}
}

// leasedUnder is how many of the worker's leases (handed out, their results not yet recorded)
// were leased under ownership o.
func (f *Frontier) leasedUnder(o Ownership) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, l := range f.inflight.leases {
		if l.o.Partition == o.Partition && l.o.token == o.token {
			n++
		}
	}
	return n
}

func (f *Frontier) forget(l leased) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.inflight.leases, l.URL)
}

// orphanAge is how long a URL may sit in the in-flight set of a partition this worker holds
// without being one of its leases before returnOrphans puts it back: a Take whose reply was
// lost (Redis went away mid-call) left it there.
const orphanAge = 10 * time.Second

// returnOrphans puts back the URLs in flight in held partitions that this worker does not know
// it leased, once they are orphanAge old (an in-flight URL's score is its deadline, Take's time
// plus the URL lease TTL, on Redis' clock), or at once when their deadline is later than any
// of this worker's leases can be; an unreadable one is set aside.
func (f *Frontier) returnOrphans(ctx context.Context) error {
	f.mu.Lock()
	mine := map[int]int{}
	for _, l := range f.inflight.leases {
		mine[l.Partition]++
	}
	taken := map[string]bool{} // in a batch not handed out yet
	for _, b := range f.inflight.batches {
		for _, l := range b.ls {
			mine[l.Partition]++
			taken[l.URL] = true
		}
	}
	var suspect []Ownership
	for p, h := range f.parts.inUse {
		if f.view.held[p].InFlight > mine[p] {
			suspect = append(suspect, h.o)
		}
	}
	offset := f.view.offset
	f.mu.Unlock()
	takenBefore := time.Now().Add(offset).Add(-orphanAge).Add(f.s.opts.URLLeaseTTL)
	// no lease of this worker ends later than this (a deadline beyond is damage, or a lease of
	// a worker with a longer URL lease TTL before this one: an orphan too)
	leasedAfter := time.Now().Add(offset).Add(orphanAge).Add(f.s.opts.URLLeaseTTL)
	for _, o := range suspect {
		old, err := f.s.rdb.ZRangeByScore(ctx, f.s.k.inflight(o.Partition),
			&redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(takenBefore.UnixMilli(), 10)}).Result()
		if err != nil {
			return err
		}
		late, err := f.s.rdb.ZRangeByScore(ctx, f.s.k.inflight(o.Partition),
			&redis.ZRangeBy{Min: "(" + strconv.FormatInt(leasedAfter.UnixMilli(), 10), Max: "+inf"}).Result()
		if err != nil {
			return err
		}
		old = append(old, late...)
		var bad []aside
		for _, m := range old {
			it, _, err := decodeMember(m)
			if err != nil {
				bad = append(bad, aside{member: m, from: f.s.k.inflight(o.Partition), err: err})
				continue
			}
			f.mu.Lock()
			_, leasedHere := f.inflight.leases[it.URL]
			f.mu.Unlock()
			if leasedHere || taken[it.URL] {
				continue
			}
			l := Lease{Lease: frontier.Lease{Entry: it.entry(), Attempts: it.Attempts}, Partition: o.Partition, member: m}
			if err := f.s.PutBack(ctx, o, l); err != nil && !errors.Is(err, ErrFenced) && !errors.Is(err, ErrNotInFlight) {
				return err
			}
		}
		if err := f.s.setAside(ctx, o, bad); err != nil && !errors.Is(err, ErrFenced) {
			return err
		}
	}
	return nil
}
