package aimd

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// The bucket fit (R5): for each size on burstGrid, the rates of a token bucket that reproduce
// every logged answer. It is sound (it never rules out the true bucket) and allows for timing
// noise between send and arrival.

var burstGrid = []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
	23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 40, 48, 64, 80, 100, 128}

// bucketEvent is one request: its send time t (s) and answer (a Failure's is unknown); early and
// late count the successes before it and the token-takers after it within the noise.
type bucketEvent struct {
	t           float64
	sig         Signal
	early, late int
}

// rateRange is the bucket rates consistent with the host for one size; lo > hi: none.
type rateRange struct{ lo, hi float64 }

func (r rateRange) empty() bool { return r.lo > r.hi }

// bucketFit is one rateRange per burstGrid size.
type bucketFit []rateRange

// acceptsAll reports whether a bucket of rate l and size b, as full as it can be (full at first,
// never charged for a failure, under one token at each refusal), accepts every accepted event.
func acceptsAll(evs []bucketEvent, l, b, tol float64) bool {
	level, last := b, evs[0].t
	for _, e := range evs {
		level, last = min(b, level+(e.t-last)*l), e.t
		switch e.sig {
		case Success:
			if min(b, level+tol*l+float64(e.early)) < 1 {
				return false
			}
			level = max(level-1, 0)
		case Overload:
			level = min(level, 1+tol*l+float64(e.late))
		}
	}
	return true
}

// refusesAll reports whether a bucket of rate l and size b, empty at first, refuses every
// refused event.
func refusesAll(evs []bucketEvent, l, b, tol float64) bool {
	level, last := 0.0, evs[0].t
	for _, e := range evs {
		if e.sig == Overload && min(b, level+max(e.t-last-tol, 0)*l)-float64(e.late) >= 1 {
			return false
		}
		level, last = min(b, level+(e.t-last)*l), e.t
		if e.sig != Overload {
			level = max(level-1, 0)
		}
	}
	return true
}

// fitBuckets returns each size's rates within [minL, maxL] that explain evs (in send order)
// with a timing noise of tol s.
func fitBuckets(evs []bucketEvent, minL, maxL, tol float64) bucketFit {
	for i := range evs {
		evs[i].early, evs[i].late = 0, 0
		for k := i - 1; k >= 0 && evs[k].t >= evs[i].t-tol; k-- {
			if evs[k].sig == Success {
				evs[i].early++
			}
		}
		for k := i + 1; k < len(evs) && evs[k].t <= evs[i].t+tol; k++ {
			if evs[k].sig != Overload {
				evs[i].late++
			}
		}
	}
	out := make(bucketFit, len(burstGrid))
	for i, b := range burstGrid {
		out[i] = rateRange{math.Inf(1), math.Inf(-1)}
		if acceptsAll(evs, maxL, b, tol) && refusesAll(evs, minL, b, tol) {
			out[i].lo = leastTrue(minL, maxL, func(l float64) bool { return acceptsAll(evs, l, b, tol) })
			out[i].hi = leastTrue(minL, maxL, func(l float64) bool { return !refusesAll(evs, l, b, tol) })
		}
	}
	return out
}

// leastTrue returns (to 0.1%) the least l in [a, z] at which f, monotone and true at z, is true.
func leastTrue(a, z float64, f func(float64) bool) float64 {
	if f(a) {
		return a
	}
	for z > a*1.001 {
		if m := math.Sqrt(a * z); f(m) {
			z = m
		} else {
			a = m
		}
	}
	return z
}

// bounds returns the least and greatest rate any size allows, whether a one-token bucket is
// allowed, whether any size is, and the least size allowed (0: none, or no size is bounded).
func (f bucketFit) bounds() (lo, hi float64, oneToken, ok bool, size float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for i, r := range f {
		if !r.empty() {
			lo, hi, ok, size = min(lo, r.lo), max(hi, r.hi), true, cmp.Or(size, burstGrid[i])
		}
	}
	if !f[len(f)-1].empty() {
		size = 0
	}
	return lo, hi, !f[0].empty(), ok, size
}

