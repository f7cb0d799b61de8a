package aimd

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
