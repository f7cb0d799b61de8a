package aimd

import (
	"math"
	"slices"
	"sort"
	"time"
)

// sendSpacing is the median of up to 8 gaps between the sends just before t (within twice the
// rateWindow or four sending intervals), in units of the interval the rate then allowed (1: as
// fast as allowed).
func (c *Controller) sendSpacing(t nanos) (spacing float64, ok bool) {
	from := t - nanos(max(2*rateWindow, time.Duration(4/c.hist.at(t).rate*float64(time.Second))))
	var buf [24]nanos // ages before t
	ages := buf[:0]
	for i := 0; i < c.samples.n && len(ages) < len(buf); i++ {
		if s := c.samples.back(i); s.done <= from {
			break
		} else if s.sent > from && s.sent <= t {
			ages = append(ages, t-s.sent)
		}
	}
	if len(ages) < 2 {
		return 0, false
	}
	slices.Sort(ages)
	ages = ages[:min(len(ages), 9)]
	var norm [8]float64
	for i := 1; i < len(ages); i++ {
		norm[i-1] = time.Duration(ages[i]-ages[i-1]).Seconds() * c.hist.at(t-ages[i-1]).rate
	}
	slices.Sort(norm[:len(ages)-1])
	return norm[(len(ages)-2)/2], true
}

// sendingRate is the rate the host was receiving at t: the allowed rate if it was in use
// (sends spaced at most twice its interval), else the measured send rate.
func (c *Controller) sendingRate(t nanos) float64 {
	if sp, ok := c.sendSpacing(t); ok && sp > 2 {
		return c.hist.at(t).rate / sp
	}
	return c.hist.at(t).rate
}

// rateInUse reports whether the rate bound when s was sent (R2): not DemandSpare, sends spaced
// at most twice the allowed interval, and a window slot free.
func (c *Controller) rateInUse(s *sample) bool {
	if s.demand == DemandSpare || s.conc >= c.hist.at(s.sent).window {
		return false
	}
	sp, ok := c.sendSpacing(s.sent)
	return ok && sp <= 2
}

// singleTokenLimit: if every gap between logged successes is longer than the last one's to the
// refusal sent at ts, one token explains the host and its limit is 1/(the shortest gap) (R4).
func (c *Controller) singleTokenLimit(ts nanos) (limit float64, ok bool) {
	sends := c.sends.successSends(never, ts)
	if len(sends) < 3 {
		return 0, false
	}
	shortest := nanos(math.MaxInt64)
	for i := 1; i < len(sends); i++ {
		shortest = min(shortest, sends[i]-sends[i-1])
	}
	if shortest <= ts-sends[len(sends)-1] { // so shortest > 0: every send is before ts
		return 0, false
	}
	return float64(time.Second) / float64(shortest), true
}

// sendLog holds the send times and signals of the latest finished requests: 16 × memory (16 B
// each), the oldest half dropped when full.
type sendLog struct{ recs []sendRec }

type sendRec struct {
	sent nanos
	sig  Signal
}

func (l *sendLog) log(sent nanos, sig Signal) {
	if len(l.recs) >= 16*memory {
		l.recs = append(l.recs[:0], l.recs[8*memory:]...)
	}
	l.recs = append(l.recs, sendRec{sent: sent, sig: sig})
}

// successSends returns the send times of the logged successes sent in [from, ts), sorted.
func (l *sendLog) successSends(from, ts nanos) (sends []nanos) {
	for _, r := range l.recs {
		if r.sig == Success && r.sent >= from && r.sent < ts {
			sends = append(sends, r.sent)
		}
	}
	slices.Sort(sends)
	return sends
}

// lastAcceptedBefore is the send time of the newest remembered success sent before t, or t.
func (c *Controller) lastAcceptedBefore(t nanos) nanos {
	if _, newest := c.accepted(never, t); newest != never {
		return newest
	}
	return t
}

// recentAccepted is the success rate over the rateWindow before ts, by send time.
func (c *Controller) recentAccepted(ts nanos) float64 {
	n, _ := c.accepted(ts-nanos(rateWindow), ts)
	return float64(n) / rateWindow.Seconds()
}

// accepted counts the remembered successes sent in [from, to) and returns the newest one's send
// time (never: none).
func (c *Controller) accepted(from, to nanos) (n int, newest nanos) {
	newest = never
	for i := 0; i < c.samples.n; i++ {
		if s := c.samples.back(i); s.done < from {
			break
		} else if s.sig == Success && s.sent >= from && s.sent < to {
			n, newest = n+1, max(newest, s.sent)
		}
	}
	return n, newest
}

// nanos is an instant in nanoseconds since the Unix epoch: scans compare integers.
type nanos int64

const never nanos = math.MinInt64 // before every instant

func toNanos(t time.Time) nanos { return nanos(t.UnixNano()) }

// sample is one finished request as the controller remembers it.
type sample struct {
	sent, done nanos
	lat        time.Duration // to response headers; 0 = unknown
	sig        Signal
	conc       int  // this host's requests in flight when it was sent, itself included
	crowded    bool // its time in flight overlapped another remembered request's
	demand     Demand
}

// ring is a FIFO of at most cap elements, the oldest overwritten. Samples are pushed in done
// order: scans from the newest stop once done is before their instant.
type ring[T any] struct {
	buf          []T
	head, cap, n int // head: the oldest element's index
}

func (r *ring[T]) push(v T) {
	if r.n < r.cap { // head stays 0 until the ring is full
		r.buf, r.n = append(r.buf, v), r.n+1
	} else {
		r.buf[r.head], r.head = v, (r.head+1)%r.cap
	}
}

// get returns the i-th oldest element (0 <= i < r.n).
func (r *ring[T]) get(i int) *T { return &r.buf[(r.head+i)%r.n] }

// back returns the i-th newest element (0 <= i < r.n).
func (r *ring[T]) back(i int) *T { return r.get(r.n - 1 - i) }

// point is the rate and window in effect from t on.
type point struct {
	t      nanos
	rate   float64
	window int
}

// history is the rate and window changes, oldest first; it is never empty.
type history struct{ ring[point] }

func (h *history) last() *point { return h.get(h.n - 1) }

// at returns the point in effect at t (the oldest known if t predates them all).
func (h *history) at(t nanos) point {
	after := sort.Search(h.n, func(i int) bool { return h.get(i).t > t })
	return *h.get(max(after-1, 0))
}

// quantile returns the nearest-rank q-quantile of ds (0 if empty), sorting ds in place.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(max(int(math.Ceil(q*float64(len(ds))-1e-9))-1, 0), len(ds)-1)]
}

// optional is a value that may be unset (the zero optional).
type optional[T any] struct {
	v  T
	ok bool
}

func (o *optional[T]) set(v T) { *o = optional[T]{v: v, ok: true} }

func (o optional[T]) get() (T, bool) { return o.v, o.ok }
