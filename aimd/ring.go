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
}

// ring is a fixed-capacity FIFO of the most recent samples; the oldest is overwritten.
// Samples are pushed in order of done time, so done never decreases from oldest to newest:
// scans from the newest stop as soon as done falls before the instant they look for.
type ring struct {
	buf  []sample
	head int // index of the oldest sample
	n    int
}

func newRing(capacity int) ring { return ring{buf: make([]sample, capacity)} }

func (r *ring) push(s sample) {
	if r.n < len(r.buf) {
		r.buf[(r.head+r.n)%len(r.buf)] = s
		r.n++
		return
	}
	r.buf[r.head] = s
	r.head = (r.head + 1) % len(r.buf)
}

// back returns the i-th newest sample: back(0) is the latest. It requires 0 <= i < r.n.
func (r *ring) back(i int) *sample {
	j := r.head + r.n - 1 - i
	if j >= len(r.buf) {
		j -= len(r.buf)
	}
	return &r.buf[j]
}

// point is the rate and window in effect from time t on.
type point struct {
	t      nanos
	rate   float64
	window int
}

// history is a fixed-capacity record of rate and window changes, oldest first, in time order.
type history struct {
	buf  []point
	head int
	n    int
}

func newHistory(capacity int) history { return history{buf: make([]point, capacity)} }

func (h *history) push(p point) {
	if h.n < len(h.buf) {
		h.buf[(h.head+h.n)%len(h.buf)] = p
		h.n++
		return
	}
	h.buf[h.head] = p
	h.head = (h.head + 1) % len(h.buf)
}

func (h *history) get(i int) *point {
	j := h.head + i
	if j >= len(h.buf) {
		j -= len(h.buf)
	}
	return &h.buf[j]
}

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

// firstAtLeast returns the earliest instant in [from, to) at which the rate in effect was at
// least r, or to if there was none. It requires h.n > 0.
func (h *history) firstAtLeast(from, to nanos, r float64) nanos {
	if h.at(from).rate >= r {
		return from
	}
	for i := 0; i < h.n; i++ {
		p := h.get(i)
		if p.t >= to {
			break
		}
		if p.t > from && p.rate >= r {
			return p.t
		}
	}
	return to
}
