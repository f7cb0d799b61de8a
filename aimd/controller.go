package aimd

import (
	"math"
	"time"
)

// Controller learns one host's allowed request rate and concurrency window from the outcomes
// of finished requests. It is pure: no goroutines, no clock, no I/O; every time comes in as an
// argument.
//
// A Controller is not safe for concurrent use: the caller (hostlimit) holds one lock per host
// around every method call.
type Controller struct {
	cfg   Config
	top   float64 // the rate's cap: MaxRate, under the robots ceiling and a stated limit (capRate)
	rate  float64 // internal rate, always within the clamp of Rate(); written only in fsm.go
	phase Phase   // where the rate is on its way; written only in fsm.go

	ceiling float64 // robots Crawl-delay cap, req/s; 0 = none
	stated  stated  // the limit the host states, and whether it is trusted (stated.go)

	curve  curve       // how the rate grows: slow start, or the return, search and probe
	pace   pace        // how often the probe looks above a known limit
	target target      // the rate the search climbs toward
	ep     episode     // the current refusal episode (see episode.go)
	fit    fitter      // the server-side token buckets that explain what the host did
	epoch  epoch       // since the last decrease
	win    windowState // the concurrency window and its latency rules
	lat    latencyRef  // the host's own latency: baseline and reference
	fails  failureLog  // the recent Failures, and the host's background share of them
	counts counters

	last    time.Time // latest time seen
	samples ring[sample]
	hist    history
	scratch []time.Duration
}

// counters are what Stats reports of the outcomes seen.
type counters struct {
	decreases, overLimit, failures, neutral int
	savedP95                                time.Duration // State.P95 restored, shown until a success is measured
}

// epoch is the congestion epoch: the time since the last decrease. Signals about requests sent
// before it began belong to the epoch that decrease answered.
type epoch struct {
	start nanos     // when it began (never: no decrease yet)
	at    time.Time // the same instant, for Stats; zero if none
	ok    int       // successes sent at or after start
}

// New returns a controller in slow start at cfg.InitialRate and cfg.InitialWindow.
func New(cfg Config, now time.Time) *Controller {
	cfg = cfg.withDefaults()
	c := &Controller{
		cfg:     cfg,
		top:     cfg.MaxRate,
		pace:    pace{probeTime: probeTime},
		epoch:   epoch{start: never},
		fit:     fitter{start: never, from: never},
		last:    now,
		samples: newRing[sample](max(memory, 4*sampleWindow)),
		hist:    newHistory(memory),
		lat:     latencyRef{ref: newReference()},
	}
	c.begin()
	c.hist.push(point{t: toNanos(now), rate: c.rate, window: c.Window()})
	return c
}

// Rate returns the allowed request rate in req/s: within [MinRate, MaxRate] and never above the
// ceiling (a ceiling below MinRate wins: robots.txt has the last word).
func (c *Controller) Rate() float64 { return c.clampRate(c.rate) }

// Window returns the allowed number of requests in flight, within [MinWindow, MaxWindow].
func (c *Controller) Window() int {
	return min(max(int(c.win.size), c.cfg.MinWindow), c.cfg.MaxWindow)
}

// Burst returns how many requests may leave back to back (the pacer's bucket size): 1, or,
// while the rate is one the bucket fit set (R5) and no limit is stated, half the least bucket
// size the fit allows the host (rounded down), at most 4. Sends that keep to Rate() on average and
// never bunch more than Burst() cannot empty such a host's bucket; a pacer that wakes late may
// so catch up instead of losing the lateness from the rate (docs/aimd.md, R5).
func (c *Controller) Burst() int {
	if c.stated.trust == statedTrusted {
		return 1
	}
	return c.fit.burst()
}

// SetCeiling caps the rate at rate req/s from now on (e.g. robots.txt Crawl-delay d gives 1/d);
// rate <= 0 removes the cap. It applies at once.
func (c *Controller) SetCeiling(rate float64) {
	c.ceiling = 0
	if rate > 0 && !math.IsInf(rate, 0) {
		c.ceiling = rate
	}
	c.recap()
	c.record(c.last, true)
}

func (c *Controller) clampRate(r float64) float64 {
	if math.IsNaN(r) {
		r = c.cfg.MinRate
	}
	return min(max(r, c.cfg.MinRate), c.top)
}

