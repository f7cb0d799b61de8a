package aimd

import (
	"cmp"
	"math"
	"time"
)

// Controller learns one host's allowed request rate and concurrency window from the outcomes of
// finished requests. It is pure (every time is an argument) and not safe for concurrent use.
type Controller struct {
	cfg   Config
	rate  float64 // within the clamp of Rate()
	phase Phase

	ceiling  float64     // robots Crawl-delay cap, req/s; +Inf: none
	stated   stated      // the limit the host states, and whether it is trusted
	curve    curve       // how the rate grows after a decrease
	pace     pace        // how often the probe looks above a known limit
	target   target      // the rate the search climbs toward
	ep       episode     // the current refusal episode
	sends    sendLog     // the latest requests' send times and signals (R4, R7)
	epoch    epoch       // since the last decrease
	win      windowState // the concurrency window and its latency rules
	lat      latencyRef  // the host's own latency: baseline and reference
	fails    failureLog  // the recent Failures and the host's background share of them
	served   servedPeak  // the highest success rate the host answered lately
	counts   struct{ decreases, overLimit, failures, neutral int }
	savedP95 time.Duration // State.P95, shown until a success is measured
	last     time.Time     // latest time seen
	samples  ring[sample]
	hist     history
	scratch  []time.Duration
}

// epoch is the time since the last decrease; a signal about a request sent before it is noise (R1).
type epoch struct {
	start nanos // never: no decrease yet
	ok    int   // successes sent at or after start
}

// New returns a controller in slow start at cfg.InitialRate and cfg.InitialWindow.
func New(cfg Config, now time.Time) *Controller {
	cfg = cfg.withDefaults()
	c := &Controller{cfg: cfg, ceiling: math.Inf(1), pace: pace{probeTime: probeTime},
		epoch: epoch{start: never}, last: now, samples: ring[sample]{cap: memory},
		hist: history{ring[point]{cap: memory}}, lat: latencyRef{ref: ring[time.Duration]{cap: memory}}}
	c.begin()
	c.hist.push(point{t: toNanos(now), rate: c.rate, window: c.Window()})
	return c
}

// Rate returns the allowed request rate in req/s: within [MinRate, MaxRate] and never above
// the ceiling (a ceiling below MinRate wins: robots.txt has the last word).
func (c *Controller) Rate() float64 { return c.clampRate(c.rate) }

// Window returns the allowed number of requests in flight, within [1, MaxWindow].
func (c *Controller) Window() int { return min(max(int(c.win.size), 1), c.cfg.MaxWindow) }

// SetCeiling caps the rate at rate req/s from now on (robots.txt Crawl-delay d gives 1/d); rate
// <= 0 removes the cap.
func (c *Controller) SetCeiling(rate float64) {
	c.ceiling = cmp.Or(validRate(rate), math.Inf(1))
	c.recap()
	c.record(c.last, true)
}

func (c *Controller) clampRate(r float64) float64 {
	if math.IsNaN(r) {
		r = c.cfg.MinRate
	}
	return min(max(r, c.cfg.MinRate), c.capRate())
}

// capRate is MaxRate, under the robots ceiling and a trusted stated limit.
func (c *Controller) capRate() float64 { return min(c.cfg.MaxRate, c.ceiling, c.stated.cap()) }

