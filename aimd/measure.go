package aimd

import (
	"math"
	"slices"
	"time"
)

// The measurements the decrease rules read off the remembered requests.

// sendSpacing returns the median spacing of the sends (of remembered requests) just before t,
// over up to 8 gaps within the 2s (or four sending intervals) before t, each in units of the
// interval the allowed rate then called for (1 = sent as fast as allowed); ok is false when
// fewer than 2 sends are known. A median ignores a single long gap such as a Retry-After pause.
func (c *Controller) sendSpacing(t nanos) (spacing float64, ok bool) {
	from := t - nanos(max(2*time.Second, time.Duration(4/c.hist.at(t).rate*float64(time.Second))))
	var buf [24]nanos // ages before t; samples come in completion order, close to send order
	ages := buf[:0]
	for i := 0; i < c.samples.n && len(ages) < len(buf); i++ {
		s := c.samples.back(i)
		if s.done <= from {
			break
		}
		if s.sent > from && s.sent <= t {
			ages = append(ages, t-s.sent)
		}
	}
	if len(ages) < 2 {
		return 0, false
	}
	slices.Sort(ages) // newest send first
	ages = ages[:min(len(ages), 9)]
	var norm [8]float64
	n := 0
	for i := 1; i < len(ages); i++ {
		norm[n] = time.Duration(ages[i]-ages[i-1]).Seconds() * c.hist.at(t-ages[i-1]).rate
		n++
	}
	slices.Sort(norm[:n])
	return norm[(n-1)/2], true
}

// sendingRate estimates the rate the host was receiving at t: the allowed rate then if it was
// in use (sends spaced no more than twice the allowed interval), else the measured send rate
// (held back by the window or by a lack of URLs).
func (c *Controller) sendingRate(t nanos) float64 {
	r := c.hist.at(t).rate
	if sp, ok := c.sendSpacing(t); ok && sp > 2 {
		return r / sp
	}
	return r
}

// rateInUse reports whether the rate was the binding limit when s was sent: the caller did not
// say it had room to spare (DemandSpare), sends were spaced no more than twice the allowed
// interval, and s did not have to wait for a window slot.
func (c *Controller) rateInUse(s *sample) bool {
	if s.demand == DemandSpare || s.conc >= c.hist.at(s.sent).window {
		return false
	}
	sp, ok := c.sendSpacing(s.sent)
	return ok && sp <= 2
}

// singleTokenLimit tests the remembered successes against a one-token server bucket (nginx
// limit_req without burst): if every gap between consecutive successes (by send time) is
// longer than the gap between the refusal sent at ts and the success before it, one token
// explains the host and limit is 1/(the shortest accepted gap), with ok true (docs/aimd.md,
// R4).
func (c *Controller) singleTokenLimit(ts nanos) (limit float64, ok bool) {
	sends := c.fit.successSends(never, ts)
	if len(sends) < 3 {
		return 0, false
	}
	refused := ts - sends[len(sends)-1]
	shortest := nanos(math.MaxInt64)
	for i := 1; i < len(sends); i++ {
		shortest = min(shortest, sends[i]-sends[i-1])
	}
	if shortest <= refused || shortest <= 0 {
		return 0, false
	}
	return float64(time.Second) / float64(shortest), true
}

// lastAcceptedBefore returns the send time of the newest remembered success sent before t, or
// t itself if there is none.
func (c *Controller) lastAcceptedBefore(t nanos) nanos {
	best := never
	for i := 0; i < c.samples.n; i++ {
		s := c.samples.back(i)
		if s.done <= best {
			break // sent no later than done: no older sample can do better
		}
		if s.sig == Success && s.sent < t && s.sent > best {
			best = s.sent
		}
	}
	if best == never {
		return t
	}
	return best
}

// recentAccepted is the success rate over the RateWindow before ts, by send time.
func (c *Controller) recentAccepted(ts nanos) float64 {
	from := ts - nanos(rateWindow)
	ok := 0
	for i := 0; i < c.samples.n; i++ {
		s := c.samples.back(i)
		if s.done < from {
			break
		}
		if s.sent >= from && s.sent < ts && s.sig == Success {
			ok++
		}
	}
	return float64(ok) / rateWindow.Seconds()
}

