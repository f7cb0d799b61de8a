package aimd

import (
	"math"
	"math/bits"
)

const (
	// failureCluster: a Failure is a congestion signal only when at least this many of the host's
	// last 8 outcomes (Success, Overload or Failure, in order of arrival; itself included) are
	// Failures. An isolated one is a fault of its page (a broken endpoint that always answers
	// 502, a page too slow to finish before the timeout), and a site with a few of them would
	// otherwise be cut at every one: 30 such pages among 600 held an unlimited host near the
	// 0.1 req/s floor. Overload is the host's explicit word and always counts.
	failureCluster = 3

	// failureBaseMin, failureBaseSpan, failureBaseMax: a host's background failure share (the
	// Failures among its outcomes older than the last 16, counting only those sent well under
	// the rate its first cluster of Failures was cut at: see failureLog) is known once
	// failureBaseMin such outcomes have been seen, and follows about the latest failureBaseSpan
	// of them. It counts up to failureBaseMax: a host failing half its requests, or all of
	// them, is in trouble whatever it did before.
	failureBaseMin  = 32
	failureBaseSpan = 128
	failureBaseMax  = 0.25

	// failureBaseUnder: see failureLog.
	failureBaseUnder = 0.6

	// overloadBaseMin, overloadBaseLeast: the background share of bare refusals (see
	// Controller.overloadNeed) is learned as the Failures' is, from outcomes sent well under the
	// rate the first bare refusal after slow start was cut at (outside refusal runs, which
	// refuse whatever is sent), but it is known only after overloadBaseMin of them and used
	// only from overloadBaseLeast up: one or two refusals while a limit is relearned (after
	// it fell) must not teach a share that hides the next ones.
	overloadBaseMin   = 64
	overloadBaseLeast = 0.05

	// overloadExcess: a bare refusal after slow start with at least this many bare refusals
	// among the last 16 outcomes (itself included) is a limiter's excess, not a background
	// share (see failureLog.excess).
	overloadExcess = 5
)

// failureLog is a host's recent Failures and its background share of them: what tells a
// cluster of Failures that slowing down can relieve from the share a host fails at any rate
// (a flaky backend, one bad node behind a balancer), which slowing down does not make go away.
// Only outcomes sent at no more than failureBaseUnder × the rate the first Failure cluster
// after slow start was cut at (cut) teach the share: well under the rate where
// the host first failed in a cluster, a host whose failures are load fails no more (a proxy
// answering 502 for what its backend cannot take), so they cannot teach it to tolerate them;
// a host whose failures are its own keeps failing there. Learning from every outcome, or from
// those at the plateau, let a host that fails its excess over 20 req/s teach a share that
// tolerated more of the excess, and so on: 29 req/s with 30% of requests failing. The first
// cluster's rate, not the least: the least followed the rate down as cuts lowered it, so the
// share was never learned (a 20 req/s host failing a tenth of its requests at random was cut
// to 2.6 req/s and stayed there).
type failureLog struct {
	bits  uint16  // the last 16 Success/Overload/Failure outcomes, newest in bit 0: 1 = Failure
	held  uint16  // the same outcomes: 1 = sent well under the rate the first cluster was cut at
	n     int     // how many outcomes bits holds (up to 16)
	fresh int     // how many of them came after the last decrease (up to 16)
	base  float64 // the Failures' share among held outcomes older than those 16
	older int     // how many such outcomes base has seen (up to failureBaseSpan)

	cut  float64     // the rate the first cut on these failures after slow start was made at; 0: none
	undo failureUndo // the cuts on them made before base was known (or, for refusals, usable)
}

// heldAt reports whether an outcome sent at rate may teach the background share: it was sent
// at no more than failureBaseUnder × cut.
func (f *failureLog) heldAt(rate float64) bool {
	return f.cut > 0 && rate <= failureBaseUnder*f.cut
}

// add shifts in one Success, Overload or Failure outcome (failed: a Failure; held: it may teach
// the background share), and moves the one that leaves the 16 into the share if it was held.
func (f *failureLog) add(failed, held bool) {
	f.fresh = min(f.fresh+1, 16)
	if f.n < 16 {
		f.n++
	} else if f.held&(1<<15) != 0 {
		f.older = min(f.older+1, failureBaseSpan)
		f.base += (float64(f.bits>>15) - f.base) / float64(f.older)
	}
	f.bits, f.held = f.bits<<1, f.held<<1
	if failed {
		f.bits |= 1
	}
	if held {
		f.held |= 1
	}
}

// restore sets the background share and cut rate learned in an earlier run (State), those of
// them that are valid.
func (f *failureLog) restore(base float64, older int, cut float64) {
	if base >= 0 && base <= 1 && older > 0 {
		f.base, f.older = base, min(older, failureBaseSpan)
	}
	f.cut = validRate(cut)
}

