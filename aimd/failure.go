package aimd

import (
	"math"
	"math/bits"
)

// failureLog is a host's recent Failures and its background share of them:
// what tells a cluster that slowing down can relieve from the share a host fails at any rate.
// Only outcomes sent at no more than failureBaseUnder × cut, the rate the first cut on them
// after slow start was made at, teach the share (docs/aimd.md, R9).
type failureLog struct {
	bits  uint16  // the last 16 Success/Overload/Failure outcomes, newest in bit 0: 1 = Failure
	held  uint16  // the same outcomes: 1 = sent well under the rate the first cluster was cut at
	n     int     // how many outcomes bits holds (up to 16)
	fresh int     // how many of them came after the last decrease (up to 16)
	base  float64 // the Failures' share among held outcomes older than those 16
	older int     // how many such outcomes base has seen (up to memory)

	cut  optional[float64] // the rate the first cut on these failures after slow start was made at
	undo failureUndo       // the cuts on them made before base was known
}

// heldAt reports whether an outcome sent at rate may teach the background share: it was sent
// at no more than failureBaseUnder × cut.
func (f *failureLog) heldAt(rate float64) bool {
	cut, ok := f.cut.get()
	return ok && rate <= failureBaseUnder*cut
}

// add shifts in one Success, Overload or Failure outcome (failed: a Failure; held: it may teach
// the background share), and moves the one that leaves the 16 into the share if it was held.
func (f *failureLog) add(failed, held bool) {
	f.fresh = min(f.fresh+1, 16)
	if f.n < 16 {
		f.n++
	} else if f.held&(1<<15) != 0 {
		f.older = min(f.older+1, memory)
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
		f.base, f.older = base, min(older, memory)
	}
	f.cut = optional[float64]{}
	if r := validRate(cut); r > 0 {
		f.cut.set(r)
	}
}

// known reports whether the background share is known.
func (f *failureLog) known() bool { return f.older >= failureBaseMin }

// count is the number of Failures among the last 16 outcomes.
func (f *failureLog) count() int { return bits.OnesCount16(f.bits) }

// signal reports whether the recent Failures are the host's congestion: at least
// failureCluster of the last 8 outcomes failed and, once the background share b is known, at
// least need() of the last 16. Only outcomes after the last decrease count, except in a refusal
// run (run), where every outcome does (docs/aimd.md, R1, R9).
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
// to be judged when it is (judge).
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
		u.rate, u.plateau, u.slow = c.rate, c.curve.plateau, c.inSlowStart()
	}
	u.n = max(u.n, n)
}

// judge runs once, when a background share becomes known, on the cuts u holds, and empties
// u: ok says the share explains all of them (each was made on fewer failures among 16 than
// need), so that undoCuts may return the rate and plateau to v, what they were before the
// first. Cuts the share does not explain stand.
func (u *failureUndo) judge(need float64) (v failureUndo, ok bool) {
	v, *u = *u, failureUndo{}
	return v, float64(v.n) < need
}
