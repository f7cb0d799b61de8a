package aimd

import (
	"math"
	"time"
)

// latencyCongested takes in the latency of success s and reports whether latency signals
// congestion that a smaller window can relieve.
func (c *Controller) latencyCongested(now time.Time, s *sample) bool {
	if s.lat <= 0 {
		return false
	}
	c.updateBaseline(now, s)
	c.lat.ref.add(s, &c.cfg)
	c.checkLatencyDecrease()
	if c.Window() <= c.cfg.MinWindow {
		return false
	}
	// The median or p90 can only have crossed its threshold if this sample is slow, or if the
	// epoch has just collected enough samples to judge.
	if s.lat <= c.lat.ref.t50 && c.epoch.ok > minSamples {
		return false
	}
	return c.latencySignal()
}

// decreaseWindow is the decrease on a latency signal: the window becomes the concurrency that
// kept latency at baseline, at least one less than now: by Little's law, accepted rate ×
// baseline holding time, or, if more, the highest concurrency at send at which recent
// successes had baseline latency (Little's law lags behind a window that has just grown). The
// rate is left alone: the window is what bounds queueing.
func (c *Controller) decreaseWindow(now time.Time) {
	w := c.Window()
	target := max(c.goodConcurrency(w-1), int(math.Round(c.acceptedRate(now)*c.lat.baseline.Seconds())))
	target = min(max(target, c.cfg.MinWindow), w-1)
	// Patience: back to the same window as last time means the probe above it failed again;
	// probe less often.
	if target == c.win.lastSet {
		c.win.patience = min(2*max(c.win.patience, 1), maxWindowPatience)
	} else {
		c.win.patience = 1
	}
	med := quantile(c.recentLatencies(c.epoch.start, 0), 0.5)
	c.win.check = latencyCheck{pending: true, size: c.win.size, mode: c.win.mode, median: med,
		counts: c.countLatencies(c.epoch.start), from: toNanos(now) + 2*nanos(med)}
	c.shrinkWindow(target)
	c.startEpoch(now)
}

// goodConcurrency returns the concurrency just below the lowest level at which recently sent
// successes were mostly slow (latency above the p90 yardstick), at most top; if no level
// up to top+1 was, the highest level seen (at most top), since every level seen kept most
// requests fast. Concurrency is counted at send, so it reads off the samples the number of our
// requests the host can hold before it queues.
func (c *Controller) goodConcurrency(top int) int {
	thr := c.lat.ref.t90 // known: only a latency signal leads here
	var slow, all [64]int
	for i := 0; i < c.samples.n; i++ {
		if s := c.samples.back(i); s.sig == Success && s.lat > 0 && s.conc < len(all) {
			all[s.conc]++
			if s.lat > thr {
				slow[s.conc]++
			}
		}
	}
	seen := 0
	for level := 1; level <= min(top+1, len(all)-1); level++ {
		if all[level] > 0 && 2*slow[level] > all[level] {
			return min(level-1, top)
		}
		if all[level] > 0 {
			seen = level
		}
	}
	return min(seen, top)
}

// updateBaseline refreshes the baseline latency after a success with a latency. The baseline
// is a low quantile (p10) of the latest SampleWindow latencies (the minimum while there are
// fewer than 10), followed down at once. It follows up only the p10 of requests that were sent
// alone (nothing else of ours in flight), with time constant BaselineForget: latency measured
// under our own load must not become the new normal, or queueing we cause would creep in.
// To save work it looks again only every fourth sample, unless s is faster than the baseline.
func (c *Controller) updateBaseline(now time.Time, s *sample) {
	b := &c.lat
	b.tick++
	if b.src == baselineMeasured && s.lat >= b.baseline && b.tick%4 != 0 {
		return
	}
	defer func() { b.at = now }()
	ds := c.recentLatencies(never, 0)
	if len(ds) == 0 {
		return
	}
	q := 0.10
	if len(ds) < 10 {
		q = 0
	}
	low := quantile(ds, q)
	switch {
	case b.src == baselineRestored && len(ds) >= 10, b.src == baselineUnmeasured, b.src == baselineMeasured && low < b.baseline:
		b.baseline, b.src = low, baselineMeasured
		return
	}
	if alone := c.loneLatencies(); len(alone) >= 10 {
		if p := quantile(alone, 0.10); p > b.baseline {
			f := min(now.Sub(b.at).Seconds()/baselineForget.Seconds(), 1)
			b.baseline += time.Duration(f * float64(p-b.baseline))
		}
	}
}

