package aimd

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// The bucket fit: which server-side token buckets explain what a host did. For each bucket
// size on burstGrid it finds the range of rates that reproduces every answer since the limit
// last changed; the fit is sound (it never rules out the true bucket) and allows for timing
// noise between send and arrival. When no bucket explains everything, the fit starts over
// from the epoch's opening refusal (docs/aimd.md, R5).

// burstGrid lists the bucket sizes the fit considers: real rate limiters count whole
// requests (nginx's burst, x/time/rate's, Envoy's max_tokens), so whole sizes suffice.
var burstGrid = func() []float64 {
	var g []float64
	for b := 1; b <= 32; b++ {
		g = append(g, float64(b))
	}
	return append(g, 40, 48, 64, 80, 100, 128)
}()

// bucketEvent is one request as a server-side bucket saw it: when it was sent, in seconds
// since some origin, and how it was answered.
type bucketEvent struct {
	t   float64
	sig Signal // Success, Overload, or Failure (the bucket's answer unknown)

	// Requests sent within the timing noise may have arrived in either order: early counts
	// the successes sent just before this one, late the token-takers sent just after.
	early, late int
}

// rateRange is the range of bucket rates, req/s, consistent with what a host did for one
// bucket size; lo > hi means the size is ruled out.
type rateRange struct{ lo, hi float64 }

func (r rateRange) empty() bool { return r.lo > r.hi }

// bucketFit is a fit: one rate range per burstGrid size (nil: nothing fitted).
type bucketFit []rateRange

