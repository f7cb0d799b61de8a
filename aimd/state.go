package aimd

import (
	"cmp"
	"math"
	"time"
)

// StateVersion is the version of State that Controller.State writes. Versions 0 to 3 hold the
// same fields (version 2 also held inner parts, which are not read); a later version is ignored.
const StateVersion = 3

// Stats is a snapshot of a controller, for status displays.
type Stats struct {
	Rate         float64       // allowed rate now, req/s (as Rate())
	Window       int           // allowed requests in flight now (as Window())
	P95          time.Duration // p95 latency of the latest successes (0 until there are some)
	Baseline     time.Duration // the host's own low-load latency (0 until measured)
	Phase        Phase         // where the rate is on its way
	Plateau      float64       // rate the controller holds just under after a decrease (0 in the first slow start)
	Decreases    int           // congestion epochs: rate or window decreases
	OverLimit    int           // Overload outcomes seen (429/503), stale ones included
	Failures     int           // Failure outcomes seen
	Neutral      int           // Neutral outcomes seen
	LastDecrease time.Time     // zero if none
	AcceptedRate float64       // successes per second of recent active time, as of the latest outcome
	Stated       float64       // the rate the host states and the controller trusts, req/s; 0: none
}

// Stats returns a snapshot. It does not change the controller's decisions.
func (c *Controller) Stats() Stats {
	st := Stats{Rate: c.Rate(), Window: c.Window(), P95: c.p95(), Baseline: c.lat.baseline, Phase: c.phase,
		Plateau: c.curve.plateau, Decreases: c.counts.decreases, OverLimit: c.counts.overLimit,
		Failures: c.counts.failures, Neutral: c.counts.neutral, AcceptedRate: c.acceptedRate(c.last)}
	if c.epoch.start != never {
		st.LastDecrease = time.Unix(0, int64(c.epoch.start))
	}
	if c.stated.trust == statedTrusted {
		st.Stated = c.stated.rate
	}
	return st
}

// p95 is the p95 of the latest successes' latencies, or the restored State.P95 before any.
func (c *Controller) p95() time.Duration {
	if ds := c.latencies(false); len(ds) > 0 {
		return quantile(ds, 0.95)
	}
	return c.savedP95
}

// State is what a controller has learned about a host, to persist between runs. All fields are
// plain and JSON-encodable; the zero State restores to a fresh controller.
type State struct {
	Version      int           `json:"version,omitempty"`    // StateVersion when written; 0: before versions
	Rate         float64       `json:"rate"`                 // req/s
	Window       int           `json:"window"`               // requests in flight
	Plateau      float64       `json:"plateau,omitempty"`    // req/s; 0 = none learned yet
	Baseline     time.Duration `json:"baseline,omitempty"`   // low-load latency; re-measured after Restore
	SlowStart    bool          `json:"slow_start,omitempty"` // no congestion had been seen
	Decreases    int           `json:"decreases,omitempty"`
	OverLimit    int           `json:"over_limit,omitempty"`
	Failures     int           `json:"failures,omitempty"`
	P95          time.Duration `json:"p95,omitempty"`           // Stats().P95 when saved: shown, never used for a decision
	RefusalPause time.Duration `json:"refusal_pause,omitempty"` // the last refusal's pause: it spaces the probe (R6)
	// The background failure share, the outcomes it was learned from, and the rate of the first
	// Failure cut it is learned under (R8): a resumed crawl does not relearn them.
	FailureShare   float64 `json:"failure_share,omitempty"`
	FailureSamples int     `json:"failure_samples,omitempty"`
	FailCut        float64 `json:"fail_cut,omitempty"`
}

// State returns the learned state.
func (c *Controller) State() State {
	return State{Version: StateVersion, Rate: c.rate, Window: c.Window(), Plateau: c.curve.plateau,
		Baseline: c.lat.baseline, SlowStart: c.inSlowStart(), Decreases: c.counts.decreases,
		OverLimit: c.counts.overLimit, Failures: c.counts.failures, P95: c.p95(), RefusalPause: c.pace.pause,
		FailureShare: c.fails.base, FailureSamples: c.fails.older, FailCut: c.fails.cut.v}
}

// Restore returns a controller that resumes from s at now: at its rate and window (clamped to
// cfg), holding under its plateau and probing above it, or still in slow start if it had seen
// no congestion. Invalid fields of s, and a State of a later version, are ignored. The restored
// baseline is provisional: the first measurement replaces it.
func Restore(cfg Config, s State, now time.Time) *Controller {
	c := New(cfg, now)
	if s.Version > StateVersion {
		return c
	}
	learned := s.Rate > 0 && !s.SlowStart
	c.resume(validRate(s.Rate), s.Window, !learned)
	if s.Baseline > 0 {
		c.lat.baseline, c.lat.src, c.lat.at = s.Baseline, baselineRestored, now
	}
	c.counts.decreases, c.counts.overLimit, c.counts.failures = max(s.Decreases, 0), max(s.OverLimit, 0), max(s.Failures, 0)
	c.pace.pause = max(s.RefusalPause, 0)
	c.savedP95 = min(max(s.P95, 0), time.Hour) // shown only; an hour bounds a damaged value
	if s.FailureShare >= 0 && s.FailureShare <= 1 && s.FailureSamples > 0 {
		c.fails.base, c.fails.older = s.FailureShare, min(s.FailureSamples, memory)
	}
	if r := validRate(s.FailCut); r > 0 {
		c.fails.cut.set(r)
	}
	if k := &c.curve; learned {
		k.plateau, k.from = cmp.Or(validRate(s.Plateau), c.rate), c.rate
		if c.rate > k.plateau { // resume the probe at the time on the curve that gives the rate
			x := math.Cbrt((c.rate/k.plateau - 1) / probeGain)
			k.elapsed = time.Duration(x * c.probeSeconds() * float64(time.Second))
		}
	}
	c.place()
	c.record(now, true) // in place of New's point
	return c
}

// validRate is r if it is a positive finite rate, else 0.
func validRate(r float64) float64 {
	if r > 0 && !math.IsInf(r, 0) {
		return r
	}
	return 0
}

// Hint returns a controller started from a rate and window learned elsewhere (another crawl's
// saved State): a rate above InitialRate is taken as Restore takes a saved one, with the window
// at least InitialWindow; any other rate gives New's controller.
func Hint(cfg Config, rate float64, window int, now time.Time) *Controller {
	c := New(cfg, now)
	if r := validRate(rate); r > c.cfg.InitialRate {
		return Restore(c.cfg, State{Rate: r, Window: max(window, c.cfg.InitialWindow)}, now)
	}
	return c
}
