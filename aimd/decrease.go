package aimd

import "time"

// cut is what a refusal teaches: the new rate and plateau, and whether the new rate rests on a
// measurement of the limit rather than on a bracket.
type cut struct {
	rate, plateau float64
	measured      bool
}

// decreaseRate is the decrease on an Overload or Failure outcome s (not stale, not isolated).
// The rate that drew it (rs) bounds the limit from above; what it teaches depends on the phase
// it ends (docs/aimd.md, R3, R4). The rate never rises on a refusal.
func (c *Controller) decreaseRate(now time.Time, s *sample) {
	// 1. The rate that drew the refusal, and the one before it that was accepted.
	rs := c.sendingRate(s.sent)
	lo := min(c.sendingRate(c.lastAcceptedBefore(s.sent)), rs)
	c.fit.refusedAt(rs)
	endsSlowStart, repeat := c.inSlowStart(), c.inRun()
	// 2. The failure logs learn what kind of signal this is.
	c.noteSignal(s, rs, repeat)
	// 3. The new rate and plateau.
	accepted := c.recentAccepted(s.sent)
	d := c.measureCut(s, rs, lo, accepted, endsSlowStart)
	d.rate = c.clampRate(min(d.rate, c.rate))
	// The window was full: failures may be the host's concurrency limit.
	windowFull := s.sig == Failure && s.conc >= c.hist.at(s.sent).window
	// 4. The probe's pace, the target and the curve.
	c.pace.refusedAt(rs)
	c.cutRate(d.rate, windowFull)
	c.retarget(rs, d.measured)
	c.curve.restart(d.rate, max(d.plateau, d.rate))
	c.curve.searched = false
	// 5. The episode, a new epoch, and the fit of the epoch this refusal closed.
	c.ep.refusedAt(s.sent, c.epoch.start, rs, d.rate, repeat, c.target.kind == noTarget)
	c.startEpoch(now)
	c.queueFit(now, s.sent, !endsSlowStart && !repeat)
}

// noteSignal updates the failure logs for congestion signal s drawn at rs: the rate a
// background share is learned under, and the cuts a share may later undo.
func (c *Controller) noteSignal(s *sample, rs float64, repeat bool) {
	slow := c.inSlowStart()
	if s.sig == Failure {
		if _, ok := c.fails.cut.get(); !slow && !ok {
			c.fails.cut.set(rs)
		}
		if !c.fails.known() {
			c.fails.undo.note(c, c.fails.count())
		}
	} else {
		c.fails.undo = failureUndo{} // an Overload: the rate rests on the host's word now
	}
}

// measureCut is the cut for a refusal of s drawn at rs (lo: the rate of the last success
// before it; accepted: the success rate over the RateWindow before it):
//   - ending slow start: Beta × accepted (at least Beta × MinBeta² × rs), returning to
//     PlateauFactor × lo;
//   - ending an epoch of at least minSpan: Beta × the measured limit (the epoch's count, or
//     the gaps if one token explains the host), at least MinBeta × rs;
//   - ending a shorter epoch: MinBeta × rs (the last cut was not enough).
func (c *Controller) measureCut(s *sample, rs, lo, accepted float64, endsSlowStart bool) cut {
	est, span := c.fit.acceptedSince(c.epoch.start, s.sent, minSpan)
	switch {
	case endsSlowStart:
		return cut{rate: beta * max(accepted, minBeta*minBeta*rs), plateau: plateauFactor * lo}
	case est > 0 && span >= minSpan:
		if l1, ok := c.singleTokenLimit(s.sent); ok {
			est = max(est, l1)
		}
		r := max(beta*est, minBeta*rs)
		return cut{rate: r, plateau: r, measured: beta*est >= minBeta*rs}
	}
	r := minBeta * rs
	return cut{rate: r, plateau: r}
}

// retarget sets the search target after a refusal drawn at rs: rs itself. A refusal a search
// step drew, or one the new rate rests on a measurement of, leaves nothing to search: rs is
// only how far the climb overshot.
func (c *Controller) retarget(rs float64, measured bool) {
	c.target.set(rs, targetRefused)
	if c.curve.searched || measured {
		c.target.clear()
	}
}