// acceptsAll reports whether a bucket of rate l and size b accepts every accepted event. The
// bucket is taken to be as full as it can be: full at the first event, never charged for a
// failure (whose answer is unknown), and holding just under one token at each refusal (it
// refused). Arrival times differ from send times by up to tol seconds: each request is
// credited tol seconds of extra refill and the tokens of the requests sent within tol on the
// side that may have arrived after it.
func acceptsAll(evs []bucketEvent, l, b, tol float64) bool {
	level, last := b, evs[0].t
	for _, e := range evs {
		level = min(b, level+(e.t-last)*l)
		last = e.t
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

// refusesAll reports whether a bucket of rate l and size b that is empty at the first event
// refuses every refused event; accepted events and failures take a token if there is one.
// Each refused request is debited tol seconds of refill and the tokens of the requests sent
// within tol after it (they may have arrived before it).
func refusesAll(evs []bucketEvent, l, b, tol float64) bool {
	level, last := 0.0, evs[0].t
	for _, e := range evs {
		if e.sig == Overload && min(b, level+max(e.t-last-tol, 0)*l)-float64(e.late) >= 1 {
			return false
		}
		level = min(b, level+(e.t-last)*l)
		last = e.t
		if e.sig != Overload {
			level = max(level-1, 0)
		}
	}
	return true
}

// markReorder sets each event's early and late counts (see bucketEvent) for a timing noise
// of tol seconds; evs must be in send order.
func markReorder(evs []bucketEvent, tol float64) {
	j := 0 // first event sent at or after evs[i].t − tol
	for i := range evs {
		for evs[j].t < evs[i].t-tol {
			j++
		}
		evs[i].early = 0
		for k := j; k < i; k++ {
			if evs[k].sig == Success {
				evs[i].early++
			}
		}
		evs[i].late = 0
		for k := i + 1; k < len(evs) && evs[k].t <= evs[i].t+tol; k++ {
			if evs[k].sig != Overload {
				evs[i].late++
			}
		}
	}
}

// fitBuckets returns, for each burstGrid size, the range of rates within [minL, maxL] that
// explains evs (in send order), with a timing noise of tol seconds.
func fitBuckets(evs []bucketEvent, minL, maxL, tol float64) bucketFit {
	markReorder(evs, tol)
	out := make(bucketFit, len(burstGrid))
	for i, b := range burstGrid {
		out[i] = rateRange{math.Inf(1), math.Inf(-1)}
		if !acceptsAll(evs, maxL, b, tol) || !refusesAll(evs, minL, b, tol) {
			continue
		}
		out[i].lo = leastTrue(minL, maxL, func(l float64) bool { return acceptsAll(evs, l, b, tol) })
		out[i].hi = leastTrue(minL, maxL, func(l float64) bool { return !refusesAll(evs, l, b, tol) })
	}
	return out
}

// leastTrue returns (to 0.1%) the least l in [a, z] for which f is true; f must be monotone
// (false then true) and true at z.
func leastTrue(a, z float64, f func(float64) bool) float64 {
	if f(a) {
		return a
	}
	for z > a*1.001 {
		m := math.Sqrt(a * z)
		if f(m) {
			z = m
		} else {
			a = m
		}
	}
	return z
}

// bounds returns the least and greatest rate any bucket size still allows and whether a
// one-token bucket is among them; ok is false if none is.
func (f bucketFit) bounds() (lo, hi float64, oneToken, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for i, r := range f {
		if r.empty() {
			continue
		}
		lo, hi, ok = min(lo, r.lo), max(hi, r.hi), true
		oneToken = oneToken || burstGrid[i] == 1
	}
	return lo, hi, oneToken, ok
}

// leastSize returns the least bucket size the fit still allows (0 if none).
func (f bucketFit) leastSize() float64 {
	for i, r := range f {
		if !r.empty() {
			return burstGrid[i]
		}
	}
	return 0
}

// unboundedBurst reports whether the largest bucket size on the grid is still allowed: the
// fit has found a least size but no greatest.
func (f bucketFit) unboundedBurst() bool {
	return len(f) > 0 && !f[len(f)-1].empty()
}

// fitRec is one finished request in the fit's log.
type fitRec struct {
	sent nanos
	sig  Signal
}

// fitState says whether a fit is waiting for its requests to come back, and what it may do.
type fitState uint8

const (
	fitIdle    fitState = iota // no fit pending
	fitMeasure                 // pending: it updates the fit but moves nothing
	fitSet                     // pending: it may set the rate
)

// fitter fits server-side token buckets to what the host did. It logs every finished request;
// a refusal queues the fit of the epoch it closed, run once that epoch's requests have come
// back.
type fitter struct {
	fit    bucketFit
	start  nanos             // the fit's requests start here (never: the first request), where the limit last changed
	from   nanos             // the refusal that opened the epoch awaiting its fit (never: the first epoch)
	to     nanos             // the refusal that closed it
	at     nanos             // when its requests have all come back and it can be run
	state  fitState          // what the pending fit may do
	recs   []fitRec          // requests finished since start (and since the open episode began): the fit's input
	held   optional[float64] // the rate the last applied fit set, until a refusal
	size   float64           // while held: the least bucket size that fit allowed (0: unknown)
	misses int               // refusals at or below held (see refutations)
}

// log appends a finished request (not Neutral).
func (f *fitter) log(sent nanos, sig Signal) {
	if len(f.recs) >= fitLogCap {
		f.recs = append(f.recs[:0], f.recs[fitLogCap/2:]...)
	}
	f.recs = append(f.recs, fitRec{sent: sent, sig: sig})
}

// due reports whether a pending fit's requests have all come back by now.
func (f *fitter) due(now nanos) bool { return f.state != fitIdle && now >= f.at }

// refusedAt notes a refusal drawn at rs: one at or below the rate a fit set is a miss (the
// limit fell, or the fit is wrong). The fit holds the rate no longer.
func (f *fitter) refusedAt(rs float64) {
	if held, ok := f.held.get(); ok && rs <= 1.01*held {
		f.misses++
	}
	f.held, f.size = optional[float64]{}, 0
}

// burst is how many requests may leave back to back while the fit holds the rate: half the
// least bucket size it allows, rounded down (the other half to spare for arrivals bunched
// closer than the sends, by the network or a late server), at most maxBurst; 1 when it holds
// nothing, or when it bounded no size.
func (f *fitter) burst() int {
	if _, ok := f.held.get(); !ok || f.size < 4 {
		return 1
	}
	return int(min(math.Floor(f.size/2), maxBurst))
}

// successSends returns the send times of the logged successes sent in [from, ts), oldest
// first. The log reaches further back than the samples (a window limiter's whole quota, taken
// in a burst, must be counted).
func (f *fitter) successSends(from, ts nanos) []nanos {
	var sends []nanos
	for _, r := range f.recs {
		if r.sig == Success && r.sent >= from && r.sent < ts {
			sends = append(sends, r.sent)
		}
	}
	slices.Sort(sends)
	return sends
}

// acceptedSince is bestAccepted over the logged successes sent from from to ts.
func (f *fitter) acceptedSince(from, ts nanos, least time.Duration) (est float64, span time.Duration) {
	return bestAccepted(f.successSends(from, ts), ts, least)
}

// since fits the logged requests sent from start to ts (f.recs in send order), with rates in
// [minL, maxL] and a timing noise of tol seconds.
func (f *fitter) since(start, ts nanos, minL, maxL, tol float64) bucketFit {
	var evs []bucketEvent
	for _, r := range f.recs {
		if r.sent >= start && r.sent <= ts {
			evs = append(evs, bucketEvent{t: time.Duration(r.sent - ts).Seconds(), sig: r.sig})
		}
	}
	if len(evs) < 2 {
		return nil
	}
	return fitBuckets(evs, minL, maxL, tol)
}

// trim drops the logged requests sent before keepFrom.
func (f *fitter) trim(keepFrom nanos) {
	keep := f.recs[:0]
	for _, r := range f.recs {
		if r.sent >= keepFrom {
			keep = append(keep, r)
		}
	}
	f.recs = keep
}

// queueFit schedules the fit of the epoch that the refusal sent at ts has just closed, once the
// requests sent before it have come back: twice the slowest recent success latency from now. A
// fit still pending is run first with what has come back, but moves nothing: the decrease that
// closed this epoch has just set the rate. apply says whether the fit may set the rate (not
// after the refusal that ends slow start, whose burst-then-stop pattern a fit reads most
// easily wrong).
func (c *Controller) queueFit(now time.Time, ts nanos, apply bool) {
	if c.fit.state != fitIdle {
		c.fit.state = fitMeasure
		c.runFit() // may not set the rate: fitMeasure
	}
	var slowest time.Duration
	for i := 0; i < min(c.samples.n, sampleWindow); i++ {
		if s := c.samples.back(i); s.sig == Success {
			slowest = max(slowest, time.Duration(s.done-s.sent))
		}
	}
	c.fit.to, c.fit.at, c.fit.state = ts, toNanos(now)+nanos(2*slowest), fitMeasure
	if apply {
		c.fit.state = fitSet
	}
}

// runFit fits the requests sent since the limit last changed, up to the refusal that closed
// the pending epoch. If no bucket explains them all, the fit starts over from the refusal that
// opened the epoch. A fit that may set the rate and pins the limit within fitNarrow proposes
// fitRate of its low end (ok); the state machine holds the rate there (holdFitted).
func (c *Controller) runFit() (rate float64, ok bool) {
	f := &c.fit
	from, ts, apply := f.from, f.to, f.state == fitSet
	f.from, f.state = ts, fitIdle
	slices.SortStableFunc(f.recs, func(a, b fitRec) int { return cmp.Compare(a.sent, b.sent) })
	noise := c.timingNoise()
	maxL := max(c.cfg.MaxRate, 2*c.rate)
	f.fit = f.since(f.start, ts, c.cfg.MinRate, maxL, noise.Seconds())
	if _, _, _, ok := f.fit.bounds(); !ok && f.start < from {
		f.start = from
		f.fit = f.since(from, ts, c.cfg.MinRate, maxL, noise.Seconds())
	}
	// The log also serves successSends: what an open refusal episode accepted is kept.
	keepFrom := f.start
	if _, ended := c.ep.lastEnd.get(); c.ep.run > 0 || ended {
		keepFrom = min(keepFrom, c.ep.from)
	}
	f.trim(keepFrom)
	lo, hi, oneToken, ok := f.fit.bounds()
	if !apply || !ok || hi > fitNarrow*lo || f.misses >= refutations {
		return 0, false
	}
	r := c.clampRate(fitRate(lo, oneToken, noise))
	if r <= c.curve.plateau && f.fit.unboundedBurst() {
		// Any bucket from some size up explains the host, as a host that is no token bucket
		// looks for a while: never lower the rate on such a fit.
		return 0, false
	}
	f.held.set(r)
	f.size = 0
	if !f.fit.unboundedBurst() {
		f.size = f.fit.leastSize()
	}
	return r, true
}

// fitRate is the rate to hold under a limit the fit puts at least lo: fitBeta × lo, and for a
// one-token bucket (which has no spare token to absorb an early arrival) also spaced more than
// 1/lo by twice the timing noise.
func fitRate(lo float64, oneToken bool, noise time.Duration) float64 {
	r := fitBeta * lo
	if oneToken {
		r = min(r, 1/(1/lo+2*noise.Seconds()))
	}
	return r
}

// timingNoise is the tolerance for the difference between send and arrival spacing: half the
// spread (p90 − p10) of recent success latencies, within [1ms, 20ms].
func (c *Controller) timingNoise() time.Duration {
	ds := c.latencies(never, false)
	if len(ds) < 2 {
		return time.Millisecond
	}
	spread := quantile(ds, 0.9) - quantile(ds, 0.1)
	return min(max(spread/2, time.Millisecond), 20*time.Millisecond)
}
