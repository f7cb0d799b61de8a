package aimd

import (
	"math"
	"time"
)

// The state machine: its transitions (this file; doc.go lists them) are the only code that
// writes the rate (c.rate), the window (c.win.size) and the phase (c.phase).

// Phase names where a controller's rate is on its way (Stats.Phase).
type Phase uint8

const (
	PhaseSlowStart  Phase = iota // no congestion seen yet: the rate doubles while used
	PhaseRefusalRun              // refused, no success since: each refusal backs off further
	PhaseReturn                  // after a decrease: the linear climb back to the plateau
	PhaseSearch                  // the plateau rises by binary search toward the last refused rate
	PhaseProbe                   // above the plateau, probing slowly (a cubic) for a higher limit
)

var phaseNames = [...]string{"slow-start", "refusal-run", "return", "search", "probe"}

// String returns the phase's name as status displays show it ("slow-start", "probe", …).
func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return "unknown"
}

// settle leaves each phase whose exit condition holds, in the order refusal-run → return →
// search → probe.
func (c *Controller) settle() {
	for k := &c.curve; ; {
		switch span, _ := c.returnSpan(); {
		case c.phase == PhaseRefusalRun && !c.inRun():
			c.phase = PhaseReturn
		case c.phase == PhaseReturn && !(k.from < k.plateau && k.elapsed < span):
			c.phase = PhaseSearch
		case c.phase == PhaseSearch && !c.target.searching(k.plateau):
			c.phase = PhaseProbe
		default:
			return
		}
	}
}

// place starts the phase order again after the curve restarted (slow start stays), and settles.
func (c *Controller) place() {
	if c.phase != PhaseSlowStart {
		c.phase = PhaseRefusalRun
	}
	c.settle()
}

func (c *Controller) inSlowStart() bool { return c.phase == PhaseSlowStart }

// inRun reports whether the host is refused with no success since the last refusal.
func (c *Controller) inRun() bool { return c.ep.run > 0 && c.epoch.ok == 0 }

func (c *Controller) begin() {
	c.rate, c.win.size, c.phase = c.clampRate(c.cfg.InitialRate), float64(c.cfg.InitialWindow), PhaseSlowStart
}

// resume sets a saved rate and window (0: keep New's), in slow start or probing.
func (c *Controller) resume(rate float64, window int, slow bool) {
	if rate > 0 {
		c.rate = c.clampRate(rate)
	}
	if window > 0 {
		c.win.size = float64(min(window, c.cfg.MaxWindow))
	}
	if !slow {
		c.phase = PhaseProbe
	}
}

// recap applies the rate's cap (MaxRate, the ceiling, a trusted stated limit) to the rate.
func (c *Controller) recap() {
	c.rate = c.clampRate(c.rate)
}

// grow applies the increase rules after success s, dt of activity after the previous outcome.
func (c *Controller) grow(dt time.Duration, s *sample) {
	windowFull, rateUsed, slow := s.conc >= c.hist.at(s.sent).window, c.rateInUse(s), c.inSlowStart()
	if rateUsed && c.win.mode == windowFollowsRate {
		c.growWindow(math.Ceil(2 * c.rate * c.typicalSlow().Seconds())) // twice what the rate keeps in flight
	}
	switch {
	case slow && rateUsed: // R3: ×2 per interval in use
		iv := max(slowStartInterval, 2*c.lat.baseline, time.Duration(1/c.rate*float64(time.Second)))
		c.rate = c.clampRate(c.rate * math.Pow(2, dt.Seconds()/iv.Seconds()))
	case rateUsed:
		c.climb(dt)
	}
	switch {
	case windowFull && slow:
		c.growWindow(c.win.size + 1)
	case windowFull:
		c.growWindow(c.win.size + 1/(float64(searchSends*max(c.win.patience, 1))*max(c.win.size, 1)))
	}
}

// climb moves the rate along the curve after dt in use: search steps when due (R5), then the
// curve's rate if higher, then slow start again far above the plateau (R3).
func (c *Controller) climb(dt time.Duration) {
	k := &c.curve
	k.elapsed, k.steps = k.elapsed+dt, k.steps+1
	span, sends := c.returnSpan()
	stepDue := k.elapsed >= span && k.steps >= sends
	switch {
	case !stepDue || !c.target.reached(k.plateau):
	case c.target.kind == targetBound && k.elapsed >= time.Duration(c.ep.blockLen):
		r := min(c.ep.refused, 2*c.target.rate) // held under a run's bound longer than the run (R7)
		c.target.set(r, c.ep.boundKind(r))
	case c.target.kind == targetSlowStart:
		c.target.rate *= 2 // held near slow start's refused rate unrefused (R3)
	}
	if stepDue && c.target.searching(k.plateau) {
		k.restart(max(c.rate, k.plateau), math.Sqrt(k.plateau*plateauFactor*c.target.rate))
		k.searched = true
		c.place()
	}
	if r := k.at(span, c.probeSeconds()); r > c.rate {
		c.rate = c.clampRate(r)
	}
	c.settle()
	if c.target.kind != noTarget && c.rate > c.target.rate {
		c.target = target{} // beyond the target unrefused: the limit has risen
	}
	if c.rate >= restartFactor*k.plateau && c.rate < c.capRate() {
		c.phase, c.win.mode = PhaseSlowStart, windowFollowsRate
	}
}

