package aimd

import (
	"math"
	"time"
)

// statedTrust is what the controller makes of the limit the host states.
type statedTrust uint8

const (
	statedNone    statedTrust = iota // nothing stated: the rate is learned
	statedTrusted                    // the rate is set from the stated limit and capped by it
	statedRefuted                    // refused refutations times under it: learned, statements ignored
)

// stated is the limit the host states in its rate-limit headers (Outcome.Stated) and whether
// it is trusted. It is not saved in State: the host states it again on its next answer.
type stated struct {
	trust    statedTrust
	rate     float64 // the stated rate, req/s (before the margin); 0 with statedNone
	refusals int     // refusals under it (one per epoch)
}

// cap is the stated limit's cap on the rate: beta × the stated rate (Config.Beta) while
// trusted, +Inf otherwise.
func (s *stated) cap(beta float64) float64 {
	if s.trust != statedTrusted {
		return math.Inf(1)
	}
	return s.rate * beta
}

// state takes the rate an answer states (0: none). It reports whether the rate must be set
// from it: a first statement, or one that moved by more than statedChange. A refuted limit
// ignores every later statement.
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

// refused counts a refusal (one per epoch) under a trusted limit, and reports whether it
// refuted the limit.
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

// applyStated takes the rate an answer with signal sig states at now: a new statement sets
// the rate at once, just under it, caps the rate there and leaves slow start, as a bucket fit
// does for a measured limit. The rate never rises on a refusal: only a success's statement is
// taken.
func (c *Controller) applyStated(now time.Time, sig Signal, rate float64) {
	if sig != Success || !c.stated.state(rate) {
		return
	}
	c.holdStated(c.stated.cap(beta))
	c.record(now, true)
}

// capRate is the rate's cap: MaxRate, under the robots ceiling and a trusted stated limit.
func (c *Controller) capRate() float64 {
	top := c.cfg.MaxRate
	if c.ceiling > 0 && c.ceiling < top {
		top = c.ceiling
	}
	return min(top, c.stated.cap(beta))
}

// trustedStated is the stated rate while trusted, else 0.
func (c *Controller) trustedStated() float64 {
	if c.stated.trust != statedTrusted {
		return 0
	}
	return c.stated.rate
}
