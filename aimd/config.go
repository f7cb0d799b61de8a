package aimd

import (
	"cmp"
	"time"
)

// Config is the controller's policy, plain data. A zero field takes the default written next to
// it (Config{} is valid); out-of-range values are clamped.
type Config struct {
	InitialRate   float64 // req/s at start (--initial-rate); 2; clamped into [MinRate, MaxRate]
	MinRate       float64 // the rate's floor, req/s (--min-rate); 0.1
	MaxRate       float64 // the rate's ceiling, req/s (--max-rate); 1000; raised to MinRate if below it
	InitialWindow int     // requests in flight at start; 2
	MaxWindow     int     // the window's ceiling (--host-concurrency); 8
}

// Defaults for the zero fields of Config.
const (
	DefaultInitialRate   = 2.0
	DefaultMinRate       = 0.1
	DefaultMaxRate       = 1000.0
	DefaultInitialWindow = 2
	DefaultMaxWindow     = 8
)

// withDefaults returns c with zero or invalid fields defaulted and its ranges made consistent.
func (c Config) withDefaults() Config {
	c.MinRate = cmp.Or(validRate(c.MinRate), DefaultMinRate)
	c.MaxRate = max(cmp.Or(validRate(c.MaxRate), DefaultMaxRate), c.MinRate)
	c.InitialRate = min(max(cmp.Or(validRate(c.InitialRate), DefaultInitialRate), c.MinRate), c.MaxRate)
	c.MaxWindow = cmp.Or(max(c.MaxWindow, 0), DefaultMaxWindow)
	c.InitialWindow = min(cmp.Or(max(c.InitialWindow, 0), DefaultInitialWindow), c.MaxWindow)
	return c
}

// The tunables, one line each, with the rules they serve (docs/aimd.md, Tunables).
const (
	memory            = 128                    // samples, change points and outcomes a background share follows, remembered (about 10 KB per host); 16 × it, requests in the send log (R4, R7)
	beta              = 0.97                   // share of a measured or stated limit the rate is set to; refusals within 1 − beta of one rate find one limit; probes cost at most 1 − beta of the time in pauses (R3, R4, R6, R7, R10)
	minBeta           = 0.5                    // the deepest cut one decrease makes, as a share of the rate (R4)
	returnTime        = 5 * time.Second        // the linear return to the plateau, a search step's spacing, how long the served peak stands (R5, R8)
	probeTime         = 30 * time.Second       // the cubic probe's time to probeGain above the plateau; the baseline's rise time constant (R6, R9)
	probeGain         = 0.1                    // the probe's rise above the plateau after one probe time (R6)
	probeRequests     = 400                    // the probe time stretches to this many sending intervals at the plateau (R6)
	maxStretch        = 4                      // the probe time stretches to at most this × probeTime, the window probe interval to this × searchSends (R6, R9)
	maxPauseProbe     = time.Hour              // the probe time is at least the last refusal's pause ÷ (1 − beta), up to this (R6)
	quickShare        = 0.4                    // where refusals cost no pause, the return time and searchSends shrink to this share (R5)
	searchSends       = 50                     // fewest successes between two upward steps: two search steps (R5); after slow start, × window, of successes that found the window full, two window probes (R9)
	restartFactor     = 1.25                   // rates within this factor are close: a probe this far above the plateau restarts slow start, a search stops this close, slow start sustained a rate it accepted this close to, a success this much slower than the reference latency is slow (R3, R5, R9)
	slowStartInterval = 125 * time.Millisecond // slow start doubles the rate per this much time in use; 8 of them: the accepted rate's span (R3)
	plateauFactor     = 0.98                   // share of slow start's last accepted rate the climb returns to (R3, R5)
	minSpan           = 800 * time.Millisecond // a refusal measures the limit only over this much sending (R4, R7)
	burstAllowance    = 1.5                    // tokens a bucket held beyond the refill when an epoch began (R4, R7)
	sameRate          = 0.01                   // rates within this share are one: a stated rate restated (R10), a rate the history need not note (R2); well under 1 − beta
	refutations       = 2                      // refusals under a stated limit that refute it (R10)
	evidence          = 3                      // the fewest outcomes that tell something: Failures of the last 8 that make a cluster (R8), successes an episode is measured by (R7), reference latencies to judge by (R9)
	failureBaseMax    = 0.25                   // the background share counts up to this (R8)
)

// Arithmetic of the tunables above, not tuned on their own.
const (
	recent     = memory / 4            // the latest outcomes an estimate reads: successes for latency, the share's first lesson (R8, R9)
	rateWindow = 8 * slowStartInterval // the span the accepted rate is measured over, stretched to 8 completions (R3, R9); twice it, the sending rate's (R2)
)
