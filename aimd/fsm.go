package aimd

import (
	"math"
	"time"
)

// The state machine. The functions in this file are the only code that writes the rate
// (c.rate), the window (c.win.size) and the phase (c.phase); the estimators (the bucket fit,
// the run measure, the failure logs, the latency reference, the stated limit) compute bounds
// and proposals and hand them to one of these. Construction (New, Restore) goes through them too.
//
// The phase is stored. Slow start is entered only by begin, startSlowStart, probeRestart and
// undoCuts, and left only by a decrease (cutRate, shrinkWindow) or a stated limit
// (holdStated). Outside it the phases follow one order, refusal-run → hold → return → search
// → probe: each is left by its own exit condition (settle), into the next; a transition that
// restarts the curve (place) starts the order again from the top.

// settle leaves the current phase, and each it leads to, whose exit condition holds: a refusal
// run at the epoch's first success, the hold when its time in use has run, the return when
// its time has run (or there is nothing to return to), the search when the plateau has
// reached the target. Slow start and the probe are left only by transitions. Observe calls it
// after the outcome's counters and clocks have moved.
func (c *Controller) settle() {
	k := &c.curve
	for {
		switch c.phase {
		case PhaseRefusalRun:
			if c.inRun() {
				return
			}
			c.phase = PhaseHold
		case PhaseHold:
			if k.hold > 0 {
				return
			}
			c.phase = PhaseReturn
		case PhaseReturn:
			if span, _ := c.returnSpan(); k.from < k.plateau && k.elapsed < span {
				return
			}
			c.phase = PhaseSearch
		case PhaseSearch:
			if c.target.searching(k.plateau) {
				return
			}
			c.phase = PhaseProbe
		default: // slow start, probe
			return
		}
	}
}

// place starts the phase order again from the top after a transition restarted the curve
// (outside slow start), and settles.
func (c *Controller) place() {
	if c.phase != PhaseSlowStart {
		c.phase = PhaseRefusalRun
	}
	c.settle()
}

// inSlowStart reports whether no congestion has been seen since slow start last began.
func (c *Controller) inSlowStart() bool { return c.phase == PhaseSlowStart }

// begin sets the starting rate and window (New).
func (c *Controller) begin() {
	c.rate = c.clampRate(c.cfg.InitialRate)
	c.win.size = float64(c.cfg.InitialWindow)
	c.phase = PhaseSlowStart
}

// resume sets the rate and window a saved State holds (Restore): rate 0 and window 0 keep
// New's; slow says whether the state was still in slow start.
func (c *Controller) resume(rate float64, window int, slow bool) {
	if rate > 0 {
		c.rate = c.clampRate(rate)
	}
	if window > 0 {
		c.win.size = float64(min(max(window, c.cfg.MinWindow), c.cfg.MaxWindow))
	}
	if !slow {
		c.phase = PhaseProbe // placed by settle once the curve is restored
	}
}

// recap sets the rate's cap (c.top) from the ceiling and the stated limit and applies it to
// the rate at once (SetCeiling, a refuted stated limit).
func (c *Controller) recap() {
	c.top = c.capRate()
	c.rate = c.clampRate(c.rate)
}

// slowStartGrow is slow start's growth after a success dt of activity after the previous
// outcome: the rate doubles per interval of use (R3) if it was in
// use, and the window grows by one if the success found it full.
func (c *Controller) slowStartGrow(dt time.Duration, rateUsed, windowFull bool) {
	if rateUsed {
		iv := max(slowStartInterval, 2*c.lat.baseline, time.Duration(1/c.rate*float64(time.Second)))
		c.rate = c.clampRate(c.rate * math.Pow(2, dt.Seconds()/iv.Seconds()))
	}
	if windowFull {
		c.win.size = min(c.win.size+1, float64(c.cfg.MaxWindow))
	}
}

// startSlowStart enters slow start, the rate raised to at least floor (0: none).
func (c *Controller) startSlowStart(floor float64) {
	if floor > 0 {
		c.rate = c.clampRate(max(c.rate, floor))
	}
	c.phase = PhaseSlowStart
}

// probeRestart enters slow start from a probe that went RestartFactor above the plateau
// unrefused (R3): the limit rose, and the window follows the rate again.
func (c *Controller) probeRestart() {
	c.phase = PhaseSlowStart
	c.win.mode = windowFollowsRate
}

// searchStep restarts the curve from rate from toward a plateau raised by the search (R6).
func (c *Controller) searchStep(from, plateau float64) {
	c.curve.restart(from, plateau)
	c.curve.searched = true
	c.place()
}

// climbTo raises the rate to the curve's rate r if r is higher (R6).
func (c *Controller) climbTo(r float64) {
	if r > c.rate {
		c.rate = c.clampRate(r)
	}
	c.settle()
}