// growWindow raises the window to size (at most MaxWindow); it never lowers it.
func (c *Controller) growWindow(size float64) {
	c.win.size = max(c.win.size, min(size, float64(c.cfg.MaxWindow)))
}

// decreaseRate is the decrease on a limit signal s (R3, R4): the rate that drew it (rs) bounds
// the limit from above. The rate never rises on a refusal.
func (c *Controller) decreaseRate(now time.Time, s *sample) {
	rs := c.sendingRate(s.sent)
	endsSlowStart, repeat := c.inSlowStart(), c.inRun()
	if s.sig == Failure {
		if _, ok := c.fails.cut.get(); !endsSlowStart && !ok {
			c.fails.cut.set(rs)
		}
		if !c.fails.known() {
			c.fails.undo.note(c, c.fails.count())
		}
	} else {
		c.fails.undo = failureUndo{} // an Overload: the rate rests on the host's word now
	}
	accepted := c.recentAccepted(s.sent)
	rate, plateau, measured := c.measureCut(s, rs, accepted, endsSlowStart)
	c.rate, c.phase = c.clampRate(min(rate, c.rate)), PhaseRefusalRun
	if s.sig == Failure && s.conc >= c.hist.at(s.sent).window { // the window was full (R9)
		c.win.size = max(math.Floor(c.win.size*beta), 1)
	}
	c.pace.refusedAt(rs)
	kind := targetRefused
	if endsSlowStart && s.sig == Overload && accepted < rs/restartFactor {
		kind = targetSlowStart // slow start had not sustained the rate it was refused at
	}
	c.target.set(rs, kind)
	if c.curve.searched || measured { // rs is only how far the climb overshot
		c.target = target{}
	}
	c.curve = curve{from: c.rate, plateau: max(plateau, c.rate)}
	c.ep.refusedAt(s.sent, c.epoch.start, rs, c.rate, repeat, c.target.kind == noTarget)
	c.startEpoch(now)
}

// measureCut is the cut for a refusal of s drawn at rs: ending slow start, beta × accepted,
// returning to plateauFactor × the rate of the last success before it (at most rs) (R3); ending
// an epoch of minSpan or more, beta × its measured limit (R4); else minBeta × rs.
func (c *Controller) measureCut(s *sample, rs, accepted float64, endsSlowStart bool) (rate, plateau float64, measured bool) {
	est := bestAccepted(c.sends.successSends(c.epoch.start, s.sent), s.sent, minSpan)
	switch {
	case endsSlowStart:
		lo := min(c.sendingRate(c.lastAcceptedBefore(s.sent)), rs)
		return beta * max(accepted, minBeta*minBeta*rs), plateauFactor * lo, false
	case est > 0:
		if l1, ok := c.singleTokenLimit(s.sent); ok {
			est = max(est, l1)
		}
		r := max(beta*est, minBeta*rs)
		return r, r, beta*est >= minBeta*rs
	}
	return minBeta * rs, minBeta * rs, false
}

// shrinkWindow is the decrease on a latency signal (R9): the window becomes target and stops
// following the rate; the rate stays, and slow start ends with the curve restarted at it.
func (c *Controller) shrinkWindow(target int) {
	c.win.size, c.win.lastSet, c.win.mode = float64(target), target, windowLatencyBound
	if c.inSlowStart() {
		c.phase = PhaseProbe
		c.curve.restart(c.rate, c.rate)
	}
	c.place()
}

// endRun applies what a refusal run's end measured (R7): slow start again from InitialRate
// (R3), or the rate returned to v.rate, searching toward v.target.
func (c *Controller) endRun(v runVerdict) {
	switch v.kind {
	case runRestarted:
		c.rate, c.phase, c.target = c.clampRate(max(c.rate, c.cfg.InitialRate)), PhaseSlowStart, target{}
	case runReturned:
		c.rate, c.target, c.curve = v.rate, v.target, curve{from: v.rate, plateau: v.rate}
		c.place()
	}
}

