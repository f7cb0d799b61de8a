package aimd

import (
	"math"
	"time"
)

// Config is the controller's policy, plain data, one line per field: what an operator or a
// library user sets. A zero field takes the default written next to it; Config{} is valid.
// Out-of-range values are clamped.
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

func orF(v, d float64) float64 {
	if v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) {
		return v
	}
	return d
}

func orI(v, d int) int {
	if v > 0 {
		return v
	}
	return d
}

// withDefaults returns c with zero (or invalid) fields replaced by defaults and ranges made
// consistent.
func (c Config) withDefaults() Config {
	c.MinRate = orF(c.MinRate, DefaultMinRate)
	c.MaxRate = max(orF(c.MaxRate, DefaultMaxRate), c.MinRate)
	c.InitialRate = min(max(orF(c.InitialRate, DefaultInitialRate), c.MinRate), c.MaxRate)
	c.MaxWindow = orI(c.MaxWindow, DefaultMaxWindow)
	c.InitialWindow = min(orI(c.InitialWindow, DefaultInitialWindow), c.MaxWindow)
	return c
}

// The tunables: every constant the controller's behaviour depends on, one line each, by the
// rule they serve (docs/aimd.md). Literals left in the code are an estimator's shape (a median,
// a quantile, a half, a doubling, a 16-outcome log), not tunables.
const (
	// Memory (about 10 KB per host).
	memory     = 128 // samples, rate/window change points and outcomes a background share follows, remembered
	minSamples = 20  // fewest latency samples a p95 or a latency judgement is taken over

	// Policy (R3, R4, R6, R7, R10).
	beta           = 0.97             // share of a measured or stated limit the rate is set to (R3, R4, R8, R11)
	minBeta        = 0.5              // the deepest cut one decrease makes, as a share of the rate (R4)
	returnTime     = 5 * time.Second  // the linear return to the plateau, and a search step's spacing (R6)
	probeRequests  = 400              // the probe time stretches to this many sending intervals at the plateau (R7)
	restartFactor  = 1.25             // a probe this far above the plateau restarts slow start; a search stops this close (R3, R6)
	latencyFactor  = 1.2              // a success this many times the reference latency is slow (R10)
	sampleWindow   = 32               // the latest successes the latency signal judges (R10)
	baselineForget = 30 * time.Second // the time constant the latency baseline rises with (R10)

	// Slow start and the curve (R3, R6, R7).
	slowStartInterval = 125 * time.Millisecond // slow start doubles the rate per this much time in use (R3)
	plateauFactor     = 0.98                   // share of slow start's last accepted rate the climb returns to (R3, R6)
	minActiveGap      = 100 * time.Millisecond // a gap between outcomes counts as time in use up to two sending intervals, at least this (at most returnTime)
	probeGain         = 0.1                    // the probe's rise above the plateau after one probe time
	searchSends       = 50                     // fewest successes between two search steps
	quickShare        = 0.4                    // where refusals cost no pause, the return time and searchSends shrink to this share
	patienceBand      = 0.05                   // a refusal within this share of the last one's rate doubles the probe time
	maxStretch        = 4                      // the probe time stretches to at most this × probeTime
	pauseProbeRatio   = 20                     // the probe time is at least this × the last refusal's pause
	maxPauseProbe     = time.Hour              // ... up to this

	// The decrease and refusal runs (R3, R4, R8).
	minSpan        = 800 * time.Millisecond // a refusal measures the limit only over this much sending
	burstAllowance = 1.5                    // tokens a bucket held beyond the refill when an epoch began
	minMeasured    = 3                      // an episode with fewer successes restarts slow start
	ssSustained    = 0.75                   // slow start's refusal measured nothing under this × its rate accepted

	// The bucket fit (R5).
	fitNarrow = 1.15 // the fit measures the limit when the rates it allows span at most this factor
	fitBeta   = 0.99 // share of the fit's least allowed rate the rate holds at
	maxBurst  = 4    // Burst() at most

	// Failures (R9).
	failureCluster   = 3    // Failures among the last 8 outcomes that make a cluster
	failureBaseMax   = 0.25 // the share counts up to this
	failureBaseUnder = 0.6  // only outcomes sent under this × the cut rate teach the share

	// Latency and the window (R10).
	latencyMinExcess = 2 * time.Millisecond // a slow success is at least this much slower than the reference (R10)
	refMin           = 4                    // fewest reference latencies to judge by

	// Stated limits (R11), and the fit (R5).
	refutations  = 2    // refusals under a rate a model called safe (a stated limit, the fit) that refute it
	statedChange = 0.01 // a stated rate moving by more than this share is a new statement
)

// Derived from the tunables above, not tuned on their own.
const (
	probeTime         = 6 * returnTime          // the cubic probe's time to +10% above the plateau: six return times (R6, R7)
	fitLogCap         = 16 * memory             // requests in the fit's log (16 B each); a full log loses its oldest half
	rateWindow        = 8 * slowStartInterval   // the span the accepted rate is measured over, stretched to 8 completions (R3, R10)
	failureBaseMin    = memory / 4              // outcomes that teach the background share before it is known
	maxWindowPatience = maxStretch * maxStretch // the window probe interval stretches to at most this × windowProbe
	servedMemory      = 2 * returnTime          // how long the served peak stands (R9)
	windowProbe       = memory / 2              // after slow start the window grows by one per this × window successes that found it full (R10)
	refSize           = memory / 2              // reference latencies kept (512 B per host)
)
