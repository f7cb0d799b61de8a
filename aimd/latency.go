package aimd

import (
	"math"
	"slices"
	"time"
)

// The latency signal compares recent latencies with the host's own distribution without our
// load (the reference): congestion is more requests slower than a yardstick (LatencyFactor ×
// the reference median or p90, and LatencyMinExcess more) than that distribution explains, by
// refZ standard deviations of a binomial (docs/aimd.md, R10).

// reference is the host's latency distribution without our load: latencies of the latest
// refSize successes sent while no other request of ours was in flight (even one other can be
// what a one-worker host makes it wait for), and the yardsticks derived from it. Slow start
// sends alone at first (InitialRate 2/s), so a host answering within half a second has its
// reference within the first few requests; a slower one may have none for a while, and no
// latency signal until it has.
type reference struct {
	lat      ring[time.Duration]
	sort     []time.Duration // scratch
	t50, t90 time.Duration   // yardsticks: LatencyFactor × the median, × the p90
	p50, p90 float64         // the shares of the host's latencies above them (see above)
	hi       time.Duration   // the reference p90: a typical slow request at no load
}

func newReference() reference {
	return reference{lat: newRing[time.Duration](refSize)}
}

// add records the latency of success s if it was sent alone enough, and recomputes the
// yardsticks.
func (r *reference) add(s *sample, cfg *Config) {
	if s.lat <= 0 || s.conc != 1 {
		return
	}
	r.lat.push(s.lat)
	r.update(cfg)
}

// update recomputes the yardsticks from the reference latencies.
func (r *reference) update(cfg *Config) {
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
	// Upper 99% bounds: the mean's from Student's t (Cornish–Fisher expansion), the spread's
	// from the chi-square lower 1% quantile (Wilson–Hilferty); z = 2.326 is the normal 99%.
	const z = 2.326
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

// surprising reports whether k of n recent latencies above a yardstick is more than chance
// explains when the host puts a share p0 above it: at least two, and more than refZ standard
// deviations (and a half, for continuity) above the binomial mean.
func surprising(k, n int, p0 float64) bool {
	mean := float64(n) * p0
	return k >= 2 && float64(k) > mean+refZ*math.Sqrt(mean*(1-p0))+0.5
}

// typicalSlow is a latency most requests stay under at no load: the reference p90 once known,
// else the baseline. Window room is sized by it, so a spread host's slow pages do not make the
// window bind before the rate does.
func (c *Controller) typicalSlow() time.Duration {
	if c.lat.ref.lat.n >= refMin {
		return max(c.lat.ref.hi, c.lat.baseline)
	}
	return c.lat.baseline
}

// latencyCounts are the latest successes (up to SampleWindow) sent since some instant,
// counted against the reference's yardsticks.
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

// latencySignal reports congestion seen in latency among the latest successes sent since the
// last decrease (at least minSamples): more of them are slow than the host's own reference
// explains (no signal before the reference holds refMin latencies), and most of the slow ones
// were sent while another of our requests was in flight (a request sent alone cannot have
// queued behind ours; its latency is the host's own business).
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

// latencyCheck is what a latency decrease is judged by once the next minSamples successes
// sent after the requests then in flight have come back: unless fewer of them are slow, or
// most are faster than the median that called for it (one-sided tests at helpedZ), the
// decrease is undone and their latencies join the reference (docs/aimd.md, R10).
type latencyCheck struct {
	pending bool
	size    float64       // the window before the decrease
	mode    windowMode    // and what sized it
	median  time.Duration // of the samples that called for it
	counts  latencyCounts // of the same
	from    nanos         // successes sent from then on judge it
}

// fewer reports whether a of n is a smaller share than b of m, beyond chance (one-sided
// two-proportion z-test at helpedZ).
func fewer(a, n, b, m int) bool {
	p1, p0 := float64(a)/float64(n), float64(b)/float64(m)
	p := float64(a+b) / float64(n+m)
	sd := math.Sqrt(p * (1 - p) * (1/float64(n) + 1/float64(m)))
	return p1 < p0 && (sd == 0 || (p0-p1)/sd > helpedZ)
}

// checkLatencyDecrease judges the last latency decrease once enough successes have come back
// since (see latencyCheck).
func (c *Controller) checkLatencyDecrease() {
	lc := &c.win.check
	if !lc.pending {
		return
	}
	ds := c.recentLatencies(lc.from, 0)
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
	c.lat.ref.update(&c.cfg)
	c.undoShrink(lc.size, lc.mode)
}
