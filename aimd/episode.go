package aimd

import (
	"slices"
	"time"
)

// episode is a host's refusal episode: refusals with no success between them (a run), and the
// runs that follow within about a window's period of the last one's end. A host refusing
// whatever is sent (a sliding-window quota spent in a burst, a ban, an outage) makes one; the
// halvings that space a run's requests out are a backoff and measure nothing, so at a run's end
// runEnd measures the rate to restore from what the host accepted.
type episode struct {
	run     int  // refusals in the current run; 0: none since the last success
	resumed bool // the current run resumed the episode: it ends at its first success even if one refusal long

	from    nanos   // the epoch the episode's first refusal ended began here
	rate    float64 // the rate the episode's first refusal set
	refused float64 // the rate that drew the episode's first refusal
	start   nanos   // when the episode's first refused request was sent
	last    nanos   // when the latest run's first refused request was sent
	settled bool    // the episode's first refusal ended a search or rested on a measurement: no search after it

	leastResumed optional[float64] // the least rate a resumed run of the episode was refused at
	firstEnd     optional[nanos]   // when the episode's first run ended (runEnd raised the rate)
	lastEnd      optional[nanos]   // when the last run ended, this episode's or an earlier one's
	blockLen     nanos             // the longest run seen (first refusal to first success): about a window's period
}

// endsRun reports whether a success now ends a run that runEnd must judge: a run of two or
// more refusals, or a resumed one.
func (e *episode) endsRun() bool {
	return e.run > 1 || (e.run == 1 && e.resumed)
}

// resumes reports whether a refusal sent at t resumes the episode: it came sooner after the
// last run ended than the episode's longest run lasted.
func (e *episode) resumes(t nanos) bool {
	end, ok := e.lastEnd.get()
	return ok && t-end < e.blockLen
}

// refused records a refusal sent at ts, drawn at rate rs, that set the rate newRate in the
// epoch that began at epochStart: it repeats the run, resumes the episode, or opens a new one.
// searchDone says whether no search follows it (the target was cleared).
func (e *episode) refusedAt(ts, epochStart nanos, rs, newRate float64, repeat, searchDone bool) {
	switch {
	case repeat:
		e.run++
	case e.resumes(ts):
		// What the episode accepted is measured from where it began; if a search step drew
		// this refusal, the episode is not searched again.
		e.run, e.last, e.settled, e.resumed = 1, ts, e.settled || searchDone, true
		if least, ok := e.leastResumed.get(); !ok || rs < least {
			e.leastResumed.set(rs)
		}
	default:
		*e = episode{run: 1, from: epochStart, rate: newRate, refused: rs, start: ts, last: ts,
			settled: searchDone, lastEnd: e.lastEnd, blockLen: e.blockLen}
	}
}

// boundKind is the kind of a search target at rate r after a run: a bound while below the
// rate that drew the run, that refused rate itself once it reaches it.
func (e *episode) boundKind(r float64) targetKind {
	if r < e.refused {
		return targetBound
	}
	return targetRefused
}

// runVerdict is what a refusal run's end measured (runEnd), for endRun to apply.
type runVerdict struct {
	kind   runEnding
	rate   float64 // runReturned: the rate to return to
	target target  // runReturned: what the search climbs toward
}

// runEnding names what a run's end does.
type runEnding uint8

const (
	runKept      runEnding = iota // nothing measured above the rate: the rate stays
	runRestarted                  // the episode accepted almost nothing: slow start again (R3)
	runReturned                   // the rate returns to what the host accepted (R8)
)

// runEnd measures a refusal run at its first success s (see episode.endsRun): the rate to
// return to is what the host accepted, measured over the episode (a window's quota over its
// period), and the gap to the rate that drew the run is searched within bounds. A run shorter
// than minSpan with no longer run before it is a token bucket's excess, not a block, and is
// kept as it is; an episode that accepted almost nothing starts over in slow start. It updates
// the episode's record of run ends, never the rate.
func (c *Controller) runEnd(s *sample) runVerdict {
	e := &c.ep
	sends := c.fit.successSends(e.from, s.sent+1)
	if len(sends) < minMeasured {
		return runVerdict{kind: runRestarted}
	}
	block := max(e.blockLen, s.sent-e.last)
	if block < nanos(minSpan) {
		return runVerdict{kind: runKept}
	}
	before, _ := slices.BinarySearch(sends, e.start) // the sends before the run
	r := c.clampRate(c.runMeasure(sends, before, s, block))
	if r <= c.rate {
		return runVerdict{kind: runKept}
	}
	e.lastEnd.set(s.sent)
	e.blockLen = block
	if _, ok := e.firstEnd.get(); !ok {
		e.firstEnd.set(s.sent)
	}
	// Search toward the rate that drew the run, but no further than twice r or a rate the host
	// accepted before the run over half as long as the run lasted.
	held, _ := bestAccepted(sends[:before], e.start, time.Duration(e.blockLen/2))
	v := runVerdict{kind: runReturned, rate: r}
	if h := min(e.refused, max(2*r, held)); h > r && !e.settled {
		v.target.set(h, e.boundKind(h))
	}
	return v
}

// runMeasure is the rate a run's end returns to (before clamping): Beta × the best of what the
// host accepted over the episode up to s and what it accepted before the run over the run's
// length (block), held to what it accepted since the episode's first run ended for a resumed
// run, and to no more than the rate the first refusal set and Beta × the least rate a resumed
// run was refused at. sends are the episode's success send times; before of them precede the
// run.
func (c *Controller) runMeasure(sends []nanos, before int, s *sample, block nanos) float64 {
	e := &c.ep
	est, _ := bestAccepted(sends, s.sent+1, minSpan)
	if full, _ := bestAccepted(sends[:before], e.start, time.Duration(block)); full > est {
		est = full
	}
	if first, ok := e.firstEnd.get(); e.resumed && ok {
		if since, span := bestAccepted(c.fit.successSends(first, s.sent+1), s.sent+1, time.Duration(block)); span > 0 {
			est = min(est, since)
		}
	}
	r := min(beta*est, e.rate)
	if least, ok := e.leastResumed.get(); ok {
		r = min(r, beta*least)
	}
	return r
}

// bestAccepted is the largest (successes sent from t0 to ts, less burstAllowance) ÷ (ts − t0)
// over the sends t0 (sorted, all before ts) with ts − t0 at least least, and that span; est is
// 0 when no span is long enough.
func bestAccepted(sends []nanos, ts nanos, least time.Duration) (est float64, span time.Duration) {
	for i, t0 := range sends {
		sp := time.Duration(ts - t0)
		if sp < least {
			break // and so are the later sends' spans
		}
		if e := (float64(len(sends)-i) - burstAllowance) / sp.Seconds(); e > est {
			est, span = e, sp
		}
	}
	return est, span
}
