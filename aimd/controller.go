package aimd

import (
	"math"
	"slices"
	"time"
)

// Phase names reported by Stats.Phase.
const (
	PhaseSlowStart = "slow-start" // no congestion seen yet (or a probe went far above the old limit): grow multiplicatively
	PhaseAvoidance = "avoidance"  // after a decrease, returning to (or holding just under) the plateau
	PhaseProbing   = "probing"    // above the plateau, probing slowly for a higher limit
)

const (
	// About 10 KB per host in all.
	ringSize    = 128 // samples remembered (at least 4 × SampleWindow)
	historySize = 128 // rate/window change points remembered (a change of 0.5% or more)

	// slowStartSends: slow start multiplies the rate by SlowStartFactor at most once per this
	// many requests, so that at low rates feedback arrives before the next step.
	slowStartSends = 1

	// minSpan: a refusal measures the limit only over at least this much sending; a shorter
	// span measures mostly the server's burst, and a refusal ending a shorter epoch says the
	// last cut was not enough.
	minSpan = 800 * time.Millisecond

	// burstAllowance: the tokens a server's bucket is assumed to have held beyond the refill
	// when an epoch began (its burst), subtracted from the successes that measure the limit.
	burstAllowance = 1.5

	// fitNarrow: the bucket fit measures the limit when the rates it still allows span no more
	// than this factor; fitBeta is the share of the least of them the rate then holds at.
	fitNarrow = 1.15
	fitBeta   = 0.99

	// minMeasured: an episode with fewer successes than this (the one that ends its run
	// included) measures nothing; unblock starts over in slow start.
	minMeasured = 3

	// maxPatience bounds how far the probe time is stretched while refusals recur at one rate.
	maxPatience = 4

	// pauseProbeRatio, maxPauseProbe: the probe time is at least pauseProbeRatio × the pause
	// the last refusal cost, but that stretch no more than maxPauseProbe (see probeSeconds).
	pauseProbeRatio = 20
	maxPauseProbe   = time.Hour

	// searchGap: a plateau more than this factor below PlateauFactor × the last refused rate is
	// raised toward it by binary search, one step per ReturnTime and per searchSends successes
	// (a step may draw a refusal; at low rates they must stay rare per page).
	searchGap        = 1.25
	searchSends      = 50
	quickSearchSends = 20 // searchSends on a host whose refusals cost no pause

	// failureRunFloor, failureServing: a run of Failures cuts the rate to no less than
	// failureRunFloor × the rate that drew the run's first refusal while the host's latest success
	// is younger than failureServing (see decreaseRate).
	failureRunFloor = 0.125
	failureServing  = time.Minute

	// ssSustained: slow start's refusal at rs measured nothing if the climb after it holds
	// unrefused near rs and the host had accepted less than ssSustained × rs over the
	// RateWindow before it (see grow); a rate held there and then refused is a limit.
	ssSustained = 0.75

	// maxWindowPatience bounds how far the window probe interval is stretched while latency
	// signals keep bringing the window back to the same size.
	maxWindowPatience = 16
)