// Observe feeds one finished request at now (out-of-order times are clamped to the latest).
// The front filter labels it; the estimators update; the state machine moves on the label.
func (c *Controller) Observe(now time.Time, o Outcome) {
	if now.Before(c.last) {
		now = c.last
	}
	dt := min(now.Sub(c.last), time.Duration(2/c.rate*float64(time.Second)), returnTime) // time in use: up to two sending intervals (R2)
	c.last = now
	if o.Signal == Success && c.stated.state(o.Stated) { // the rate never rises on a refusal
		c.holdStated(c.stated.cap())
		c.record(now, true)
	}
	switch o.Signal {
	case Success:
	case Overload:
		c.counts.overLimit++
		c.pace.pause, c.pace.quick = max(o.Pause, 0), o.Pause <= 0
	case Failure:
		c.counts.failures++
	default:
		c.counts.neutral++
		return
	}
	s, lab := c.remember(now, o)
	if o.Signal == Success {
		c.served.note(s.sent, c.recentAccepted(s.sent+1))
		if s.sent >= c.epoch.start {
			c.epoch.ok++
			if c.ep.endsRun() {
				c.endRun(c.runEnd(&s))
			}
			c.ep.run = 0
			c.settle()
		}
	}
	switch lab {
	case labelLimit:
		if o.Signal == Overload && c.stated.refused() {
			c.recap() // refuted: learned as if nothing were stated
		}
		c.decreaseRate(now, &s)
	case labelServed:
		if w, ok := c.latencyCongested(now, &s); ok {
			c.decreaseWindow(now, w)
		} else {
			c.grow(dt, &s) // dt: time in use since the previous outcome (R2)
		}
	}
	c.settle()
	c.record(now, false)
}

// label is the front filter's verdict on an outcome that is not Neutral.
type label uint8

const (
	labelServed      label = iota // a Success
	labelLimit                    // a refusal, or a Failure cluster, since the last decrease
	labelHostFailure              // a Failure its background share or the served peak explains (R8)
	labelNoise                    // a signal about a request sent before the last decrease (R1)
)

// remember is the front filter: it records o in the failure log (whose share may undo earlier
// cuts), the samples and the send log, and labels it.
func (c *Controller) remember(now time.Time, o Outcome) (s sample, lab label) {
	sent := o.Sent
	if sent.IsZero() || sent.After(now) {
		sent = now.Add(-max(o.Latency, 0))
	}
	ts := toNanos(sent)
	c.fails.add(o.Signal == Failure, c.fails.heldAt(c.hist.at(ts).rate))
	if u := c.fails.undo; u.rate > 0 && c.fails.known() { // judged once, when the share is known
		if c.fails.undo = (failureUndo{}); float64(u.n) < c.fails.need() {
			c.undoCuts(u) // the share explains every cut
		}
	}
	switch {
	case o.Signal == Success:
		lab = labelServed
	case ts < c.epoch.start:
		lab = labelNoise
	case o.Signal == Failure && (!c.fails.signal(c.inRun()) || c.served.covers(ts, c.sendingRate(ts))):
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
	c.sends.log(s.sent, s.sig)
	return s, lab
}

// record appends a history point when the window or the rate changed by more than sameRate (or
// force): later outcomes are judged against the rate they were sent at.
func (c *Controller) record(now time.Time, force bool) {
	r, w, t := c.Rate(), c.Window(), toNanos(now)
	if p := c.hist.last(); !force && w == p.window && math.Abs(r-p.rate) <= sameRate*p.rate {
		return
	} else if t <= p.t { // same instant: overwrite
		p.rate, p.window = r, w
		return
	}
	c.hist.push(point{t: t, rate: r, window: w})
}

// link returns how many remembered requests were in flight when s was sent, and marks s and
// every one whose time in flight overlapped it as crowded.
func (c *Controller) link(s *sample) int {
	n := 0
	for i := 0; i < c.samples.n; i++ {
		j := c.samples.back(i)
		if j.done <= s.sent {
			break
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

// startEpoch marks a decrease at now.
func (c *Controller) startEpoch(now time.Time) {
	c.epoch = epoch{start: toNanos(now)}
	c.fails.fresh = 0
	c.counts.decreases++
}

// statedTrust is what the controller makes of the limit the host states (R10).
type statedTrust uint8

const (
	statedNone    statedTrust = iota // nothing stated: the rate is learned
	statedTrusted                    // the rate is set just under the stated limit and capped there
	statedRefuted                    // refused refutations times under it: statements are ignored
)

// stated is the limit the host states (Outcome.Stated); not saved: the host states it again.
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
// first statement, or one that moved by more than sameRate.
func (s *stated) state(rate float64) bool {
	if validRate(rate) == 0 || s.trust == statedRefuted || s.trust == statedTrusted && math.Abs(rate-s.rate) <= sameRate*s.rate {
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
	if s.refusals++; s.refusals >= refutations {
		s.trust = statedRefuted
	}
	return s.trust == statedRefuted
}
