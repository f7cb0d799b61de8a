package aimd

import (
	"slices"
	"time"
)

// episode is a refusal episode (R7): a run of refusals with no success between them, and the
// runs that follow within the longest run seen (about a window's period). A run's halvings are
// a backoff and measure nothing; at its end runEnd measures what the host accepted.
type episode struct {
	run     int     // refusals in the current run; 0: none since the last success
	resumed bool    // the run resumed the episode: it ends at its first success even if one long
	from    nanos   // the epoch the episode's first refusal ended began here
	rate    float64 // the rate the episode's first refusal set
	refused float64 // the rate that drew it
	start   nanos   // when its refused request was sent
	last    nanos   // when the latest run's first refused request was sent
	settled bool    // no search follows the episode

	leastResumed optional[float64] // the least rate a resumed run was refused at
	firstEnd     optional[nanos]   // when the episode's first run ended
	lastEnd      optional[nanos]   // when the last run ended, this episode's or an earlier one's
	blockLen     nanos             // the longest run seen, first refusal to first success
}

// endsRun reports whether a success now ends a run runEnd must judge: two refusals or more,
// or a resumed run.
func (e *episode) endsRun() bool { return e.run > 1 || (e.run == 1 && e.resumed) }

// refusedAt records a refusal sent at ts, drawn at rs, that set newRate: it repeats the run,
// resumes the episode (sooner after the last run's end than the longest run), or opens one.
func (e *episode) refusedAt(ts, epochStart nanos, rs, newRate float64, repeat, searchDone bool) {
	end, ended := e.lastEnd.get()
	switch {
	case repeat:
		e.run++
	case ended && ts-end < e.blockLen:
		e.run, e.last, e.settled, e.resumed = 1, ts, e.settled || searchDone, true
		if least, ok := e.leastResumed.get(); !ok || rs < least {
			e.leastResumed.set(rs)
		}
	default:
		*e = episode{run: 1, from: epochStart, rate: newRate, refused: rs, start: ts, last: ts,
			settled: searchDone, lastEnd: e.lastEnd, blockLen: e.blockLen}
	}
}

// boundKind is a bound while below the rate that drew the run, that rate itself once there.
func (e *episode) boundKind(r float64) targetKind {
	if r < e.refused {
		return targetBound
	}
	return targetRefused
}

type runEnding uint8

const (
	runKept      runEnding = iota // nothing measured above the rate
	runRestarted                  // the episode accepted almost nothing: slow start again (R3)
	runReturned                   // the rate returns to what the host accepted (R7)
)

// runVerdict is what a run's end measured, for endRun to apply.
type runVerdict struct {
	kind   runEnding
	rate   float64
	target target
}

// runEnd measures a run at its first success s. A run shorter than minSpan with no longer one
// before it is a bucket's excess and is kept; an episode with fewer than `evidence` successes
// restarts slow start. It updates the episode's record of run ends, never the rate.
func (c *Controller) runEnd(s *sample) runVerdict {
	e := &c.ep
	sends := c.sends.successSends(e.from, s.sent+1)
	if len(sends) < evidence {
		return runVerdict{kind: runRestarted}
	}
	block := max(e.blockLen, s.sent-e.last)
	if block < nanos(minSpan) {
		return runVerdict{kind: runKept}
	}
	// beta × the best accepted over the episode, or before the run over the run's length; for a
	// resumed run at most what was accepted since the first run ended; at most the rate the
	// first refusal set and beta × the least rate a resumed run was refused at.
	before, _ := slices.BinarySearch(sends, e.start) // the sends before the run
	full := bestAccepted(sends[:before], e.start, time.Duration(block))
	est := max(bestAccepted(sends, s.sent+1, minSpan), full)
	if first, ok := e.firstEnd.get(); e.resumed && ok {
		if since := bestAccepted(c.sends.successSends(first, s.sent+1), s.sent+1, time.Duration(block)); since > 0 {
			est = min(est, since)
		}
	}
	r := min(beta*est, e.rate)
	if least, ok := e.leastResumed.get(); ok {
		r = min(r, beta*least)
	}
	if r = c.clampRate(r); r <= c.rate {
		return runVerdict{kind: runKept}
	}
	e.lastEnd.set(s.sent)
	if e.blockLen = block; !e.firstEnd.ok {
		e.firstEnd.set(s.sent)
	}
	// Search toward the rate that drew the run, no further than twice r or the best accepted
	// before the run over half its length.
	held := bestAccepted(sends[:before], e.start, time.Duration(e.blockLen/2))
	v := runVerdict{kind: runReturned, rate: r}
	if h := min(e.refused, max(2*r, held)); h > r && !e.settled {
		v.target.set(h, e.boundKind(h))
	}
	return v
}

// bestAccepted is the largest (successes sent from t0 to ts, less burstAllowance) ÷ (ts − t0)
// over the sorted sends t0 with ts − t0 at least least (0: none so long).
func bestAccepted(sends []nanos, ts nanos, least time.Duration) (est float64) {
	for i, t0 := range sends {
		sp := time.Duration(ts - t0)
		if sp < least {
			break
		}
		est = max(est, (float64(len(sends)-i)-burstAllowance)/sp.Seconds())
	}
	return est
}