// Controller learns one host's allowed request rate and concurrency window from the outcomes
// of finished requests. It is pure: no goroutines, no clock, no I/O; every time comes in as an
// argument.
//
// A Controller is not safe for concurrent use: the caller (hostlimit) holds one lock per host
// around every method call.
type Controller struct {
	cfg     Config
	ceiling float64 // req/s cap from robots Crawl-delay; 0 = none

	rate   float64 // internal rate, always within the clamp of Rate()
	window float64 // fractional so that additive growth can accumulate

	slowStart    bool
	latencyBound bool          // the window was set by a latency signal: it no longer follows the rate
	plateau      float64       // K: the rate to return to after a decrease (just under the measured limit)
	epochRate    float64       // rate right after the last rate decrease (start of the cubic curve)
	elapsed      time.Duration // time the rate was in use since the last rate decrease (the cubic clock)

	lastDecrease nanos         // congestion signals for requests sent before this are ignored
	decreasedAt  time.Time     // the same instant, for Stats; zero if none
	epochOK      int           // successes sent at or after lastDecrease
	hi           float64       // rate of the last refusal, while the rate is below it; 0 = unknown
	hiBound      bool          // hi is a bound unblock set on the search after a run, not a refused rate
	ssHi         bool          // hi is the rate slow start was refused at, no refusal since (see grow)
	lastRefusal  float64       // rate of the last refusal, kept
	probeTime    time.Duration // current ProbeTime, lengthened while refusals recur at one rate
	sinceStep    int           // successes since the last decrease or search step
	fit          bucketFit     // the server-side token buckets that explain what the host did (the latest fit)
	fitStart     nanos         // the fit's requests start here (never: the first request), where the limit last changed
	fitFrom      nanos         // the refusal that opened the epoch awaiting its fit (never: the first epoch)
	fitTo        nanos         // the refusal that closed it
	fitAt        nanos         // when its requests have all come back and it can be fitted; 0 = none pending
	fitApply     bool          // the pending fit may set the rate (its refusal did not end slow start)
	fitLog       []fitRec      // requests finished since fitStart: the fit's input
	fitHeld      float64       // the rate the last applied fit set; 0 = none
	fitMisses    int           // refusals at or below fitHeld (see maxFitMisses)
	searched     bool          // a search step was taken since the last decrease
	quick        bool          // the last refusal did not pause the host: QuickReturnTime applies
	pause        time.Duration // the pause the last refusal cost (its Retry-After); see probeSeconds

	// A refusal run: refusals with no success between them, a host refusing whatever is sent
	// (a sliding-window quota spent in a burst, an outage). See unblock.
	runLen     int     // refusals in the current run; 0: none since the last success
	runFrom    nanos   // the epoch the run's first refusal ended began here (never: the first epoch)
	runRate    float64 // the rate the run's first refusal set
	runRefused float64 // the rate that drew the run's first refusal
	runStart   nanos   // when the episode's first refused request was sent
	runLast    nanos   // when the latest run's first refused request was sent (the episode's own, or a resumed run's)
	runDone    bool    // the run's first refusal ended a search or rested on a measurement: no search after it
	resumed    bool    // the current run resumed an episode (ends at its first success even if it is one refusal long)
	resumedAt  float64 // the least rate a resumed run of the episode was refused at; +Inf: none
	unblocked  nanos   // when the last run ended (its first success was sent); 0: none
	reopened   nanos   // when the episode's first run ended (see unblock); 0: not yet
	blockLen   nanos   // the longest run seen (its first refusal to its first success): about a window's period

	windowPatience int // multiplies WindowProbe, doubled while latency signals recur at one window
	latencyWindow  int // the window a latency signal last set
	latencyCheck   latencyCheck

	baseline            time.Duration
	ref                 reference // latencies without our load, and the latency signal's thresholds
	baselineProvisional bool      // restored from State: replaced outright by the first measurement
	baselineAt          time.Time
	baselineTick        int

	decreases, overLimit, failures, neutral int
	lastOK                                  nanos      // when the latest Success was sent
	fails                                   failureLog // the recent Failures, and the host's background share of them
	overs                                   failureLog // the same for bare refusals (Overload with no pause)

	last    time.Time // latest time seen
	samples ring[sample]
	hist    history
	scratch []time.Duration
}

// New returns a controller in slow start at cfg.InitialRate and cfg.InitialWindow.
func New(cfg Config, now time.Time) *Controller {
	cfg = cfg.withDefaults()
	c := &Controller{
		cfg:          cfg,
		rate:         cfg.InitialRate,
		window:       float64(cfg.InitialWindow),
		slowStart:    true,
		probeTime:    cfg.ProbeTime,
		last:         now,
		lastDecrease: never,
		fitStart:     never,
		fitFrom:      never,
		samples:      newRing[sample](max(ringSize, 4*cfg.SampleWindow)),
		hist:         newHistory(historySize),
		ref:          newReference(),
		scratch:      make([]time.Duration, 0, max(ringSize, 4*cfg.SampleWindow)),
	}
	c.rate = c.clampRate(c.rate)
	c.hist.push(point{t: toNanos(now), rate: c.rate, window: c.Window()})
	return c
}

// Rate returns the allowed request rate in req/s: within [MinRate, MaxRate] and never above the
// ceiling (a ceiling below MinRate wins: robots.txt has the last word).
func (c *Controller) Rate() float64 { return c.clampRate(c.rate) }

// Window returns the allowed number of requests in flight, within [MinWindow, MaxWindow].
func (c *Controller) Window() int {
	return min(max(int(c.window), c.cfg.MinWindow), c.cfg.MaxWindow)
}

// SetCeiling caps the rate at rate req/s from now on (e.g. robots.txt Crawl-delay d gives 1/d);
// rate <= 0 removes the cap. It applies at once.
func (c *Controller) SetCeiling(rate float64) {
	if !(rate > 0) || math.IsInf(rate, 0) {
		rate = 0
	}
	c.ceiling = rate
	c.rate = c.clampRate(c.rate)
	c.record(c.last, true)
}

func (c *Controller) clampRate(r float64) float64 {
	hi := c.cfg.MaxRate
	if c.ceiling > 0 && c.ceiling < hi {
		hi = c.ceiling
	}
	if math.IsNaN(r) {
		r = c.cfg.MinRate
	}
	return min(max(r, c.cfg.MinRate), hi)
}

