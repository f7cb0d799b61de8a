package crawler

import (
	"context"
	"sync"
	"time"

	"github.com/crawl-project/crawl/internal/fleet"
)

// fleetPacer is the fleet-wide pace of the gates sub-requests go to, in a shared crawl
// (internal/fleet's Frontier; docs/fleet.md "Rendered pages' sub-requests"): a sub-request
// admitted by its gate here also waits for the fleet's next send slot to that gate, so that
// the workers rendering pages that call one host send to it as one gate would, not each at the
// host's rate; and a "slow down" any of them is answered holds them all.
type fleetPacer interface {
	Pace(ctx context.Context, gate string, interval, lateness time.Duration) (fleet.PaceSlot, error)
	PaceHold(gate string, interval, pause time.Duration, refused bool) error
}

// pacer returns the crawl's fleetPacer, nil for a crawl of one's own.
func (c *Crawler) pacer() fleetPacer {
	if c.shared == nil {
		return nil
	}
	p, _ := c.shared.(fleetPacer)
	return p
}

// fleetSlot waits, in a shared crawl, for the fleet's send slot to gate (after a fleet-wide
// pause of it, if any), and returns the local time the slot was due; zero for a crawl of one's
// own, or when Redis cannot be asked (the sub-request is then paced by this worker's gate
// alone, as a crawl of one's own is). Woken later than the slot's allowance (PaceSlot.Late),
// it reserves again rather than send too close to the next slot. It returns ctx.Err() when
// ctx ends first.
func (c *Crawler) fleetSlot(ctx context.Context, gate string) (time.Time, error) {
	fp := c.pacer()
	if fp == nil {
		return time.Time{}, nil
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		asked := time.Now()
		s, err := fp.Pace(ctx, gate, c.gateInterval(gate, asked), c.renders.subs.late.most())
		if err != nil {
			if ctx.Err() != nil {
				return time.Time{}, ctx.Err()
			}
			c.log.Debug("fleet pace unavailable; sub-request paced by this worker's gate", "gate", gate, "err", err)
			return time.Time{}, nil
		}
		if s.Wait > 0 {
			if err := waitOn(ctx, &timer, s.Wait); err != nil {
				return time.Time{}, err
			}
		}
		// The slot is due s.Wait after Redis read its clock, at or after asked: asked + s.Wait
		// is the earliest it can be here, and lateness is counted from it. The wait above
		// began once the reply came, the latest: the send is never early.
		slot := asked.Add(s.Wait)
		if s.State != fleet.PaceReserved {
			continue // the pause is over: ask again
		}
		woke := time.Now()
		if woke.After(slot.Add(s.Late)) {
			c.renders.subs.late.note(slot, woke) // later than the fleet allowed for: ask again, allowing for more
			continue
		}
		if due := c.localDue(gate, woke); due.After(woke) {
			// This worker's own last send (late) or an answer's pause since the reservation
			// says not yet: wait for it, then ask again.
			if err := waitOn(ctx, &timer, due.Sub(woke)); err != nil {
				return time.Time{}, err
			}
			continue
		}
		return slot, nil
	}
}

// waitOn waits d on *timer (made on first use, reused after), or returns ctx.Err() when ctx
// ends first.
func waitOn(ctx context.Context, timer **time.Timer, d time.Duration) error {
	if *timer == nil {
		*timer = time.NewTimer(d)
	} else {
		(*timer).Reset(d)
	}
	select {
	case <-(*timer).C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// localDue is the earliest this worker may send to gate at now, whatever the fleet's slot: an
// interval after its own last write there, and not before its gate's pause ends (an answer
// it got since it reserved).
func (c *Crawler) localDue(gate string, now time.Time) time.Time {
	due := c.renders.subs.wrote.last(gate).Add(c.gateInterval(gate, now))
	if st, ok := c.reg.Host(now, gate); ok && st.PausedUntil.After(due) {
		due = st.PausedUntil
	}
	return due
}

// gateWrites keeps when this worker last wrote a paced sub-request to each gate, for a minute
// at least. Safe for concurrent use.
type gateWrites struct {
	mu sync.Mutex
	at map[string]time.Time
}

// gateWritesKept is how many gates gateWrites keeps before it forgets those written to more
// than a minute before.
const gateWritesKept = 1024

// note records a write to gate at at.
func (w *gateWrites) note(gate string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.at == nil {
		w.at = map[string]time.Time{}
	}
	if len(w.at) >= gateWritesKept {
		for g, t := range w.at {
			if at.Sub(t) > time.Minute {
				delete(w.at, g)
			}
		}
	}
	if at.After(w.at[gate]) {
		w.at[gate] = at
	}
}

// last returns the time of the last write to gate noted (zero if none).
func (w *gateWrites) last(gate string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.at[gate]
}

// holdFleet tells gate's fleet-wide pace of an answer's pause (Retry-After, or a spent quota)
// and, when refused (a 429 or 503), of this worker's gate interval after the refusal, which
// then paces the fleet (fleet.Store.PaceHold). Best effort: the gate here took the answer in.
func (c *Crawler) holdFleet(gate string, pause time.Duration, refused bool, now time.Time) {
	if fp := c.pacer(); fp != nil {
		if err := fp.PaceHold(gate, c.gateInterval(gate, now), pause, refused); err != nil {
			c.log.Debug("fleet pace not told of a slow down", "gate", gate, "err", err)
		}
	}
}

// gateInterval is the time between two sends gate's rate allows at now (0 when it has none).
func (c *Crawler) gateInterval(gate string, now time.Time) time.Duration {
	st, ok := c.reg.Host(now, gate)
	if !ok || !(st.Limit > 0) {
		return 0
	}
	return time.Duration(float64(time.Second) / st.Limit)
}

// sendLateness keeps how late the last sends of paced sub-requests left after their slot
// (the request written, against the slot's due time): the most of them is how far a slot must
// be kept ahead of the next one, so that sends stay an interval apart at the host. Safe for
// concurrent use.
type sendLateness struct {
	mu   sync.Mutex
	last [lateKept]time.Duration
	n    int // sends noted, all told
}

const (
	// lateKept is how many sends sendLateness keeps.
	lateKept = 32
	// lateFloor is the least lateness a reservation allows for: a timer's wake-up and a
	// request's write, on a busy machine, before any send measured them.
	lateFloor = 5 * time.Millisecond
)

// note records a send written at wrote for a slot due at slot.
func (l *sendLateness) note(slot, wrote time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last[l.n%lateKept] = max(wrote.Sub(slot), 0)
	l.n++
}

// most returns the latest sends' greatest lateness, at least lateFloor.
func (l *sendLateness) most() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := lateFloor
	for _, d := range l.last[:min(l.n, lateKept)] {
		m = max(m, d)
	}
	return m
}