// recentLatencies returns the latencies of the newest SampleWindow successes sent at or after
// since whose concurrency at send was at least minConc, in c.scratch.
func (c *Controller) recentLatencies(since nanos, minConc int) []time.Duration {
	ds := c.scratch[:0]
	for i := 0; i < c.samples.n && len(ds) < sampleWindow; i++ {
		s := c.samples.back(i)
		if s.done < since {
			break
		}
		if s.sig == Success && s.lat > 0 && s.sent >= since && s.conc >= minConc {
			ds = append(ds, s.lat)
		}
	}
	c.scratch = ds[:0]
	return ds
}

// loneLatencies returns the latencies of the newest SampleWindow successes whose time in flight
// overlapped no other remembered request, in c.scratch.
func (c *Controller) loneLatencies() []time.Duration {
	ds := c.scratch[:0]
	for i := 0; i < c.samples.n && len(ds) < sampleWindow; i++ {
		if s := c.samples.back(i); s.sig == Success && s.lat > 0 && !s.crowded {
			ds = append(ds, s.lat)
		}
	}
	c.scratch = ds[:0]
	return ds
}

// acceptedRate is the success completion rate over the last RateWindow of active time before
// now (stretched to hold at least 8 completions, up to 8 × RateWindow). Gaps between
// completions longer than three times their median, twice the baseline latency and two
// sending intervals (idleness, a pause) count as only that much.
func (c *Controller) acceptedRate(now time.Time) float64 {
	t := toNanos(now)
	from, far := t-nanos(rateWindow), t-nanos(8*rateWindow)
	gaps := c.scratch[:0]
	ok, n, prev := 0, 0, t
	for i := 0; i < c.samples.n; i++ {
		s := c.samples.back(i)
		if s.done <= far || (s.done <= from && n >= 8) {
			break
		}
		gaps = append(gaps, time.Duration(prev-s.done))
		prev = s.done
		n++
		if s.sig == Success {
			ok++
		}
	}
	c.scratch = gaps[:0]
	if n < 2 {
		return float64(ok) / rateWindow.Seconds()
	}
	// gaps[0] is from the newest completion to now; the rest are between completions. n
	// completions span about n inter-completion gaps: the n−1 measured plus one typical one.
	med := quantile(gaps[1:], 0.5) // sorts gaps[1:] in place; only their sum is needed below
	clip := max(3*med, 2*c.lat.baseline, time.Duration(2/c.rate*float64(time.Second)), time.Millisecond)
	active := min(gaps[0], clip) + med
	for _, g := range gaps[1:] {
		active += min(g, clip)
	}
	if active <= 0 {
		return float64(ok) / rateWindow.Seconds()
	}
	return float64(ok) / active.Seconds()
}

// windowMode says what sizes the window.
type windowMode uint8

const (
	windowFollowsRate  windowMode = iota // the window follows the rate, with room to spare
	windowLatencyBound                   // a latency signal set the window: it no longer follows the rate
)

// windowState is the concurrency window and what its latency rules have learned.
type windowState struct {
	size     float64 // fractional, so that additive growth can accumulate
	mode     windowMode
	patience int          // multiplies windowProbe, doubled while latency signals recur at one window
	lastSet  int          // the window a latency signal last set
	check    latencyCheck // the last latency decrease, until it is judged
}

// followRate is the window that follows the rate: twice the requests rate keeps in flight at
// latency typical, so that it never holds back a rate-limited host.
func (w *windowState) followRate(rate float64, typical time.Duration) float64 {
	return math.Ceil(2 * rate * typical.Seconds())
}

// probe is the window after one success that found it full, after slow start: one more per
// probe × patience × window such successes.
func (w *windowState) probe(probe int) float64 {
	step := float64(probe * max(w.patience, 1))
	return w.size + 1/(step*max(w.size, 1))
}

// baselineSource says where the baseline latency came from.
type baselineSource uint8

const (
	baselineUnmeasured baselineSource = iota // no latency seen yet
	baselineRestored                         // restored from State: replaced outright by the first measurement
	baselineMeasured                         // measured on this host
)

// latencyRef is the host's own latency: the baseline (a low quantile, the holding time of
// Little's law) and the reference distribution the latency signal compares with.
type latencyRef struct {
	baseline time.Duration
	src      baselineSource
	at       time.Time // when the baseline was last looked at
	tick     int       // successes seen: the baseline is looked at every fourth
	ref      reference
}
