package aimd

import (
	"math"
	"slices"
	"time"
)

// The window and the latency signal (R10). The window follows the rate until latency that our
// own concurrency explains binds it: more recent successes slower than a yardstick (latencyFactor
// × the reference median or p90, and latencyMinExcess more) than the host's own distribution
// without our load (the reference) explains, by refZ deviations.

type windowMode uint8

const (
	windowFollowsRate  windowMode = iota // the window follows the rate, with room to spare
	windowLatencyBound                   // a latency signal set the window
)

type windowState struct {
	size     float64 // fractional, so that additive growth can accumulate
	mode     windowMode
	patience int          // multiplies windowProbe, doubled while latency signals recur at one window
	lastSet  int          // the window a latency signal last set
	check    latencyCheck // the last latency decrease, until it is judged
}

// followRate is twice the requests rate keeps in flight at latency typical.
func (w *windowState) followRate(rate float64, typical time.Duration) float64 {
	return math.Ceil(2 * rate * typical.Seconds())
}

// probe is the window after a success that found it full: one more per probe × patience ×
// window such successes.
func (w *windowState) probe(probe int) float64 {
	step := float64(probe * max(w.patience, 1))
	return w.size + 1/(step*max(w.size, 1))
}

type baselineSource uint8

const (
	baselineUnmeasured baselineSource = iota
	baselineRestored                  // from State: replaced outright by the first measurement
	baselineMeasured
)

// latencyRef is the host's own latency: the baseline (a low quantile) and the reference.
type latencyRef struct {
	baseline time.Duration
	src      baselineSource
	at       time.Time // when the baseline was last looked at
	tick     int       // successes seen: the baseline is looked at every fourth
	ref      reference
}

// latencyCongested takes in success s's latency and reports a latency signal.
func (c *Controller) latencyCongested(now time.Time, s *sample) bool {
	if s.lat <= 0 {
		return false
	}
	c.updateBaseline(now, s)
	c.lat.ref.add(s)
	c.checkLatencyDecrease()
	if c.Window() <= 1 {
		return false
	}
	if s.lat <= c.lat.ref.t50 && c.epoch.ok > minSamples {
		return false // no threshold can have been crossed
	}
	return c.latencySignal()
}

// decreaseWindow sets the window to the concurrency that kept latency at baseline, at least
// one under now: the larger of the concurrency that stayed fast and accepted rate × baseline.
func (c *Controller) decreaseWindow(now time.Time) {
	w := c.Window()
	target := max(c.goodConcurrency(w-1), int(math.Round(c.acceptedRate(now)*c.lat.baseline.Seconds())))
	target = min(max(target, 1), w-1)
	if target == c.win.lastSet { // the probe above it failed again: probe less often
		c.win.patience = min(2*max(c.win.patience, 1), maxWindowPatience)
	} else {
		c.win.patience = 1
	}
	med := quantile(c.latencies(c.epoch.start, false), 0.5)
	c.win.check = latencyCheck{pending: true, size: c.win.size, mode: c.win.mode, median: med,
		counts: c.countLatencies(c.epoch.start), from: toNanos(now) + 2*nanos(med)}
	c.shrinkWindow(target)
	c.startEpoch(now)
}

