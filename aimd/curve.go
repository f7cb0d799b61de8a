package aimd

import (
	"math"
	"time"
)

// curve is how the rate grows. In slow start it grows multiplicatively while used. After a
// decrease it follows a curve on a clock that runs only while the rate is used: a linear return
// from the rate the decrease set (from) to the plateau within the return time, then a cubic
// probe above the plateau. A fit that raised the rate first holds it at the plateau.
type curve struct {
	plateau  float64       // K: the rate to return to after a decrease (0 in the first slow start)
	from     float64       // the rate the last decrease (or search step) started the curve at
	elapsed  time.Duration // time in use on the curve
	hold     time.Duration // time in use still to spend at K before the curve starts
	steps    int           // successes since the last decrease or search step
	searched bool          // a search step was taken since the last decrease
}

// restart starts the curve afresh at rate from, returning to plateau.
func (k *curve) restart(from, plateau float64) {
	k.from, k.plateau = from, plateau
	k.elapsed, k.hold, k.steps = 0, 0, 0
}

// advance runs the curve's clock by dt of time in use, the hold first.
func (k *curve) advance(dt time.Duration) {
	if k.hold > 0 {
		if dt <= k.hold {
			k.hold -= dt
			return
		}
		dt -= k.hold
		k.hold = 0
	}
	k.elapsed += dt
}

// at is the curve's rate: K during the hold, the linear return from `from` to K within
// returnTime, then K·(1 + probeGain·(t'/probe)³).
func (k *curve) at(returnTime time.Duration, probe float64) float64 {
	if k.hold > 0 {
		return k.plateau
	}
	t := k.elapsed.Seconds()
	if T := returnTime.Seconds(); k.from < k.plateau && t < T {
		return k.from + (k.plateau-k.from)*t/T
	} else if k.from < k.plateau {
		t -= T
	}
	x := t / probe
	return k.plateau * (1 + probeGain*x*x*x)
}

// pace is what refusals have taught about probing: how long the probe takes and what a
// refusal costs.
type pace struct {
	probeTime   time.Duration     // probeTime, doubled while refusals recur at one rate
	lastRefusal optional[float64] // the rate of the last refusal
	pause       time.Duration     // the pause the last refusal cost (its Retry-After)
	quick       bool              // the last refusal paused nothing: the return shrinks (quickShare)
}

// returnSpan is the time the linear return to the plateau takes, and a search step's spacing:
// returnTime, or quickShare of it where a refusal costs no pause; sends is the fewest successes
// between two search steps, shrunk alike.
func (c *Controller) returnSpan() (span time.Duration, sends int) {
	if c.pace.quick {
		return time.Duration(quickShare * float64(returnTime)), int(quickShare * searchSends)
	}
	return returnTime, searchSends
}

// refusedAt notes a refusal drawn at rate rs: one at about the rate of the previous one means
// the limit is where it was, so the probe above it slows (up to maxStretch × probeTime);
// anything else starts over at probeTime.
func (p *pace) refusedAt(rs float64) {
	if last, ok := p.lastRefusal.get(); ok && math.Abs(rs/last-1) < patienceBand {
		p.probeTime = min(2*p.probeTime, maxStretch*probeTime)
	} else {
		p.probeTime = probeTime
	}
	p.lastRefusal.set(rs)
}

// probeSeconds is the current probe time: the pace's probe time, stretched to probeRequests sending
// intervals at the plateau (at most maxStretch × probeTime), and at least pauseProbeRatio × the
// last refusal's pause (at most maxPauseProbe).
func (c *Controller) probeSeconds() float64 {
	pause := min(pauseProbeRatio*c.pace.pause, maxPauseProbe).Seconds()
	stretch := min(float64(probeRequests)/max(c.curve.plateau, c.cfg.MinRate), maxStretch*probeTime.Seconds())
	return max(c.pace.probeTime.Seconds(), stretch, pause)
}

// grow applies the increase rules after success s, dt of activity after the previous outcome.
func (c *Controller) grow(dt time.Duration, s *sample) {
	windowFull := s.conc >= c.hist.at(s.sent).window
	rateUsed := c.rateInUse(s)
	if rateUsed && c.win.mode == windowFollowsRate {
		c.growWindow(c.win.followRate(c.rate, c.typicalSlow()))
	}
	if c.inSlowStart() {
		c.slowStartGrow(dt, rateUsed, windowFull)
		return
	}
	if rateUsed {
		c.climb(dt)
	}
	if windowFull {
		c.growWindow(c.win.probe(windowProbe))
	}
}

// climb moves the rate along the curve after dt of the rate in use: search steps and target
// revisions when due, then the curve's rate if higher, then slow start again if the rate has
// left the plateau far behind.
func (c *Controller) climb(dt time.Duration) {
	k, pf := &c.curve, plateauFactor
	k.advance(dt)
	k.steps++
	span, sends := c.returnSpan()
	stepDue := k.elapsed >= span && k.steps >= sends
	if stepDue && c.target.kind == targetBound && c.target.reached(k.plateau) && k.elapsed >= time.Duration(c.ep.blockLen) {
		// Held just under the bound, unrefused, for longer than the run lasted: the bound
		// was the run's backoff. Double it, toward the rate that drew the run.
		r := min(c.ep.refused, 2*c.target.rate)
		c.target.set(r, c.ep.boundKind(r))
	}
	if stepDue && c.target.searching(k.plateau) {
		// Binary search (on a log scale) toward just under the target.
		c.searchStep(max(c.rate, k.plateau), math.Sqrt(k.plateau*pf*c.target.rate))
	}
	c.climbTo(k.at(span, c.probeSeconds()))
	if c.target.kind != noTarget && c.rate > c.target.rate {
		c.target.clear() // beyond the target without a refusal: the limit has risen
	}
	if c.rate >= restartFactor*k.plateau && c.rate < c.clampRate(math.Inf(1)) {
		c.probeRestart()
	}
}

// targetKind says what a target's rate is.
type targetKind uint8

const (
	noTarget      targetKind = iota // nothing to search toward
	targetRefused                   // the rate the last refusal was drawn at
	targetBound                     // a bound runEnd set on the search after a refusal run, below the rate that drew the run
)

// target is the rate above the plateau that the search climbs toward, and what it is. The
// rate is positive unless the kind is noTarget.
type target struct {
	rate float64
	kind targetKind
}

// set makes rate (of kind k) the target; a rate of 0 clears it.
func (t *target) set(rate float64, k targetKind) {
	if !(rate > 0) {
		*t = target{}
		return
	}
	*t = target{rate: rate, kind: k}
}

// clear drops the target: nothing is searched.
func (t *target) clear() { *t = target{} }

// reached reports whether plateau has come within RestartFactor of PlateauFactor × the
// target: a search has no step left to take.
func (t target) reached(plateau float64) bool {
	return t.kind != noTarget && plateau*restartFactor >= plateauFactor*t.rate
}

// searching reports whether there is a target the plateau has not reached.
func (t target) searching(plateau float64) bool {
	return t.kind != noTarget && !t.reached(plateau)
}
