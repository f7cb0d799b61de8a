package aimd

import (
	"math"
	"time"
)

// statedTrust is what the controller makes of the limit the host states (R11).
type statedTrust uint8

const (
	statedNone    statedTrust = iota // nothing stated: the rate is learned
	statedTrusted                    // the rate is set just under the stated limit and capped there
	statedRefuted                    // refused refutations times under it: statements are ignored
)

// stated is the limit the host states (Outcome.Stated). It is not saved: the host states it
// again on its next answer.
type stated struct {
	trust    statedTrust
	rate     float64 // the stated rate, req/s
	refusals int     // refusals under it (one per epoch)
}

// cap is beta × the stated rate while trusted, else +Inf.
func (s *stated) cap() float64 {
	if s.trust != statedTrusted {
		return math.Inf(1)
	}
	return s.rate * beta
}

// state takes a stated rate (0: none) and reports whether the rate must be set from it: a
// first statement, or one that moved by more than statedChange.
func (s *stated) state(rate float64) bool {
	if !(rate > 0) || math.IsInf(rate, 0) || s.trust == statedRefuted {
		return false
	}
	if s.trust == statedTrusted && math.Abs(rate-s.rate) <= statedChange*s.rate {
		return false
	}
	s.trust, s.rate = statedTrusted, rate
	return true
}

// refused counts a refusal under a trusted limit and reports whether it refuted it.
func (s *stated) refused() bool {
	if s.trust != statedTrusted {
		return false
	}
	s.refusals++
	if s.refusals < refutations {
		return false
	}
	s.trust = statedRefuted
	return true
}

// applyStated takes the rate a success's answer states: a new statement sets the rate at once.
// Only a success's statement is taken: the rate never rises on a refusal.
func (c *Controller) applyStated(now time.Time, sig Signal, rate float64) {
	if sig != Success || !c.stated.state(rate) {
		return
	}
	c.holdStated(c.stated.cap())
	c.record(now, true)
}

// capRate is MaxRate, under the robots ceiling and a trusted stated limit.
func (c *Controller) capRate() float64 {
	top := c.cfg.MaxRate
	if c.ceiling > 0 && c.ceiling < top {
		top = c.ceiling
	}
	return min(top, c.stated.cap())
}

func (c *Controller) trustedStated() float64 {
	if c.stated.trust != statedTrusted {
		return 0
	}
	return c.stated.rate
}