type fitRec struct {
	sent nanos
	sig  Signal
}

// fitter logs every finished request; a refusal queues the fit of the epoch it closed, run once
// that epoch's requests have come back.
type fitter struct {
	to     nanos             // the refusal that closed the epoch awaiting its fit
	at     optional[nanos]   // when its requests have all come back; unset: no fit pending
	recs   []fitRec          // the latest requests: 16 × memory (16 B each), the oldest half dropped when full
	held   optional[float64] // the rate the last applied fit set, until a refusal
	size   float64           // while held: the least size that fit allowed (0: unknown)
	misses int               // refusals at or below held: refutations retire the fit
}

func (f *fitter) log(sent nanos, sig Signal) {
	if len(f.recs) >= 16*memory {
		f.recs = append(f.recs[:0], f.recs[8*memory:]...)
	}
	f.recs = append(f.recs, fitRec{sent: sent, sig: sig})
}

func (f *fitter) due(now nanos) bool { at, ok := f.at.get(); return ok && now >= at }

// refusedAt notes a refusal drawn at rs: at or below the held rate it is a miss.
func (f *fitter) refusedAt(rs float64) {
	if held, ok := f.held.get(); ok && rs <= (1+sameRate)*held {
		f.misses++
	}
	f.held, f.size = optional[float64]{}, 0
}

// burst is half the least size the holding fit allows, at most maxBurst, at least 1 (size is 0
// unless a fit holds).
func (f *fitter) burst() int { return max(int(min(math.Floor(f.size/2), maxBurst)), 1) }

// successSends returns the send times of the logged successes sent in [from, ts), sorted.
func (f *fitter) successSends(from, ts nanos) (sends []nanos) {
	for _, r := range f.recs {
		if r.sig == Success && r.sent >= from && r.sent < ts {
			sends = append(sends, r.sent)
		}
	}
	slices.Sort(sends)
	return sends
}

// queueFit schedules the fit of the epoch the refusal sent at ts closed, twice the slowest
// recent success from now, in place of any pending one.
func (c *Controller) queueFit(now time.Time, ts nanos) {
	var slowest time.Duration
	for i := 0; i < min(c.samples.n, recent); i++ {
		if s := c.samples.back(i); s.sig == Success {
			slowest = max(slowest, time.Duration(s.done-s.sent))
		}
	}
	c.fit.to = ts
	c.fit.at.set(toNanos(now) + nanos(2*slowest))
}

// runFit fits the logged requests sent up to the refusal that queued it and, if the fit pins
// the limit within restartFactor, proposes fitBeta × its low end, unless that is no raise and
// no size is bounded.
func (c *Controller) runFit() (rate float64, ok bool) {
	f := &c.fit
	f.at = optional[nanos]{}
	slices.SortStableFunc(f.recs, func(a, b fitRec) int { return cmp.Compare(a.sent, b.sent) })
	var evs []bucketEvent
	for _, r := range f.recs {
		if r.sent <= f.to {
			evs = append(evs, bucketEvent{t: time.Duration(r.sent - f.to).Seconds(), sig: r.sig})
		}
	}
	if len(evs) < 2 || f.misses >= refutations {
		return 0, false
	}
	// The timing noise: half the spread (p90 − p10) of recent latencies, from 1 ms (a clock's grain).
	ds := c.latencies(false)
	noise := min(max((quantile(ds, 0.9)-quantile(ds, 0.1))/2, time.Millisecond), maxNoise).Seconds()
	lo, hi, oneToken, ok, size := fitBuckets(evs, c.cfg.MinRate, max(c.cfg.MaxRate, 2*c.rate), noise).bounds()
	if !ok || hi > restartFactor*lo {
		return 0, false
	}
	r := fitBeta * lo
	if oneToken {
		r = min(r, 1/(1/lo+2*noise))
	}
	if r = c.clampRate(r); r <= c.curve.plateau && size == 0 {
		return 0, false // any bucket from some size up explains the host: never lower on it
	}
	f.held.set(r)
	f.size = size
	return r, true
}
