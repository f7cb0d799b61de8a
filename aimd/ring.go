package aimd

import (
	"math"
	"slices"
	"time"
)

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
	bare       bool // an Overload that paused nothing (no Retry-After): a bare refusal
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