// Observe feeds one finished request. now is when it finished; out-of-order times are clamped
// to the latest seen. Neutral outcomes are counted and move nothing; so is an isolated Failure
// (see failureCluster). An Overload or Failure for
// a request sent before the last decrease belongs to that congestion epoch and is not acted on
// again; so is latency measured on such requests.
func (c *Controller) Observe(now time.Time, o Outcome) {
	if now.Before(c.last) {
		now = c.last
	}
	// Time between outcomes counts as activity (and toward growth) up to two sending intervals:
	// a longer gap is idleness, e.g. a Retry-After pause.
	dt := min(now.Sub(c.last), max(time.Duration(2/c.rate*float64(time.Second)), 100*time.Millisecond), 5*time.Second)
	c.last = now
	switch o.Signal {
	case Success:
	case Overload:
		c.overLimit++
		c.quick, c.pause = o.Pause <= 0, max(o.Pause, 0)
	case Failure:
		c.failures++
	default:
		c.neutral++
		return
	}
	sent := o.Sent
	if sent.IsZero() || sent.After(now) {
		sent = now.Add(-max(o.Latency, 0))
	}
	run, at := c.inRun(), c.hist.at(toNanos(sent)).rate
	bare := o.Signal == Overload && o.Pause <= 0
	c.fails.add(o.Signal == Failure, c.fails.heldAt(at))
	c.overs.add(bare, !run && c.overs.heldAt(at))
	if c.fails.undo.rate > 0 && c.fails.known() {
		c.rejudge(&c.fails.undo, c.fails.need())
	}
	overNeed := c.overloadNeed()
	if c.overs.undo.rate > 0 && overNeed > 1 {
		c.rejudge(&c.overs.undo, overNeed)
	}
	isolated := o.Signal == Failure && !c.fails.signal(run) || bare && !c.overs.reaches(run, overNeed)
	s := sample{sent: toNanos(sent), done: toNanos(now), lat: max(o.Latency, 0), sig: o.Signal, bare: bare}
	s.conc = c.link(&s) + 1
	if o.InFlight > 0 {
		s.conc = o.InFlight
	}
	c.samples.push(s)
	c.logForFit(&s)

	stale := s.sent < c.lastDecrease
	if o.Signal == Success {
		c.lastOK = max(c.lastOK, s.sent)
	}
	if !stale && o.Signal == Success {
		c.epochOK++
		if c.runLen > 1 || (c.runLen == 1 && c.resumed) {
			c.unblock(&s)
		}
		c.runLen = 0
	}
	if c.fitAt != 0 && toNanos(now) >= c.fitAt {
		c.runFit(now)
	}
	switch {
	case o.Signal != Success:
		if !stale && !isolated {
			c.decreaseRate(now, &s)
		}
	case c.latencyCongested(now, &s):
		c.decreaseWindow(now)
	default:
		c.grow(dt, &s)
	}
	c.record(now, false)
}

