package aimd

import (
	"math"
	"math/bits"
)

// failureLog is the recent Failures and the host's background share of them (R8), learned only
// from outcomes sent at no more than minBeta × the first Failure cut's rate after slow start.
type failureLog struct {
	bits, held uint16  // the last 16 non-Neutral outcomes, newest in bit 0: a Failure; sent under the cut
	fresh      int     // of those 16, outcomes after the last decrease
	base       float64 // the Failures' share among held outcomes older than those 16
	older      int     // outcomes base has seen (up to memory)

	cut  optional[float64] // the rate the first Failure cut after slow start was made at
	undo failureUndo       // the cuts made before base was known
}

func (f *failureLog) heldAt(rate float64) bool {
	cut, ok := f.cut.get()
	return ok && rate <= minBeta*cut
}

// add shifts in one outcome; the one leaving the 16 (none before 16) joins the share if held.
func (f *failureLog) add(failed, held bool) {
	f.fresh = min(f.fresh+1, 16)
	if f.held&(1<<15) != 0 {
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

func (f *failureLog) known() bool { return f.older >= recent }

func (f *failureLog) count() int { return bits.OnesCount16(f.bits) }

// signal reports a cluster: `evidence` of the last 8 outcomes failed and need() of the last 16,
// counting only outcomes since the last decrease outside a refusal run (R1).
func (f *failureLog) signal(run bool) bool {
	recent := f.bits
	if !run {
		recent &= uint16(1)<<f.fresh - 1
	}
	return bits.OnesCount8(uint8(recent)) >= evidence && float64(bits.OnesCount16(recent)) >= f.need()
}

// need is the Failures among 16 the share does not explain (0 while unknown).
func (f *failureLog) need() float64 {
	if !f.known() {
		return 0
	}
	b := min(f.base, failureBaseMax)
	return 16*b + 4*math.Sqrt(16*b*(1-b)) + 1
}

// failureUndo is the Failure cuts made before the share was known, judged once when it is.
type failureUndo struct {
	rate    float64 // the rate before the first of them; 0: none pending
	plateau float64 // the plateau before it
	slow    bool    // the first of them ended slow start
	n       int     // the most Failures among 16 any of them was made on
}

// note records a Failure cut about to be made on c, on n Failures among the last 16.
func (u *failureUndo) note(c *Controller, n int) {
	if u.rate == 0 {
		u.rate, u.plateau, u.slow = c.rate, c.curve.plateau, c.inSlowStart()
	}
	u.n = max(u.n, n)
}

// servedPeak is the highest success rate (over the rateWindow, by send time) the host answered
// within the last returnTime: a rate it has just shown it takes (R8).
type servedPeak struct {
	rate float64
	at   nanos // the send time of the success it was measured at
}

// note takes the success rate measured at a success sent at ts: the peak if at least as high,
// or if the peak is older than returnTime.
func (p *servedPeak) note(ts nanos, rate float64) {
	if rate >= p.rate || ts-p.at > nanos(returnTime) {
		p.rate, p.at = rate, ts
	}
}

// covers reports whether a Failure sent at ts while the host received rs req/s came at no more
// than minBeta × a peak measured within returnTime before it: slowing down cannot relieve it.
func (p *servedPeak) covers(ts nanos, rs float64) bool {
	return p.rate > 0 && ts-p.at <= nanos(returnTime) && rs <= minBeta*p.rate
}