// holdStated sets and caps the rate at r, just under a stated limit (R10).
func (c *Controller) holdStated(r float64) {
	c.rate, c.phase, c.target = c.clampRate(r), PhaseProbe, target{}
	c.curve.restart(c.rate, c.rate)
	c.place()
}

// undoCuts returns the rate and plateau to what they were before Failure cuts the background
// share explains (R8), and slow start if the first of them ended it.
func (c *Controller) undoCuts(u failureUndo) {
	c.rate, c.target = max(c.rate, c.clampRate(u.rate)), target{}
	c.curve.restart(c.rate, max(c.curve.plateau, u.plateau))
	if u.slow {
		c.phase = PhaseSlowStart
	}
	c.place()
}

// curve is how the rate grows after a decrease, on a clock that runs only while the rate is
// used: the linear return from `from` to the plateau, then the cubic probe.
type curve struct {
	plateau  float64       // K: the rate to return to after a decrease (0 in the first slow start)
	from     float64       // the rate the last decrease (or search step) started the curve at
	elapsed  time.Duration // time in use on the curve
	steps    int           // successes since the last decrease or search step
	searched bool          // a search step was taken since the last decrease
}

// restart starts the curve from `from` toward plateau (searched is kept).
func (k *curve) restart(from, plateau float64) {
	*k = curve{from: from, plateau: plateau, searched: k.searched}
}

// at is the curve's rate: linear from `from` to K within span, then K·(1 + probeGain·(t/probe)³).
func (k *curve) at(span time.Duration, probe float64) float64 {
	t := k.elapsed.Seconds()
	if T := span.Seconds(); k.from < k.plateau && t < T {
		return k.from + (k.plateau-k.from)*t/T
	} else if k.from < k.plateau {
		t -= T
	}
	x := t / probe
	return k.plateau * (1 + probeGain*x*x*x)
}

// pace is what refusals have taught about probing (R6).
type pace struct {
	probeTime   time.Duration     // probeTime, doubled while refusals recur at one rate
	lastRefusal optional[float64] // the rate of the last refusal
	pause       time.Duration     // the pause the last refusal cost (its Retry-After)
	quick       bool              // the last refusal paused nothing
}

// returnSpan is the return's time and the fewest successes between search steps: returnTime and
// searchSends, or quickShare of them where a refusal costs no pause.
func (c *Controller) returnSpan() (span time.Duration, sends int) {
	if c.pace.quick {
		return time.Duration(quickShare * float64(returnTime)), int(quickShare * searchSends)
	}
	return returnTime, searchSends
}

// refusedAt notes a refusal drawn at rs: one within 1 − beta of the last doubles the probe
// time (up to maxStretch × probeTime); any other resets it.
func (p *pace) refusedAt(rs float64) {
	if last, ok := p.lastRefusal.get(); ok && math.Abs(rs/last-1) < 1-beta {
		p.probeTime = min(2*p.probeTime, maxStretch*probeTime)
	} else {
		p.probeTime = probeTime
	}
	p.lastRefusal.set(rs)
}

// probeSeconds is the probe time: the pace's, stretched to probeRequests sending intervals at
// the plateau (at most maxStretch × probeTime), at least the last pause ÷ (1 − beta): a
// refused probe costs its pause, so pauses take at most 1 − beta of the time.
func (c *Controller) probeSeconds() float64 {
	pause := min(c.pace.pause.Seconds()/(1-beta), maxPauseProbe.Seconds())
	stretch := min(float64(probeRequests)/max(c.curve.plateau, c.cfg.MinRate), maxStretch*probeTime.Seconds())
	return max(c.pace.probeTime.Seconds(), stretch, pause)
}

type targetKind uint8

const (
	noTarget        targetKind = iota
	targetRefused              // the rate the last refusal was drawn at
	targetBound                // a bound runEnd set below the rate that drew a run
	targetSlowStart            // the rate slow start was refused at without having sustained it
)

// target is the rate above the plateau the search climbs toward (R5); the zero target is none.
type target struct {
	rate float64
	kind targetKind
}

// set makes rate the target; a rate of 0 clears it.
func (t *target) set(rate float64, k targetKind) {
	*t = target{}
	if rate > 0 {
		*t = target{rate: rate, kind: k}
	}
}

// reached reports whether the plateau is within restartFactor of plateauFactor × the target.
func (t target) reached(plateau float64) bool {
	return t.kind != noTarget && plateau*restartFactor >= plateauFactor*t.rate
}

func (t target) searching(plateau float64) bool { return t.kind != noTarget && !t.reached(plateau) }