// latencyCongested takes in the latency of success s and reports whether latency signals
// congestion that a smaller window can relieve.
func (c *Controller) latencyCongested(now time.Time, s *sample) bool {
	if s.lat <= 0 {
		return false
	}
	c.updateBaseline(now, s)
	c.ref.add(s, &c.cfg)
	c.checkLatencyDecrease()
	if c.Window() <= c.cfg.MinWindow {
		return false
	}
	// The median or p90 can only have crossed its threshold if this sample is slow, or if the
	// epoch has just collected enough samples to judge.
	if s.lat <= c.ref.t50 && c.epochOK > minSamples {
		return false
	}
	return c.latencySignal()
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

// rateInUse reports whether the rate was the binding limit when s was sent: sends were spaced
// no more than twice the allowed interval, and s did not have to wait for a window slot.
func (c *Controller) rateInUse(s *sample) bool {
	if s.conc >= c.hist.at(s.sent).window {
		return false
	}
	sp, ok := c.sendSpacing(s.sent)
	return ok && sp <= 2
}

// singleTokenLimit tests the remembered requests against a server-side bucket that holds one
// token (nginx limit_req without burst, for one, is such a bucket): such a bucket accepts two
// requests only if the second arrives at least 1/L after the first, and refuses one that comes
// sooner. If every gap between consecutive remembered successes (by send time) is longer than
// the gap between the refusal sent at ts and the success before it, one token explains what
// the host did, and L lies between 1/(shortest accepted gap) and 1/(refused gap): limit is the
// lower end and ok is true. Counting (epochEstimate) must allow for an unknown burst and so
// measures such a host well below its limit; the gaps measure it exactly. If an earlier
// success came sooner than the refused one, the host has a burst (or its limit fell) and ok
// is false.
func (c *Controller) singleTokenLimit(ts nanos) (limit float64, ok bool) {
	sends := c.successSends(never, ts)
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

// grow applies the increase rules after a success.
func (c *Controller) grow(dt time.Duration, s *sample) {
	p := c.hist.at(s.sent)
	windowFull := s.conc >= p.window
	rateUsed := c.rateInUse(s)
	if rateUsed && !c.latencyBound {
		// The window follows a rate in use with room to spare (twice the requests the rate
		// keeps in flight at baseline latency), so that it never holds back a rate-limited
		// host; it only binds where latency has said so.
		c.window = max(c.window, min(math.Ceil(2*c.rate*c.typicalSlow().Seconds()), float64(c.cfg.MaxWindow)))
	}
	if c.slowStart {
		if rateUsed {
			iv := max(c.cfg.SlowStartInterval, 2*c.baseline, time.Duration(slowStartSends/c.rate*float64(time.Second)))
			c.rate = c.clampRate(c.rate * math.Pow(c.cfg.SlowStartFactor, dt.Seconds()/iv.Seconds()))
		}
		if windowFull {
			c.window = min(c.window+1, float64(c.cfg.MaxWindow))
		}
		return
	}
	if rateUsed {
		c.elapsed += dt
		c.sinceStep++
		stepDue := c.elapsed >= c.returnTime() && c.sinceStep >= c.searchSends()
		if c.hiBound && c.searchReached() && c.elapsed >= time.Duration(c.blockLen) && stepDue {
			// The search after a run reached its bound and has held just under it, unrefused,
			// for longer than the run lasted. A window whose quota per period (about the run's
			// length) is what the episode measured would have refused this rate by now, so
			// the bound was the run's backoff, not the host's limit (a ban that each request
			// restarts, as mod_evasive's, lasts as long as the backoff takes to leave a gap
			// as long as it): double it, toward the rate that drew the run.
			c.hi = min(c.runRefused, 2*c.hi)
			c.hiBound = c.hi < c.runRefused
		}
		if c.ssHi && c.searchReached() && stepDue {
			// Slow start was refused at hi, and the climb (or search) after it has come within
			// reach of hi and held there unrefused: that refusal measured nothing. A one-token
			// bucket refuses a request that reaches it close behind another, and network or
			// scheduling jitter makes such pairs while the rate is still far under its limit
			// (refused at 4 req/s by an 8 req/s host, the rate stayed under 4 for 30 s of the
			// slow probe). Search on toward twice it: a limit just above hi is found by the
			// next step's refusal, as the probe would have found it later.
			c.hi *= 2
		}
		if stepDue && c.hi > 0 && !c.searchReached() {
			// Back at the plateau, which lies well below the last refused rate: binary search
			// (on a log scale) toward just under it, one step per ReturnTime.
			c.epochRate = max(c.rate, c.plateau)
			c.plateau = math.Sqrt(c.plateau * c.cfg.PlateauFactor * c.hi)
			c.elapsed, c.sinceStep, c.searched = 0, 0, true
		}
		if r := c.curve(); r > c.rate {
			c.rate = c.clampRate(r)
		}
		if c.rate > c.hi {
			c.hi = 0 // beyond the last refusal without a new one: the limit has risen
		}
		if c.rate >= c.cfg.RestartFactor*c.plateau && c.rate < c.clampRate(math.Inf(1)) {
			c.slowStart, c.latencyBound = true, false
		}
	}
	if windowFull {
		step := float64(c.cfg.WindowProbe * max(c.windowPatience, 1))
		c.window = min(c.window+1/(step*max(c.window, 1)), float64(c.cfg.MaxWindow))
	}
}

// searchReached reports whether the plateau has come within searchGap of PlateauFactor × hi,
// the last refused rate (or the search's bound): a search has no step left to take.
func (c *Controller) searchReached() bool {
	return c.hi > 0 && c.plateau*searchGap >= c.cfg.PlateauFactor*c.hi
}

// curve is the increase: a linear return from epochRate to the plateau K within
// ReturnTime, then a convex probe K·(1 + 0.1·(t'/ProbeTime)³) above it.
func (c *Controller) curve() float64 {
	k, t := c.plateau, c.elapsed.Seconds()
	if T := c.returnTime().Seconds(); c.epochRate < k && t < T {
		return c.epochRate + (k-c.epochRate)*t/T
	} else if c.epochRate < k {
		t -= T
	}
	x := t / c.probeSeconds()
	return k * (1 + 0.1*x*x*x)
}

// returnTime is the time the linear return to the plateau takes, and a search step's spacing:
// ReturnTime, or QuickReturnTime where a refusal costs no pause.
func (c *Controller) returnTime() time.Duration {
	if c.quick {
		return c.cfg.QuickReturnTime
	}
	return c.cfg.ReturnTime
}

// searchSends is the fewest successes between two search steps (see returnTime).
func (c *Controller) searchSends() int {
	if c.quick {
		return quickSearchSends
	}
	return searchSends
}

// probeSeconds is the current probe time: probeTime, stretched to ProbeRequests sending
// intervals at the plateau, but by that stretch to no more than maxPatience × ProbeTime. Without
// the bound a plateau cut low by refusals the host no longer gives (another client sharing its
// limit, a passing outage) would be probed never: 400 requests at the 0.1 req/s floor are 67
// minutes before +10%.
//
// It is also at least pauseProbeRatio × the pause the last refusal cost (up to maxPauseProbe):
// a probe that finds the limit where it was costs that pause, and a host that answers
// "Retry-After: 60" would otherwise lose a minute to every probe, one every minute or two
// (a third of the crawl). With the probe crossing a steady limit a few percent above the
// plateau at about 2/3 of the probe time, probing costs about 1/13 of the time at most.
func (c *Controller) probeSeconds() float64 {
	stretch := min(float64(c.cfg.ProbeRequests)/max(c.plateau, c.cfg.MinRate), maxPatience*c.cfg.ProbeTime.Seconds())
	return max(c.probeTime.Seconds(), stretch, min(pauseProbeRatio*c.pause, maxPauseProbe).Seconds())
}

// inRun reports whether the host is in a refusal run: refused, with no success since the last
// refusal (a refusal now repeats it).
func (c *Controller) inRun() bool { return c.runLen > 0 && c.epochOK == 0 }

// startEpoch marks a decrease at now: outcomes of requests sent before now no longer count.
func (c *Controller) startEpoch(now time.Time) {
	c.lastDecrease, c.decreasedAt = toNanos(now), now
	c.fails.fresh, c.overs.fresh = 0, 0
	c.epochOK = 0
	c.decreases++
}

// decreaseRate is the informed decrease on an Overload or Failure outcome s (not stale).
//
// The rate that drew the refusal (rs) bounds the limit from above. What the refusal teaches
// depends on how the rate got there:
//
//   - The end of slow start: the rate doubled past the limit, so the limit lies between about
//     half of rs and rs. The rate drops to Beta × the success rate of the last RateWindow
//     (at least Beta × rs/4) and climbs linearly, within ReturnTime, to a plateau of
//     PlateauFactor × the last accepted rate; the refusal a later climb or search step draws
//     measures the limit (next case).
//   - A refusal that ends an epoch with at least minSpan of sending (a climb, a probe, or a
//     level held for a while): a server-side token bucket of rate L that was last full at t*
//     has passed about L·(ts−t*) plus its burst since then, so the largest (successes sent
//     since t0, less burstAllowance) ÷ (ts−t0) over the epoch measures L (see
//     epochEstimate). The rate and the plateau become Beta × that (at least MinBeta × rs):
//     hold there, probe above it slowly. A level that held and is then refused is measured
//     the same way: most often it was a little above L and the bucket's burst hid that for a
//     while, and the long epoch measures L well; if the limit fell instead, the next refusal
//     comes within an epoch too short to measure (next case).
//   - A refusal ending an epoch too short to measure: the last cut was not enough (or the
//     limit fell). Nothing measures the new limit yet, so the rate halves (MinBeta × rs), as
//     TCP does.
//
// The rate never rises on a refusal. rs is remembered as the last refused rate: if the plateau
// lies well below it, grow searches the gap. A refusal at about the same rate as the previous
// one doubles the probe time (up to 4 × ProbeTime): the limit is where it was, so look above it
// less often.
func (c *Controller) decreaseRate(now time.Time, s *sample) {
	rs := c.sendingRate(s.sent)
	lo := min(c.sendingRate(c.lastAcceptedBefore(s.sent)), rs)
	if c.fitHeld > 0 && rs <= 1.01*c.fitHeld {
		c.fitMisses++ // refused at a rate the fit called safe: the limit fell, or the fit is wrong
	}
	c.fitHeld = 0
	var newRate, plateau float64
	measured := false // the new rate rests on a measurement of the limit, not on a bracket
	endsSlowStart := c.slowStart
	repeat := c.inRun()
	if s.sig == Failure {
		if !c.slowStart && c.fails.cut == 0 {
			c.fails.cut = rs
		}
		if !c.fails.known() {
			c.fails.undo.note(c, c.fails.count())
		}
	} else {
		c.fails.undo = failureUndo{} // an Overload: the rate rests on the host's word now
	}
	switch {
	case s.bare:
		excess := false
		if !c.slowStart && !repeat {
			if c.overs.cut == 0 {
				c.overs.cut = rs
			}
			excess = c.overs.excess(rs)
		}
		if !excess {
			c.overs.undo.note(c, c.overs.count()) // an excess cut is never undone
		}
	case s.sig == Overload:
		c.overs.undo = failureUndo{} // a refusal that paused the host: its word, not a background
	}
	est, span := c.epochEstimate(s.sent)
	accepted := c.recentAccepted(s.sent)
	switch {
	case c.slowStart:
		newRate = c.cfg.Beta * max(accepted, c.cfg.MinBeta*c.cfg.MinBeta*rs)
		plateau = c.cfg.PlateauFactor * lo
	case est > 0 && span >= minSpan:
		if l1, ok := c.singleTokenLimit(s.sent); ok {
			est = max(est, l1)
		}
		newRate = max(c.cfg.Beta*est, c.cfg.MinBeta*rs)
		plateau = newRate
		measured = c.cfg.Beta*est >= c.cfg.MinBeta*rs
	default:
		newRate = c.cfg.MinBeta * rs
		plateau = newRate
	}
	if s.sig == Failure && repeat && s.sent-c.lastOK < nanos(failureServing) {
		// Failures in a run, while the host answered a request normally within a minute: a
		// crawl's last URLs can all be pages that always fail (their first tries, in a row),
		// and the host, serving, is not down. Back off three halvings at most, until a minute
		// without a success says it is an outage.
		newRate = max(newRate, c.runRefused*failureRunFloor)
	}
	newRate = c.clampRate(min(newRate, c.rate))
	if s.sig == Failure && s.conc >= c.hist.at(s.sent).window {
		// The window was full: failures (timeouts, resets) may be the host's concurrency limit.
		c.window = max(math.Floor(c.window*c.cfg.Beta), float64(c.cfg.MinWindow))
	}
	// Patience: a refusal at about the rate of the previous one means the limit is where it was;
	// probe above it less often. Anything else starts over at ProbeTime.
	if c.lastRefusal > 0 && math.Abs(rs/c.lastRefusal-1) < 0.05 {
		c.probeTime = min(2*c.probeTime, maxPatience*c.cfg.ProbeTime)
	} else {
		c.probeTime = c.cfg.ProbeTime
	}
	c.rate = newRate
	c.hi, c.lastRefusal, c.hiBound = rs, rs, false
	// Slow start refused at a rate it had not yet sustained (the host accepted well under it
	// over the last RateWindow): grow may find that refusal measured nothing.
	c.ssHi = endsSlowStart && s.sig == Overload && accepted < ssSustained*rs
	if c.searched || measured {
		// A search step drew this refusal (the limit lies between the plateau and this step,
		// too close to be worth more refusals), or the new rate rests on a measurement, and rs
		// is only how far the climb overshot the limit while the bucket's burst hid it. The
		// slow probe takes it from here.
		c.hi = 0
	}
	c.searched = false
	c.plateau = max(plateau, newRate)
	c.epochRate = newRate
	c.elapsed, c.sinceStep = 0, 0
	c.slowStart = false
	switch {
	case repeat:
		c.runLen++
	case c.unblocked != 0 && s.sent-c.unblocked < c.blockLen:
		// Refused again sooner after a run ended than the episode's longest run lasted (about
		// the window's period): the host let a few requests through as its window slid, or
		// the rate the run ended with is still too high for it. The same episode goes
		// on: what it accepted is measured from where the episode began. If a search step drew
		// this refusal, the episode is not searched again.
		c.runLen, c.runLast, c.runDone, c.resumed = 1, s.sent, c.runDone || c.hi == 0, true
		c.resumedAt = min(c.resumedAt, rs)
	default:
		c.runLen, c.runFrom, c.runRate, c.runRefused = 1, c.lastDecrease, newRate, rs
		c.runStart, c.runLast, c.runDone, c.resumed = s.sent, s.sent, c.hi == 0, false
		c.resumedAt, c.reopened = math.Inf(1), 0
	}
	c.startEpoch(now)
	c.queueFit(now, s.sent, !endsSlowStart && !repeat)
}

// unblock ends a refusal run of two or more at its first success (s). The host refused
// whatever was sent for a while, as a sliding-window quota spent in a burst does until the
// window has slid past the burst (HAProxy's stick-table rate counts the refused requests too),
// or an outage; the halvings that spaced the run's requests out were a backoff and measured
// nothing. The rate returns to what the host accepted up to s since the epoch the run's first
// refusal ended began: Beta × the largest (successes sent from t0 to s, less burstAllowance) ÷
// (s − t0) (for a sliding window, the quota over the time it took to come back), or over the
// sends before the run from t0 at least as long before it as the run lasted, if that is more
// (a window whose period is about the run's length and that accepted x req/s over a period
// allows x; a ban that each request restarts lasts as long as the backoff, which then
// dwarfs what the host took before it), or the rate the first refusal set if that is lower;
// the gap to the first refused rate is then searched as after any cut (within the bounds
// below). A run that resumed an episode (see decreaseRate) ends here too, even after a single
// refusal, and also at least Beta under the least rate a resumed run of the episode was
// refused at, and no higher than Beta × what the host accepted since the episode's first run
// ended, over at least as long as its longest run (a window's quota per period; a token
// bucket's refill, where the measurements above count the burst it let slow start spend: a
// bucket of 40 tokens at 1 req/s, whose runs outlast minSpan, came back to 19 req/s and then
// 3% lower after each resumed run: 196 refusals in 300 pages). A run that lasted less than
// minSpan, with no longer run before it in the episode, is left as it is: no window blocks
// for so short a time, but a token bucket sent several times its rate refuses two requests in
// a row, and what it accepted before then counts its burst (a bucket of 20 tokens at 10 req/s
// measured 33 req/s).
func (c *Controller) unblock(s *sample) {
	sends := c.successSends(c.runFrom, s.sent+1)
	if len(sends) < minMeasured {
		// The host accepted almost nothing to measure: it refused from the first requests of
		// the episode on (a limit another client, or another of our host names, had spent).
		// Start over as a new host does, in slow start; the halved rate would sit at the floor.
		c.rate = c.clampRate(max(c.rate, c.cfg.InitialRate))
		c.slowStart, c.hi, c.ssHi = true, 0, false
		return
	}
	block := max(c.blockLen, s.sent-c.runLast)
	if block < nanos(minSpan) {
		return
	}
	est, _ := bestAccepted(sends, s.sent+1, minSpan)
	before, _ := slices.BinarySearch(sends, c.runStart) // the sends before the run
	if full, _ := bestAccepted(sends[:before], c.runStart, time.Duration(block)); full > est {
		est = full
	}
	if c.resumed && c.reopened != 0 {
		if since, span := bestAccepted(c.successSends(c.reopened, s.sent+1), s.sent+1, time.Duration(block)); span > 0 {
			est = min(est, since)
		}
	}
	r := c.clampRate(min(c.cfg.Beta*est, c.runRate, c.cfg.Beta*c.resumedAt))
	if r <= c.rate {
		return
	}
	c.unblocked, c.blockLen = s.sent, block
	if c.reopened == 0 {
		c.reopened = s.sent
	}
	c.rate, c.plateau, c.epochRate = r, r, r
	c.elapsed, c.sinceStep, c.searched = 0, 0, false
	// The search above r goes toward the rate that drew the run's first refusal, but no
	// further than twice r or a rate the host accepted before the run over at least half as
	// long as the run lasted. A host that blocks lets a window's quota through at any speed,
	// so slow start's refused rate can lie any distance above its limit (hundreds of req/s
	// against 10 per second); a window of period P that accepted x req/s over P/2 allows at
	// least x/2, and the run lasted about P. An episode whose first refusal a search step
	// drew (or a measurement answered) is not searched again: the search would step into the
	// same refusal, and its run, over and over.
	held, _ := bestAccepted(sends[:before], c.runStart, time.Duration(c.blockLen/2))
	c.hi, c.hiBound, c.ssHi = 0, false, false
	if h := min(c.runRefused, max(2*r, held)); h > r && !c.runDone {
		c.hi, c.hiBound = h, h < c.runRefused
	}
}

// fitRate is the rate to hold under a limit the bucket fit puts at least lo: fitBeta × lo,
// and for a one-token bucket (which has no spare token to absorb an early arrival) also
// spaced more than 1/lo by twice the timing noise (about the most network jitter can
// shorten a gap by).
func fitRate(lo float64, oneToken bool, noise time.Duration) float64 {
	r := fitBeta * lo
	if oneToken {
		r = min(r, 1/(1/lo+2*noise.Seconds()))
	}
	return r
}

// epochEstimate measures the limit from the current epoch, for a refusal sent at ts (see
// acceptedSince). A token bucket of rate L and burst b passes at most L·(ts−t0) + b requests
// sent from any t0 to ts, and exactly about that many from the last instant t* at which it was
// full (the Retry-After pause that opened the epoch refilled it; sending below L keeps it
// full). So the largest (successes sent from t0 to ts − burstAllowance) ÷ (ts − t0) over the
// epoch's sends t0 is the measurement: earlier t0 add time in which a full bucket wasted its
// refill, later ones only noise. Spans under minSpan are not considered (they measure mostly
// the burst); span is the chosen ts−t0; est is 0 when too little was sent.
func (c *Controller) epochEstimate(ts nanos) (est float64, span time.Duration) {
	return c.acceptedSince(c.lastDecrease, ts, minSpan)
}

// acceptedSince is the largest (successes sent from t0 to ts, less burstAllowance) ÷ (ts − t0)
// over the sends t0 at or after from with ts − t0 at least least, and that span.
func (c *Controller) acceptedSince(from, ts nanos, least time.Duration) (est float64, span time.Duration) {
	return bestAccepted(c.successSends(from, ts), ts, least)
}

// bestAccepted is acceptedSince over sends, the success send times (sorted, all before ts)
// from the chosen start on.
func bestAccepted(sends []nanos, ts nanos, least time.Duration) (est float64, span time.Duration) {
	for i, t0 := range sends {
		sp := time.Duration(ts - t0)
		if sp < least {
			break // and so are the later sends' spans
		}
		if e := (float64(len(sends)-i) - burstAllowance) / sp.Seconds(); e > est {
			est, span = e, sp
		}
	}
	return est, span
}

// successSends returns the send times of the logged successes sent in [from, ts), oldest
// first. It reads the fit's log, which reaches further back than the samples (a window
// limiter's whole quota, taken in a burst, must be counted). It runs on refusals only, so a
// fresh slice costs nothing that matters.
func (c *Controller) successSends(from, ts nanos) []nanos {
	var sends []nanos
	for _, r := range c.fitLog {
		if r.sig == Success && r.sent >= from && r.sent < ts {
			sends = append(sends, r.sent)
		}
	}
	slices.Sort(sends)
	return sends
}

// recentAccepted is the success rate over the RateWindow before ts, by send time.
func (c *Controller) recentAccepted(ts nanos) float64 {
	from := ts - nanos(c.cfg.RateWindow)
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
	return float64(ok) / c.cfg.RateWindow.Seconds()
}

// decreaseWindow is the decrease on a latency signal: the window becomes the concurrency that
// kept latency at baseline, at least one less than now: by Little's law, accepted rate ×
// baseline holding time, or, if more, the highest concurrency at send at which recent
// successes had baseline latency (Little's law lags behind a window that has just grown). The
// rate is left alone: the window is what bounds queueing.
func (c *Controller) decreaseWindow(now time.Time) {
	w := c.Window()
	hold := c.baseline + c.bodyTime()
	target := max(c.goodConcurrency(w-1), int(math.Round(c.acceptedRate(now)*hold.Seconds())))
	target = min(max(target, c.cfg.MinWindow), w-1)
	// Patience: back to the same window as last time means the probe above it failed again;
	// probe less often.
	if target == c.latencyWindow {
		c.windowPatience = min(2*max(c.windowPatience, 1), maxWindowPatience)
	} else {
		c.windowPatience = 1
	}
	med := quantile(c.recentLatencies(c.lastDecrease, 0), 0.5)
	c.latencyCheck = latencyCheck{pending: true, window: c.window, bound: c.latencyBound, median: med,
		counts: c.countLatencies(c.lastDecrease), from: toNanos(now) + 2*nanos(med)}
	c.window, c.latencyWindow = float64(target), target
	c.latencyBound = true
	if c.slowStart {
		c.slowStart = false
		c.plateau, c.epochRate, c.elapsed = c.rate, c.rate, 0
	}
	c.startEpoch(now)
}

// goodConcurrency returns the concurrency just below the lowest level at which recently sent
// successes were mostly slow (latency above the p90 yardstick), at most top; if no level
// up to top+1 was, the highest level seen (at most top), since every level seen kept most
// requests fast. Concurrency is counted at send, so it reads off the samples the number of our
// requests the host can hold before it queues.
func (c *Controller) goodConcurrency(top int) int {
	thr := c.ref.t90 // known: only a latency signal leads here
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

// bodyTime is the median time between response headers and completion of recent successes.
func (c *Controller) bodyTime() time.Duration {
	ds := c.scratch[:0]
	for i := 0; i < min(c.samples.n, c.cfg.SampleWindow*2) && len(ds) < c.cfg.SampleWindow; i++ {
		if s := c.samples.back(i); s.sig == Success && s.lat > 0 {
			ds = append(ds, max(time.Duration(s.done-s.sent)-s.lat, 0))
		}
	}
	return quantile(ds, 0.5)
}

// updateBaseline refreshes the baseline latency after a success with a latency. The baseline
// is a low quantile (p10) of the latest SampleWindow latencies (the minimum while there are
// fewer than 10), followed down at once. It follows up only the p10 of requests that were sent
// alone (nothing else of ours in flight), with time constant BaselineForget: latency measured
// under our own load must not become the new normal, or queueing we cause would creep in.
// To save work it looks again only every fourth sample, unless s is faster than the baseline.
func (c *Controller) updateBaseline(now time.Time, s *sample) {
	c.baselineTick++
	if c.baseline > 0 && !c.baselineProvisional && s.lat >= c.baseline && c.baselineTick%4 != 0 {
		return
	}
	defer func() { c.baselineAt = now }()
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
	case c.baselineProvisional && len(ds) >= 10, c.baseline == 0, low < c.baseline && !c.baselineProvisional:
		c.baseline, c.baselineProvisional = low, false
		return
	}
	if alone := c.loneLatencies(); len(alone) >= 10 {
		if p := quantile(alone, 0.10); p > c.baseline {
			f := min(now.Sub(c.baselineAt).Seconds()/c.cfg.BaselineForget.Seconds(), 1)
			c.baseline += time.Duration(f * float64(p-c.baseline))
		}
	}
}

// recentLatencies returns the latencies of the newest SampleWindow successes sent at or after
// since whose concurrency at send was at least minConc, in c.scratch.
func (c *Controller) recentLatencies(since nanos, minConc int) []time.Duration {
	ds := c.scratch[:0]
	for i := 0; i < c.samples.n && len(ds) < c.cfg.SampleWindow; i++ {
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
	for i := 0; i < c.samples.n && len(ds) < c.cfg.SampleWindow; i++ {
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
	from, far := t-nanos(c.cfg.RateWindow), t-nanos(8*c.cfg.RateWindow)
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
		return float64(ok) / c.cfg.RateWindow.Seconds()
	}
	// gaps[0] is from the newest completion to now; the rest are between completions. n
	// completions span about n inter-completion gaps: the n−1 measured plus one typical one.
	med := quantile(gaps[1:], 0.5) // sorts gaps[1:] in place; only their sum is needed below
	clip := max(3*med, 2*c.baseline, time.Duration(2/c.rate*float64(time.Second)), time.Millisecond)
	active := min(gaps[0], clip) + med
	for _, g := range gaps[1:] {
		active += min(g, clip)
	}
	if active <= 0 {
		return float64(ok) / c.cfg.RateWindow.Seconds()
	}
	return float64(ok) / active.Seconds()
}