// goodConcurrency is the concurrency at send just below the lowest at which recent successes
// were mostly slower than the p90 yardstick, else the highest seen; at most top.
func (c *Controller) goodConcurrency(top int) int {
	thr := c.lat.ref.t90
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

// updateBaseline refreshes the baseline: the p10 of the latest sampleWindow latencies (their
// least while fewer than 10), followed down at once and up only by the p10 of requests sent
// alone, with time constant baselineForget, so that queueing we cause never becomes the norm.
func (c *Controller) updateBaseline(now time.Time, s *sample) {
	b := &c.lat
	b.tick++
	if b.src == baselineMeasured && s.lat >= b.baseline && b.tick%4 != 0 {
		return
	}
	defer func() { b.at = now }()
	ds := c.latencies(never, false)
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
	if alone := c.latencies(never, true); len(alone) >= 10 {
		if p := quantile(alone, 0.10); p > b.baseline {
			f := min(now.Sub(b.at).Seconds()/baselineForget.Seconds(), 1)
			b.baseline += time.Duration(f * float64(p-b.baseline))
		}
	}
}

// latencies returns, in c.scratch, the latencies of the newest sampleWindow successes sent at
// or after since (alone: only those whose time in flight overlapped no other request).
func (c *Controller) latencies(since nanos, alone bool) []time.Duration {
	ds := c.scratch[:0]
	for i := 0; i < c.samples.n && len(ds) < sampleWindow; i++ {
		s := c.samples.back(i)
		if s.done < since {
			break
		}
		if s.sig == Success && s.lat > 0 && s.sent >= since && !(alone && s.crowded) {
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
	med := quantile(gaps[1:], 0.5)
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

// reference is the host's latency without our load: the latest refSize successes sent with
// nothing else of ours in flight, and the yardsticks derived from them.
type reference struct {
	lat      ring[time.Duration]
	sort     []time.Duration // scratch
	t50, t90 time.Duration   // yardsticks: latencyFactor × the median, × the p90
	p50, p90 float64         // upper bounds on the shares of the host's latencies above them
	hi       time.Duration   // the reference p90
}

func newReference() reference { return reference{lat: newRing[time.Duration](refSize)} }

func (r *reference) add(s *sample) {
	if s.lat <= 0 || s.conc != 1 {
		return
	}
	r.lat.push(s.lat)
	r.update()
}

// update recomputes the yardsticks, with shares bounded above at 99% (log-normal fit: the
// mean's bound from Student's t, the spread's from chi-square).
func (r *reference) update() {
	if r.lat.n < refMin {
		return
	}
	ds := r.sort[:0]
	var sum, sum2 float64
	for i := 0; i < r.lat.n; i++ {
		d := *r.lat.get(i)
		ds = append(ds, d)
		l := math.Log(d.Seconds())
		sum, sum2 = sum+l, sum2+l*l
	}
	slices.Sort(ds)
	r.sort = ds[:0]
	m := float64(len(ds))
	mu := sum / m
	sd := math.Sqrt(max(sum2/m-mu*mu, 0) * m / (m - 1))
	const z = 2.326 // the normal 99%; Cornish–Fisher for t, Wilson–Hilferty for chi-square
	k := m - 1
	student := z + (z*z*z+z)/(4*k) + (5*z*z*z*z*z+16*z*z*z+3*z)/(96*k*k)
	chi := k * math.Pow(1-2/(9*k)-z*math.Sqrt(2/(9*k)), 3)
	sdUp := sd * math.Sqrt(k/max(chi, 1e-9))
	muUp := mu + student*sd/math.Sqrt(m)
	share := func(above time.Duration) float64 {
		i, _ := slices.BinarySearch(ds, above+1)
		emp := float64(len(ds)-i+1) / (m + 2)
		if sdUp <= 0 {
			return emp
		}
		return max(emp, 0.5*math.Erfc((math.Log(above.Seconds())-muUp)/(sdUp*math.Sqrt2)))
	}
	yard := func(q time.Duration) time.Duration {
		return max(time.Duration(latencyFactor*float64(q)), q+latencyMinExcess)
	}
	r.hi = quantile(ds, 0.9)
	r.t50, r.t90 = yard(quantile(ds, 0.5)), yard(r.hi)
	r.p50, r.p90 = share(r.t50), share(r.t90)
}

// surprising reports whether k of n above a yardstick the host puts a share p0 above is at
// least two and more than refZ deviations (and a half) above the binomial mean.
func surprising(k, n int, p0 float64) bool {
	mean := float64(n) * p0
	return k >= 2 && float64(k) > mean+refZ*math.Sqrt(mean*(1-p0))+0.5
}

// typicalSlow is the reference p90 once known (at least the baseline), else the baseline.
func (c *Controller) typicalSlow() time.Duration {
	if c.lat.ref.lat.n >= refMin {
		return max(c.lat.ref.hi, c.lat.baseline)
	}
	return c.lat.baseline
}

// latencyCounts are the latest successes (up to sampleWindow) sent since an instant, counted
// against the yardsticks.
type latencyCounts struct {
	n       int
	slow    int // above the p90 yardstick
	crowded int // of those, sent while another of ours was in flight
	above50 int // above the median yardstick
}

func (c *Controller) countLatencies(since nanos) latencyCounts {
	r := &c.lat.ref
	var k latencyCounts
	for i := 0; i < c.samples.n && k.n < sampleWindow; i++ {
		s := c.samples.back(i)
		if s.done < since {
			break
		}
		if s.sig != Success || s.lat <= 0 || s.sent < since {
			continue
		}
		k.n++
		if s.lat > r.t50 {
			k.above50++
		}
		if s.lat > r.t90 {
			k.slow++
			if s.conc >= 2 {
				k.crowded++
			}
		}
	}
	return k
}

// latencySignal reports congestion among the successes sent since the last decrease (at least
// minSamples): more are slow than the reference explains, most of them sent while another of
// ours was in flight (a request sent alone cannot have queued behind ours).
func (c *Controller) latencySignal() bool {
	if c.lat.ref.lat.n < refMin {
		return false
	}
	k := c.countLatencies(c.epoch.start)
	if k.n < minSamples || 2*k.crowded <= k.slow {
		return false
	}
	return surprising(k.slow, k.n, c.lat.ref.p90) || surprising(k.above50, k.n, c.lat.ref.p50)
}

// latencyCheck judges a latency decrease on the next minSamples successes sent after the
// requests then in flight: unless fewer are slow, or most are faster than the median that
// called for it (one-sided tests at helpedZ), it is undone and their latencies join the
// reference.
type latencyCheck struct {
	pending bool
	size    float64       // the window before the decrease
	mode    windowMode    // and what sized it
	median  time.Duration // of the samples that called for it
	counts  latencyCounts // of the same
	from    nanos         // successes sent from then on judge it
}

// fewer reports whether a of n is a smaller share than b of m beyond chance (z-test at helpedZ).
func fewer(a, n, b, m int) bool {
	p1, p0 := float64(a)/float64(n), float64(b)/float64(m)
	p := float64(a+b) / float64(n+m)
	sd := math.Sqrt(p * (1 - p) * (1/float64(n) + 1/float64(m)))
	return p1 < p0 && (sd == 0 || (p0-p1)/sd > helpedZ)
}

func (c *Controller) checkLatencyDecrease() {
	lc := &c.win.check
	if !lc.pending {
		return
	}
	ds := c.latencies(lc.from, false)
	n := len(ds)
	if n < minSamples {
		return
	}
	lc.pending = false
	k, old := c.countLatencies(lc.from), lc.counts
	if fewer(k.slow, k.n, old.slow, old.n) || fewer(k.above50, k.n, old.above50, old.n) {
		return
	}
	above := 0
	for _, d := range ds {
		if d >= lc.median {
			above++
		}
	}
	if float64(above) < float64(n)/2-helpedZ*math.Sqrt(float64(n))/2 {
		return
	}
	for _, d := range ds {
		c.lat.ref.lat.push(d)
	}
	c.lat.ref.update()
	c.undoShrink(lc.size, lc.mode)
}