// excess reports whether a bare refusal drawn at rate rs (after slow start, outside a refusal
// run) is the excess a limiter refuses, and if so lowers the rate the share is learned under.
//
// The share is learned under failureBaseUnder × the rate the first bare refusal after slow
// start was cut at, which is safe only if that rate was less than about 1/failureBaseUnder ×
// the limit. A bucket with a big burst hides its limit from slow start and from the climb
// after it, so that first cut can come at several times the limit, and the refusals under
// 0.6 × it were the limiter's own excess: a 10 req/s bucket of 20 tokens taught a share of 14%
// at 16–21 req/s, which then let the controller send 29 req/s, more than half of it refused.
// A random share refuses a few of 16 outcomes; a limiter ridden well above its rate refuses
// (rs − L)/rs of them. So at overloadExcess or more (31%), the host accepted about
// rs × (the share of the 16 it did not refuse), and the share is learned under that from now
// on (forgetting what it learned above it), so only rates a limiter would accept teach it.
// The refusals of the last 16 may include slow start's burst (funded by the bucket's tokens,
// which inflates the estimate); each later excess refusal can lower it again.
func (f *failureLog) excess(rs float64) bool {
	n := f.count()
	if n < overloadExcess || f.n == 0 {
		return false
	}
	if r := rs * float64(f.n-n) / float64(f.n); r < f.cut {
		f.cut, f.base, f.older, f.held = r, 0, 0, 0
	}
	f.undo = failureUndo{}
	return true
}

// known reports whether the background share is known.
func (f *failureLog) known() bool { return f.older >= failureBaseMin }

// count is the number of Failures among the last 16 outcomes.
func (f *failureLog) count() int { return bits.OnesCount16(f.bits) }

// signal reports whether the recent Failures are the host's congestion, not its pages' nor
// its background: at least failureCluster of the last 8 outcomes failed, and, once the
// background share b is known, more of the last 16 than b explains: at least 16b, plus four
// standard deviations of that count, plus one (at b = 0.1, 8 of 16, which independent
// failures reach about once in 9,000 outcomes, and the test runs at every outcome; at b = 0
// it adds nothing; at most 12 of 16).
//
// Only outcomes that came after the last decrease count, as in TCP: the Failures before it
// were answered by it, and counting them again took a cluster's three Failures for the next
// cluster's first, halving the rate at each Failure that followed (a host failing a third of
// its requests at random went from 29 req/s to 0.6 in 4 seconds). In a refusal run (run: no
// success since the last decrease) every outcome counts, so a host failing everything backs
// off at every Failure.
func (f *failureLog) signal(run bool) bool {
	if bits.OnesCount8(uint8(f.recent(run))) < failureCluster {
		return false
	}
	return f.reaches(run, f.need())
}

// recent is bits, less the outcomes from before the last decrease unless in a refusal run.
func (f *failureLog) recent(run bool) uint16 {
	if run {
		return f.bits
	}
	return f.bits & (uint16(1)<<f.fresh - 1)
}

// reaches reports whether the recent outcomes (see recent) hold at least need failures.
func (f *failureLog) reaches(run bool, need float64) bool {
	return float64(bits.OnesCount16(f.recent(run))) >= need
}

// need is the number of Failures among the last 16 outcomes that the background share does not
// explain (see signal); 0 while that share is unknown.
func (f *failureLog) need() float64 {
	if !f.known() {
		return 0
	}
	b := min(f.base, failureBaseMax)
	return 16*b + 4*math.Sqrt(16*b*(1-b)) + 1
}

// failureUndo holds the Failure cuts made before the host's background failure share was known,
// to be judged when it is (rejudge).
type failureUndo struct {
	rate    float64 // the rate before the first of them; 0 while none is pending (see pending)
	plateau float64 // the plateau before it
	slow    bool    // the first of them ended slow start
	n       int     // the most Failures among the last 16 outcomes any of them was made on
}

// pending reports whether u holds cuts to judge.
func (u *failureUndo) pending() bool { return u.rate > 0 }

// note records a Failure cut about to be made on c, on n Failures among the last 16 outcomes.
func (u *failureUndo) note(c *Controller, n int) {
	if u.rate == 0 {
		u.rate, u.plateau, u.slow = c.rate, c.curve.plateau, c.curve.slowStart
	}
	u.n = max(u.n, n)
}

// rejudge runs once, when a background share becomes known, on the cuts u holds, made before
// it was: if that share explains all of them (each was made on fewer failures among 16 than
// need now asks), they are undone: the rate and plateau return to what they were before the
// first, and slow start resumes if that cut ended it. A host that fails a third of its
// requests at any rate would otherwise keep the cuts its first few dozen answers drew, at a
// rate too low to learn anything soon. Cuts the share does not explain stand.
func (c *Controller) rejudge(u *failureUndo, need float64) {
	if float64(u.n) < need {
		c.rate = max(c.rate, c.clampRate(u.rate))
		c.curve.restart(c.rate, max(c.curve.plateau, u.plateau))
		c.target.clear()
		c.curve.slowStart = c.curve.slowStart || u.slow
	}
	*u = failureUndo{}
}

// overloadNeed is the number of bare refusals among the recent outcomes (failureLog.recent)
// that makes one a congestion signal: 1, every one, unless the host's background share of
// them is known (overloadBaseMin held outcomes) and at least overloadBaseLeast; then what that
// share does not explain (failureLog.need).
//
// A refusal is the host's word, and a limiter's stop well under the rate it first refused at
// (its 503s or 429s are the excess over its limit), so they teach no share and every one
// counts, as before the share existed. A host that answers a share of its requests 503 at
// random (a proxy with no live upstream now and then) keeps doing so at any rate: taken at
// its word, 5% of random 503s held an unlimited host under 1 req/s.
func (c *Controller) overloadNeed() float64 {
	if f := &c.overs; f.older >= overloadBaseMin && f.base >= overloadBaseLeast {
		return f.need()
	}
	return 1
}
