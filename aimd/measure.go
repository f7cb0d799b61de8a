package aimd

import (
	"math"
	"slices"
	"time"
)

// The measurements the decrease rules read off the remembered requests.

// sendSpacing returns the median spacing of the sends (of remembered requests) just before t,
// over up to 8 gaps within the 2s (or four sending intervals) before t, each in units of the
// interval the allowed rate then called for (1 = sent as fast as allowed); ok is false when
// fewer than 2 sends are known. A median ignores a single long gap such as a Retry-After pause.
func (c *Controller) sendSpacing(t nanos) (spacing float64, ok bool) {
	from := t - nanos(max(2*time.Second, time.Duration(4/c.hist.at(t).rate*float64(time.Second))))
	var buf [24]nanos // ages before t; samples come in completion order, close to send order
	ages := buf[:0]
	for i := 0; i < c.samples.n && len(ages) < len(buf); i++ {
		s := c.samples.back(i)
		if s.done <= from {
			break
		}
		if s.sent > from && s.sent <= t {
			ages = append(ages, t-s.sent)
		}
	}
	if len(ages) < 2 {
		return 0, false
	}
	slices.Sort(ages) // newest send first
	ages = ages[:min(len(ages), 9)]
	var norm [8]float64
	n := 0
	for i := 1; i < len(ages); i++ {
		norm[n] = time.Duration(ages[i]-ages[i-1]).Seconds() * c.hist.at(t-ages[i-1]).rate
		n++
	}
	slices.Sort(norm[:n])
	return norm[(n-1)/2], true
}

// sendingRate estimates the rate the host was receiving at t: the allowed rate then if it was
// in use (sends spaced no more than twice the allowed interval), else the measured send rate
// (held back by the window or by a lack of URLs).
func (c *Controller) sendingRate(t nanos) float64 {
	r := c.hist.at(t).rate
	if sp, ok := c.sendSpacing(t); ok && sp > 2 {
		return r / sp
	}
	return r
}

// rateInUse reports whether the rate was the binding limit when s was sent: the caller did not
// say it had room to spare (DemandSpare), sends were spaced no more than twice the allowed
// interval, and s did not have to wait for a window slot.
func (c *Controller) rateInUse(s *sample) bool {
	if s.demand == DemandSpare || s.conc >= c.hist.at(s.sent).window {
		return false
	}
	sp, ok := c.sendSpacing(s.sent)
	return ok && sp <= 2
}

// singleTokenLimit tests the remembered successes against a one-token server bucket (nginx
// limit_req without burst): if every gap between consecutive successes (by send time) is
// longer than the gap between the refusal sent at ts and the success before it, one token
// explains the host and limit is 1/(the shortest accepted gap), with ok true (docs/aimd.md,
// R4).
func (c *Controller) singleTokenLimit(ts nanos) (limit float64, ok bool) {
	sends := c.fit.successSends(never, ts)
	if len(sends) < 3 {
		return 0, false
	}
	refused := ts - sends[len(sends)-1]
	shortest := nanos(math.MaxInt64)
	for i := 1; i < len(sends); i++ {
		shortest = min(shortest, sends[i]-sends[i-1])
	}
	if shortest <= refused || shortest <= 0 {
		return 0, false
	}
	return float64(time.Second) / float64(shortest), true
}

// lastAcceptedBefore returns the send time of the newest remembered success sent before t, or
// t itself if there is none.
func (c *Controller) lastAcceptedBefore(t nanos) nanos {
	best := never
	for i := 0; i < c.samples.n; i++ {
		s := c.samples.back(i)
		if s.done <= best {
			break // sent no later than done: no older sample can do better
		}
		if s.sig == Success && s.sent < t && s.sent > best {
			best = s.sent
		}
	}
	if best == never {
		return t
	}
	return best
}

// recentAccepted is the success rate over the RateWindow before ts, by send time.
func (c *Controller) recentAccepted(ts nanos) float64 {
	from := ts - nanos(rateWindow)
	ok := 0
	for i := 0; i < c.samples.n; i++ {
		s := c.samples.back(i)
		if s.done < from {
			break
		}
		if s.sent >= from && s.sent < ts && s.sig == Success {
			ok++
		}
	}
	return float64(ok) / rateWindow.Seconds()
}
