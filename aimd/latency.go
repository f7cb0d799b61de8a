package aimd

import (
	"cmp"
	"math"
	"time"
)

// The window and the latency signal (R9): the window follows the rate until successes sent
// with more of ours in flight are mostly slower than the host's own p90 without our load.

type windowMode uint8

const (
	windowFollowsRate  windowMode = iota // the window follows the rate, with room to spare
	windowLatencyBound                   // a latency signal set the window
)

type windowState struct {
	size     float64 // fractional, so that additive growth can accumulate
	mode     windowMode
	patience int // multiplies searchSends, doubled while latency signals recur at one window
	lastSet  int // the window a latency signal last set
}

type baselineSource uint8

const (
	baselineUnmeasured baselineSource = iota
	baselineRestored                  // from State: replaced outright by the first measurement
	baselineMeasured
)

// latencyRef is the host's own latency: the baseline (a low quantile) and the reference, the
// latest `memory` successes sent with nothing else of ours in flight.
type latencyRef struct {
	baseline time.Duration
	src      baselineSource
	at       time.Time // when the baseline was last looked at
	tick     int       // successes seen: the baseline is looked at every fourth
	ref      ring[time.Duration]
	hi, t90  time.Duration // the reference p90 (0 until evidence latencies); the yardstick: restartFactor × hi
}

// latencyCongested takes in success s's latency and, on a latency signal, returns the window to
// set: just below the lowest concurrency at send (2 or more: a request sent alone cannot have
// queued behind ours) at which most successes since the last decrease (at least `recent`) were
// slower than the yardstick, as were most of the 2 × evidence or more at that level and above;
// or accepted rate × baseline if more.
func (c *Controller) latencyCongested(now time.Time, s *sample) (window int, ok bool) {
	if s.lat <= 0 {
		return 0, false
	}
	c.updateBaseline(now, s)
	l := &c.lat
	if s.conc == 1 {
		l.ref.push(s.lat)
		if l.ref.n >= evidence {
			ds := append(c.scratch[:0], l.ref.buf...) // in any order: quantile sorts
			l.hi, c.scratch = quantile(ds, 0.9), ds[:0]
			l.t90 = time.Duration(restartFactor * float64(l.hi))
		}
	}
	w := c.Window()
	if w <= 1 || l.ref.n < evidence || c.epoch.ok < recent || s.lat <= l.t90 {
		return 0, false // a signal needs a new slow success
	}
	var slow, all [64]int
	for i := 0; i < c.samples.n; i++ {
		if j := c.samples.back(i); j.done < c.epoch.start {
			break
		} else if j.sig == Success && j.lat > 0 && j.sent >= c.epoch.start && j.conc < len(all) {
			all[j.conc]++
			if j.lat > l.t90 {
				slow[j.conc]++
			}
		}
	}
	lowest, upAll, upSlow := 0, 0, 0 // the counts at this level and above
	for level := len(all) - 1; level >= 2; level-- {
		upAll, upSlow = upAll+all[level], upSlow+slow[level]
		if level <= w && 2*slow[level] > all[level] && upAll >= 2*evidence && 2*upSlow > upAll {
			lowest = level
		}
	}
	if lowest == 0 {
		return 0, false
	}
	good := max(lowest-1, int(math.Round(c.acceptedRate(now)*l.baseline.Seconds())))
	return min(good, w-1), true
}

// decreaseWindow sets the window to target on a latency signal; patience doubles while signals
// recur at one window (up to maxStretch).
func (c *Controller) decreaseWindow(now time.Time, target int) {
	if target == c.win.lastSet { // the probe above it failed again: probe less often
		c.win.patience = min(2*max(c.win.patience, 1), maxStretch)
	} else {
		c.win.patience = 1
	}
	c.shrinkWindow(target)
	c.startEpoch(now)
}

// updateBaseline refreshes the baseline: the p10 of the newest `recent` latencies (their least
// while fewer than 10), followed down at once and up only by the p10 of requests sent alone,
// with time constant probeTime, so that queueing we cause never becomes the norm.
func (c *Controller) updateBaseline(now time.Time, s *sample) {
	b := &c.lat
	if b.tick++; b.src == baselineMeasured && s.lat >= b.baseline && b.tick%4 != 0 {
		return
	}
	ds := c.latencies(false) // s among them
	if low := quantile(ds, 0.10); b.src == baselineRestored && len(ds) >= 10 || b.src == baselineUnmeasured || b.src == baselineMeasured && low < b.baseline {
		b.baseline, b.src = low, baselineMeasured
	} else if alone := c.latencies(true); len(alone) >= 10 {
		if p := quantile(alone, 0.10); p > b.baseline {
			f := min(now.Sub(b.at).Seconds()/probeTime.Seconds(), 1)
			b.baseline += time.Duration(f * float64(p-b.baseline))
		}
	}
	b.at = now
}

// latencies returns, in c.scratch, the latencies of the newest `recent` successes (alone:
// only those whose time in flight overlapped no other request).
func (c *Controller) latencies(alone bool) []time.Duration {
	ds := c.scratch[:0]
	for i := 0; i < c.samples.n && len(ds) < recent; i++ {
		if s := c.samples.back(i); s.sig == Success && s.lat > 0 && !(alone && s.crowded) {
			ds = append(ds, s.lat)
		}
	}
	c.scratch = ds[:0]
	return ds
}

// acceptedRate is the success completion rate over the last rateWindow before now (stretched to
// 8 completions, up to 8 × rateWindow), idle gaps counted as at most a typical one.
func (c *Controller) acceptedRate(now time.Time) float64 {
	t := toNanos(now)
	from, far := t-nanos(rateWindow), t-nanos(8*rateWindow)
	gaps := c.scratch[:0]
	ok, prev := 0, t
	for i := 0; i < c.samples.n; i++ {
		s := c.samples.back(i)
		if s.done <= far || (s.done <= from && len(gaps) >= 8) {
			break
		}
		gaps, prev = append(gaps, time.Duration(prev-s.done)), s.done
		if s.sig == Success {
			ok++
		}
	}
	c.scratch = gaps[:0]
	var active time.Duration // stays 0 with fewer than 2 completions or none apart: rateWindow
	if len(gaps) >= 2 {
		med := quantile(gaps[1:], 0.5)
		clip := max(3*med, 2*c.lat.baseline, time.Duration(2/c.rate*float64(time.Second)), time.Millisecond)
		active = min(gaps[0], clip) + med
		for _, g := range gaps[1:] {
			active += min(g, clip)
		}
	}
	return float64(ok) / cmp.Or(active, rateWindow).Seconds()
}

// typicalSlow is the reference p90 once known (at least the baseline), else the baseline.
func (c *Controller) typicalSlow() time.Duration { return max(c.lat.hi, c.lat.baseline) }