// Observe feeds one finished request. now is when it finished; out-of-order times are clamped
// to the latest seen. Neutral outcomes are counted and move nothing; so is an isolated Failure
// (see failureLog). An Overload or Failure for a request sent before the last
// decrease belongs to that congestion epoch and is not acted on again; so is latency measured
// on such requests.
func (c *Controller) Observe(now time.Time, o Outcome) {
	// 1. Clock, the limit the host states, and counters; a Neutral outcome stops here.
	if now.Before(c.last) {
		now = c.last
	}
	dt := c.activeTime(now)
	c.last = now
	c.applyStated(now, o.Signal, o.Stated)
	if !c.count(o) {
		return
	}
	// 2. The front filter: remember the request (the failure logs, which may undo earlier
	// cuts, the samples and the fit's log) and label it.
	v, lab := c.remember(now, o)
	s := &v
	stale := s.sent < c.epoch.start
	// 3. A success ends a refusal run; the episode may restore the rate it measured.
	if o.Signal == Success {
		if !stale {
			c.epoch.ok++
			if c.ep.endsRun() {
				c.endRun(c.runEnd(s))
			}
			c.ep.run = 0
			c.settle()
		}
	}
	// 4. A bucket fit whose requests have all come back may set the rate.
	if c.fit.due(toNanos(now)) {
		if r, ok := c.runFit(); ok {
			c.holdFitted(r)
			c.record(now, false)
		}
	}
	// 5. Decrease on a congestion signal, shrink the window on latency, or grow.
	switch {
	case lab == labelLimit:
		if o.Signal == Overload && c.stated.refused() {
			c.recap() // refuted: learned as if nothing were stated
		}
		c.decreaseRate(now, s)
	case lab != labelServed: // noise, or the host's own failure: moves nothing
	case c.latencyCongested(now, s):
		c.decreaseWindow(now)
	default:
		c.grow(dt, s)
	}
	c.settle()
	c.record(now, false)
}

// activeTime is the time since the previous outcome that counts as activity (and toward
// growth): up to two sending intervals (at least minActiveGap, at most ReturnTime); a longer
// gap is idleness, e.g. a Retry-After pause.
func (c *Controller) activeTime(now time.Time) time.Duration {
	return min(now.Sub(c.last), max(time.Duration(2/c.rate*float64(time.Second)), minActiveGap), returnTime)
}

// count counts o and reports whether it is a signal (not Neutral). A refusal sets what the
// refusal cost (pace).
func (c *Controller) count(o Outcome) bool {
	switch o.Signal {
	case Success:
	case Overload:
		c.counts.overLimit++
		c.pace.pause, c.pace.quick = max(o.Pause, 0), o.Pause <= 0
	case Failure:
		c.counts.failures++
	default:
		c.counts.neutral++
		return false
	}
	return true
}

// remember records the finished request o (not Neutral) in the failure logs, the samples and
// the fit's log, and returns its sample and label (see label). A background share that has
// just become known may undo the cuts made before it (failureUndo.judge).
func (c *Controller) remember(now time.Time, o Outcome) (s sample, lab label) {
	sent := o.Sent
	if sent.IsZero() || sent.After(now) {
		sent = now.Add(-max(o.Latency, 0))
	}
	run, at := c.inRun(), c.hist.at(toNanos(sent)).rate
	c.fails.add(o.Signal == Failure, c.fails.heldAt(at))
	if c.fails.undo.pending() && c.fails.known() {
		if u, ok := c.fails.undo.judge(c.fails.need()); ok {
			c.undoCuts(u)
		}
	}
	ts := toNanos(sent)
	switch {
	case o.Signal == Success:
		lab = labelServed
	case ts < c.epoch.start:
		lab = labelNoise // the decrease that began this epoch answered it
	case o.Signal == Failure && !c.fails.signal(run):
		lab = labelHostFailure
	default:
		lab = labelLimit
	}
	s = sample{sent: ts, done: toNanos(now), lat: max(o.Latency, 0), sig: o.Signal, demand: o.Demand}
	s.conc = c.link(&s) + 1
	if o.InFlight > 0 {
		s.conc = o.InFlight
	}
	c.samples.push(s)
	c.fit.log(s.sent, s.sig)
	return s, lab
}

// record appends a history point when the rate or window changed noticeably (or always when
// force is set), so that later outcomes can be judged against the rate they were sent at.
func (c *Controller) record(now time.Time, force bool) {
	r, w, t := c.Rate(), c.Window(), toNanos(now)
	if c.hist.n > 0 {
		p := c.hist.last()
		if !force && w == p.window && math.Abs(r-p.rate) <= 0.005*p.rate {
			return
		}
		if t <= p.t { // same instant: overwrite
			p.rate, p.window = r, w
			return
		}
	}
	c.hist.push(point{t: t, rate: r, window: w})
}

// link relates a new sample s to the remembered ones: it returns how many of them were in
// flight when s was sent (sent at or before, finished after), and marks s and every remembered
// sample whose time in flight overlapped s's as crowded. Requests still in flight now are
// unknown, so the count errs low; later samples mark "crowded" as they arrive.
func (c *Controller) link(s *sample) int {
	n := 0
	for i := 0; i < c.samples.n; i++ {
		j := c.samples.back(i)
		if j.done <= s.sent {
			break // and so did every older one
		}
		if j.sent <= s.sent {
			n++
		}
		if j.sent < s.done {
			j.crowded, s.crowded = true, true
		}
	}
	return n
}

// startEpoch marks a decrease at now: outcomes of requests sent before now no longer count.
func (c *Controller) startEpoch(now time.Time) {
	c.epoch = epoch{start: toNanos(now), at: now}
	c.fails.fresh = 0
	c.counts.decreases++
}