// growWindow raises the window to size (at most MaxWindow); it never lowers it.
func (c *Controller) growWindow(size float64) {
	c.win.size = max(c.win.size, min(size, float64(c.cfg.MaxWindow)))
}

// cutRate is the decrease on a congestion signal: the rate becomes rate (already clamped and
// never above the current one), the window is cut by Beta if cutWindow, and slow start, if it
// was on, ends. The curve and the episode are set by the caller (decreaseRate).
func (c *Controller) cutRate(rate float64, cutWindow bool) {
	if cutWindow {
		c.win.size = max(math.Floor(c.win.size*beta), float64(c.cfg.MinWindow))
	}
	c.rate = rate
	c.phase = PhaseRefusalRun
}

// shrinkWindow is the decrease on a latency signal: the window becomes target and stops
// following the rate; the rate is left alone, and slow start, if it was on, ends with the
// curve restarted at the rate.
func (c *Controller) shrinkWindow(target int) {
	c.win.size, c.win.lastSet = float64(target), target
	c.win.mode = windowLatencyBound
	if c.inSlowStart() {
		c.phase = PhaseProbe
		steps := c.curve.steps
		c.curve.restart(c.rate, c.rate)
		c.curve.steps = steps
	}
	c.place()
}

// undoShrink restores the window a latency decrease that helped nothing cut (R10).
func (c *Controller) undoShrink(size float64, mode windowMode) {
	c.win.size, c.win.mode = max(c.win.size, size), mode
}

// endRun applies what a refusal run's end measured (runEnd): slow start again from
// InitialRate (R3), or the rate returned to v.rate with the curve restarted there and v.target
// the target the search climbs toward (R8).
func (c *Controller) endRun(v runVerdict) {
	switch v.kind {
	case runRestarted:
		c.startSlowStart(c.cfg.InitialRate)
		c.target.clear()
	case runReturned:
		c.rate = v.rate
		c.curve.restart(v.rate, v.rate)
		c.curve.searched = false
		c.target = v.target
		c.place()
	}
}

// holdFitted holds the rate at r, set from a bucket fit (R5): the curve's plateau, with a
// hold of one probe time first if that raised it.
func (c *Controller) holdFitted(r float64) {
	raised := r > c.curve.plateau
	c.rate = r
	c.curve.from, c.curve.plateau = r, r
	c.target.clear()
	if raised {
		// The limit is known: a probe could only find that it rose.
		c.curve.elapsed, c.curve.hold = 0, time.Duration(c.probeSeconds()*float64(time.Second))
	}
	c.place()
}

// holdStated caps the rate at r, just under a limit the host states (R11), sets it there
// and leaves slow start.
func (c *Controller) holdStated(r float64) {
	c.top = c.capRate()
	r = c.clampRate(r)
	c.rate = r
	c.phase = PhaseProbe
	c.curve.restart(r, r)
	c.target.clear()
	c.place()
}

// undoCuts returns the rate and plateau to what they were before Failure cuts a background
// share explains (R9), and slow start if the first of them ended it.
func (c *Controller) undoCuts(u failureUndo) {
	c.rate = max(c.rate, c.clampRate(u.rate))
	c.curve.restart(c.rate, max(c.curve.plateau, u.plateau))
	c.target.clear()
	if u.slow {
		c.phase = PhaseSlowStart
	}
	c.place()
}

// Phase names where a controller's rate is on its way (Stats.Phase).
type Phase uint8

const (
	// PhaseSlowStart: no congestion seen yet (or a probe went far above the old limit): the
	// rate grows multiplicatively while it is used.
	PhaseSlowStart Phase = iota
	// PhaseRefusalRun: refused, with no success since (the host refuses whatever is sent, as
	// a spent window quota or an outage does); each refusal backs off further.
	PhaseRefusalRun
	// PhaseReturn: after a decrease, the linear climb back to the plateau.
	PhaseReturn
	// PhaseHold: a bucket fit measured the limit and raised the rate to just under it; the
	// rate holds there for one probe time before the probe starts.
	PhaseHold
	// PhaseSearch: the plateau lies well below the last refused rate and is raised toward it
	// by binary search, one step per ReturnTime.
	PhaseSearch
	// PhaseProbe: at or above the plateau, probing slowly (a cubic curve) for a higher limit.
	PhaseProbe
)

var phaseNames = [...]string{"slow-start", "refusal-run", "return", "hold", "search", "probe"}

// String returns the phase's name as status displays show it ("slow-start", "probe", …).
func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return "unknown"
}

// inRun reports whether the host is in a refusal run: refused, with no success since the last
// refusal (a refusal now repeats it).
func (c *Controller) inRun() bool { return c.ep.run > 0 && c.epoch.ok == 0 }