// nanos is an instant as nanoseconds since the Unix epoch (valid for years 1678 to 2262): the
// controller's internal clock, so that its scans over samples compare integers.
type nanos int64

// never is before every instant the controller sees.
const never nanos = math.MinInt64

func toNanos(t time.Time) nanos { return nanos(t.UnixNano()) }

// sample is one finished request as the controller remembers it.
type sample struct {
	sent, done nanos
	lat        time.Duration // time to response headers; 0 = unknown
	sig        Signal
	conc       int  // requests of this host in flight when it was sent, itself included (estimated)
	crowded    bool // its time in flight overlapped another remembered request's
	demand     Demand
}

// ring is a fixed-capacity FIFO of the most recent elements; the oldest is overwritten. The
// controller keeps its samples in one (pushed in order of done time, so done never decreases
// from oldest to newest: scans from the newest stop as soon as done falls before the instant
// they look for) and its rate history in another (see history).
//
// Its buffer grows with use, doubling up to its capacity, so a host that sent a few requests
// costs a few samples' memory, not a full ring's.
type ring[T any] struct {
	buf  []T
	head int // index of the oldest element
	n    int
	cap  int // the most elements it keeps
}

func newRing[T any](capacity int) ring[T] { return ring[T]{cap: capacity} }

// push appends v, dropping the oldest element when the ring holds its capacity.
func (r *ring[T]) push(v T) {
	if r.n == len(r.buf) && len(r.buf) < r.cap {
		r.grow()
	}
	if r.n < len(r.buf) {
		r.buf[(r.head+r.n)%len(r.buf)] = v
		r.n++
		return
	}
	r.buf[r.head] = v
	r.head = (r.head + 1) % len(r.buf)
}

// grow doubles the buffer (up to cap), oldest element first.
func (r *ring[T]) grow() {
	buf := make([]T, min(max(2*len(r.buf), 1), r.cap))
	for i := 0; i < r.n; i++ {
		buf[i] = *r.get(i)
	}
	r.buf, r.head = buf, 0
}

// get returns the i-th oldest element: get(0) is the oldest. It requires 0 <= i < r.n.
func (r *ring[T]) get(i int) *T {
	j := r.head + i
	if j >= len(r.buf) {
		j -= len(r.buf)
	}
	return &r.buf[j]
}

// back returns the i-th newest element: back(0) is the latest. It requires 0 <= i < r.n.
func (r *ring[T]) back(i int) *T { return r.get(r.n - 1 - i) }

// point is the rate and window in effect from time t on.
type point struct {
	t      nanos
	rate   float64
	window int
}

// history is a fixed-capacity record of rate and window changes, oldest first, in time order.
type history struct{ ring[point] }

func newHistory(capacity int) history { return history{newRing[point](capacity)} }

func (h *history) last() *point { return h.get(h.n - 1) }

// at returns the point in effect at t: the newest one not after t, or the oldest one known when
// t predates them all (a binary search). It requires h.n > 0.
func (h *history) at(t nanos) point {
	lo, hi := 0, h.n // find the first point after t
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if h.get(m).t <= t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return *h.get(max(lo-1, 0))
}

// quantile returns the nearest-rank q-quantile (0 <= q <= 1) of ds, sorting ds in place.
// It returns 0 for an empty slice.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	k := int(math.Ceil(q*float64(len(ds))-1e-9)) - 1 // nearest rank, tolerant of float error
	return ds[min(max(k, 0), len(ds)-1)]
}

// optional is a value that may be unset: the zero optional is unset.
type optional[T any] struct {
	v  T
	ok bool
}

func (o *optional[T]) set(v T) { *o = optional[T]{v: v, ok: true} }

// get returns the value and whether it is set.
func (o optional[T]) get() (T, bool) { return o.v, o.ok }
