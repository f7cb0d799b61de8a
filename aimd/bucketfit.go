package aimd

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// The bucket fit: which server-side token buckets explain what a host did.
//
// A token bucket of rate L and size b (b tokens when full, one per accepted request) accepts
// a request when it holds a whole token and refuses it otherwise. Given the requests we sent
// and which were refused, the pairs (L, b) that reproduce every answer form a band: a bigger
// bucket explains the same answers with a lower rate. One refusal leaves the band wide (it
// says only that the bucket ran dry, not whether it held 2 tokens at 10/s or 5 at 7/s), but
// the requests since the limit last changed are fitted together, and slow start's burst, the
// pause after it and the climb that follows cut the band differently: after two or three
// refusals one or two bucket sizes usually remain and their rates span a few percent. That
// is the limit, measured.
//
// The fit is sound: it never rules out the true bucket. For each size on a grid it finds the
// least rate that accepts every success from the fullest the bucket can have been (full at
// the start, just under a token at each refusal, never charged for a failure, whose answer is
// unknown) and the greatest rate that refuses every refusal from the emptiest (empty at the
// start, charged for every request that may have taken a token). Send times stand for arrival
// times: a constant network delay cancels out, and jitter (timingNoise) is allowed for both
// as extra or missing refill and as requests that may have arrived in either order.
//
// When no bucket explains everything, the limit changed (or the host is no token bucket) and
// the fit starts over from the refusal that opened the last epoch. Two guards keep a wrong
// model from costing much. A host that is no token bucket (a fixed window counter, say) can
// be explained for a while by any bucket from some size up at a low rate; holding that low
// rate would never draw the refusal that shows it is wrong, so such a fit may raise the rate
// but never lower it. And a host that refuses a rate the fit called safe twice
// (maxFitMisses) is left to the other rules for good.

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

// fitLogCap bounds the fit's log (16 bytes a request). A log that fills loses its oldest
// half: the fit then assumes less about the bucket's level where the log begins and measures
// less sharply, but still soundly.
const fitLogCap = 2048

// maxFitMisses: after this many refusals at or below a rate the fit called safe, the host is
// taken to be no token bucket (a fixed window, say) and the fit no longer sets the rate.
const maxFitMisses = 2

// logForFit appends a finished request (not Neutral) to the fit's log.
func (c *Controller) logForFit(s *sample) {
	if len(c.fitLog) >= fitLogCap {
		c.fitLog = append(c.fitLog[:0], c.fitLog[fitLogCap/2:]...)
	}
	c.fitLog = append(c.fitLog, fitRec{sent: s.sent, sig: s.sig})
}

// queueFit schedules the fit of the epoch that the refusal sent at ts has just closed. The
// fit must wait until the requests sent before ts have come back (an accepted request still
// in flight would make the bucket look fuller than it was): until twice the slowest recent
// success latency has passed. A fit still pending is run first, with what has come back, but
// moves nothing: the decrease that closed this epoch has just set the rate. apply says whether
// the fit may set the rate: not after the refusal that ends slow start, whose burst-then-stop
// pattern a bucket fit reads most easily wrong (a small scheduling delay and a one-token
// bucket looks like a bigger one at half the rate); the climb after it decides.
func (c *Controller) queueFit(now time.Time, ts nanos, apply bool) {
	if c.fitAt != 0 {
		c.fitApply = false // a newer decrease has just set the rate
		c.runFit(now)
	}
	var slowest time.Duration
	for i := 0; i < min(c.samples.n, c.cfg.SampleWindow); i++ {
		if s := c.samples.back(i); s.sig == Success {
			slowest = max(slowest, time.Duration(s.done-s.sent))
		}
	}
	c.fitTo, c.fitAt, c.fitApply = ts, toNanos(now)+nanos(2*slowest), apply
}

// fitSince fits the logged requests sent from start to ts (c.fitLog in send order).
func (c *Controller) fitSince(start, ts nanos, tol float64) bucketFit {
	var evs []bucketEvent
	for _, r := range c.fitLog {
		if r.sent >= start && r.sent <= ts {
			evs = append(evs, bucketEvent{t: time.Duration(r.sent - ts).Seconds(), sig: r.sig})
		}
	}
	if len(evs) < 2 {
		return nil
	}
	return fitBuckets(evs, c.cfg.MinRate, max(c.cfg.MaxRate, 2*c.rate), tol)
}

// runFit fits the requests sent since the limit last changed, up to the refusal that closed
// the pending epoch, and stores the result in c.fit. If no bucket explains them all, the
// limit has changed (or the host is no token bucket): the fit starts over from the refusal
// that opened the epoch. If c.fitApply is set, the fit is trusted (see fitMisses), and it
// pins the limit within fitNarrow, the rate and the plateau become fitRate of its low end.
func (c *Controller) runFit(now time.Time) {
	from, ts := c.fitFrom, c.fitTo
	c.fitFrom, c.fitAt = ts, 0
	slices.SortStableFunc(c.fitLog, func(a, b fitRec) int { return cmp.Compare(a.sent, b.sent) })
	noise := c.timingNoise()
	c.fit = c.fitSince(c.fitStart, ts, noise.Seconds())
	if _, _, _, ok := c.fit.bounds(); !ok && c.fitStart < from {
		c.fitStart = from
		c.fit = c.fitSince(from, ts, noise.Seconds())
	}
	// The log also serves successSends: what an open refusal episode accepted is kept.
	keepFrom := c.fitStart
	if c.runLen > 0 || c.unblocked != 0 {
		keepFrom = min(keepFrom, c.runFrom)
	}
	keep := c.fitLog[:0]
	for _, r := range c.fitLog {
		if r.sent >= keepFrom {
			keep = append(keep, r)
		}
	}
	c.fitLog = keep
	lo, hi, oneToken, ok := c.fit.bounds()
	if !c.fitApply || !ok || hi > fitNarrow*lo || c.fitMisses >= maxFitMisses {
		return
	}
	r := c.clampRate(fitRate(lo, oneToken, noise))
	if r <= c.plateau && c.fit.unboundedBurst() {
		// Lower than the level the decrease chose, and any bucket from some size up explains
		// the host: that is what a host that is no token bucket (a fixed window counter, say)
		// looks like for a while, and holding the low rate would never draw the refusal that
		// shows it. A real token bucket bounds its size too.
		return
	}
	raised := r > c.plateau
	c.rate, c.plateau, c.epochRate, c.fitHeld = r, r, r, r
	c.hi = 0
	if raised {
		// The limit is known: a probe could only find that it rose. Hold for one probe time
		// before the probe's curve starts. (A fit that lowered the rate is probed as usual:
		// if it is wrong, holding would hide that the longest.)
		c.elapsed = -time.Duration(c.probeSeconds() * float64(time.Second))
	}
	c.record(now, false)
}

// timingNoise is the tolerance for the difference between send and arrival spacing: half the
// spread (p90 − p10) of recent success latencies, within [1ms, 20ms].
func (c *Controller) timingNoise() time.Duration {
	ds := c.recentLatencies(never, 0)
	if len(ds) < 2 {
		return time.Millisecond
	}
	spread := quantile(ds, 0.9) - quantile(ds, 0.1)
	return min(max(spread/2, time.Millisecond), 20*time.Millisecond)
}
