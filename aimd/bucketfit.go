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
// bucket explains the same answers with a lower rate. One epoch alone leaves the band wide
// (its refusal says only that the bucket ran dry, not whether it held 2 tokens at 10/s or 5 at
// 7/s), but every epoch cuts it differently (a refill during a pause, a climb, a steady ride),
// so the fit keeps, for each whole bucket size on a grid, the range of rates every epoch since
// the limit last changed allows, and intersects. After two or three refusals one bucket size
// usually remains and its rate range is a few percent wide: the limit, measured.
//
// Each epoch's range is sound whatever the bucket held when the epoch began: the least rate
// that accepts every accepted request is computed from a full bucket, the greatest rate that
// refuses every refused one from an empty bucket. Send times stand for arrival times: a
// constant network delay cancels out; jitter is allowed for by a time tolerance.

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

// bucketFit is the fit kept across epochs: one rate range per burstGrid size.
type bucketFit struct {
	ranges []rateRange // nil until the first refusal
}

// acceptsAll reports whether a bucket of rate l and size b accepts every accepted event
// (refusals cost nothing and are not checked; a failure, whose answer is unknown, is taken to
// have cost nothing). The bucket is taken to be as full as it can be at the first event: b
// tokens, or less than one if that event was refused. Arrival times differ from send times by
// up to tol seconds: each accepted request is credited tol seconds of extra refill and the
// tokens of the requests sent within tol before it (they may have arrived after it).
func acceptsAll(evs []bucketEvent, l, b, tol float64) bool {
	level, last := b, evs[0].t
	if evs[0].sig == Overload {
		level = 1
	}
	for _, e := range evs {
		level = min(b, level+(e.t-last)*l)
		last = e.t
		if e.sig == Success {
			if min(b, level+tol*l+float64(e.early)) < 1 {
				return false
			}
			level = max(level-1, 0)
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

// fitEpoch returns, for each burstGrid size, the range of rates within [minL, maxL] that
// explains evs (in send order), with a timing noise of tol seconds.
func fitEpoch(evs []bucketEvent, minL, maxL, tol float64) []rateRange {
	markReorder(evs, tol)
	out := make([]rateRange, len(burstGrid))
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

// update intersects the fit with one epoch's ranges. If nothing is left, the limit has
// changed (or the host is no token bucket): the fit starts over from the epoch alone.
func (f *bucketFit) update(epoch []rateRange) {
	if f.ranges == nil {
		f.ranges = epoch
		return
	}
	next := make([]rateRange, len(epoch))
	any := false
	for i := range epoch {
		next[i] = rateRange{max(f.ranges[i].lo, epoch[i].lo), min(f.ranges[i].hi, epoch[i].hi)}
		any = any || !next[i].empty()
	}
	if !any {
		next = epoch
	}
	f.ranges = next
}

// bounds returns the least and greatest rate any bucket size still allows and whether a
// one-token bucket is among them; ok is false if none is.
func (f *bucketFit) bounds() (lo, hi float64, oneToken, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for i, r := range f.ranges {
		if r.empty() {
			continue
		}
		lo, hi, ok = min(lo, r.lo), max(hi, r.hi), true
		oneToken = oneToken || burstGrid[i] == 1
	}
	return lo, hi, oneToken, ok
}

// fitRec is one finished request in the fit's log.
type fitRec struct {
	sent nanos
	sig  Signal
}

// fitLogCap bounds the fit's log (16 bytes a request). An epoch longer than that loses its
// oldest half, and with it the refusal that opened it: the fit then assumes less about the
// bucket's level at its start and measures less sharply, but still soundly.
const fitLogCap = 2048

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
// success latency has passed. A fit still pending is run first, with what has come back, but moves nothing: the
// decrease that closed this epoch has just set the rate.
func (c *Controller) queueFit(now time.Time, ts nanos) {
	if c.fitAt != 0 {
		c.runFit(now, false) // a newer decrease has just set the rate
	}
	var slowest time.Duration
	for i := 0; i < min(c.samples.n, c.cfg.SampleWindow); i++ {
		if s := c.samples.back(i); s.sig == Success {
			slowest = max(slowest, time.Duration(s.done-s.sent))
		}
	}
	c.fitTo, c.fitAt = ts, toNanos(now)+nanos(2*slowest)
}

// runFit fits the pending epoch (the requests sent from the refusal that opened it to the one
// that closed it) into c.fit. If apply is set and the fit now pins the limit within fitNarrow,
// the rate and the plateau become fitRate of its low end: a measurement.
func (c *Controller) runFit(now time.Time, apply bool) {
	from, ts := c.fitFrom, c.fitTo
	c.fitFrom, c.fitAt = ts, 0
	slices.SortStableFunc(c.fitLog, func(a, b fitRec) int { return cmp.Compare(a.sent, b.sent) })
	var evs []bucketEvent
	keep := c.fitLog[:0]
	for _, r := range c.fitLog {
		if r.sent >= from && r.sent <= ts {
			evs = append(evs, bucketEvent{t: time.Duration(r.sent - ts).Seconds(), sig: r.sig})
		}
		if r.sent >= ts { // the next epoch's, the refusal that opens it first
			keep = append(keep, r)
		}
	}
	c.fitLog = keep
	if len(evs) < 2 {
		return
	}
	c.fit.update(fitEpoch(evs, c.cfg.MinRate, max(c.cfg.MaxRate, 2*c.rate), c.timingNoise().Seconds()))
	lo, hi, oneToken, ok := c.fit.bounds()
	if !apply || !ok || hi > fitNarrow*lo {
		return
	}
	r := c.clampRate(c.fitRate(lo, oneToken))
	c.rate, c.plateau, c.epochRate = r, r, r
	c.hi = 0
	// The limit is known: a probe could only find that it rose. Hold for one probe time
	// before the probe's curve starts.
	c.elapsed = -time.Duration(c.probeSeconds() * float64(time.Second))
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
