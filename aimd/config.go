package aimd

import (
	"math"
	"time"
)

// Config is the controller's policy, plain data. A zero field takes the default written next to
// it; Config{} is a valid configuration. Out-of-range values are clamped (see each field).
type Config struct {
	InitialRate float64 // req/s at start; default 2 (--initial-rate); clamped into [MinRate, MaxRate]
	MinRate     float64 // floor, req/s; default 0.1 (--min-rate)
	MaxRate     float64 // ceiling, req/s; default 1000 (--max-rate); raised to MinRate if below it

	InitialWindow int // requests in flight at start; default 2
	MinWindow     int // default 1
	MaxWindow     int // default 8 (--host-concurrency); raised to MinWindow if below it

	// Slow start. While no congestion signal has been seen, the rate doubles per
	// SlowStartInterval (default 125ms) of time in which the rate was actually used; the interval is stretched to at least twice the baseline latency
	// and one sending interval, so that feedback arrives before the next step. The window
	// grows by one per success that found it full (doubling per round trip, as in TCP).
	SlowStartInterval time.Duration

	// Decrease on Overload or Failure (see the package documentation for the measurement): the
	// new rate is Beta × the measured limit (default 0.97), never below MinBeta × the sending
	// rate (default 0.5: at most one halving per epoch; also the cut when nothing was
	// measured). After slow start the plateau the rate returns to is PlateauFactor × the last
	// accepted sending rate (default 0.98: just under the limit).
	Beta          float64
	MinBeta       float64
	PlateauFactor float64

	// Increase after a decrease, on a clock that runs only while the rate is used: a linear
	// return to the plateau K within ReturnTime (default 5s), then a convex (cubic) probe above
	// it, rate = K·(1 + 0.1·(t/ProbeTime)³), +10% after ProbeTime (default 30s, and at least
	// ProbeRequests (default 400) requests at the plateau rate, so that slow hosts are probed
	// no more often per page than fast ones; doubled, up to 4×, each time a refusal recurs at
	// the same rate; and at least 20 × the last refusal's Retry-After pause, up to an hour).
	// A plateau well below the last refused rate is raised by binary search, one step per
	// ReturnTime. Reaching RestartFactor × the plateau (default 1.25) without a signal
	// re-enters slow start: the limit has risen.
	//
	// On a host whose last refusal did not pause it (no Retry-After: nginx's limit_req, most
	// proxies) the return takes 0.4 × ReturnTime and the search steps come after 20 successes
	// instead of 50: there a refusal costs one retry, not seconds of silence.
	ReturnTime    time.Duration
	ProbeTime     time.Duration
	ProbeRequests int
	RestartFactor float64

	// Latency signal (see the package doc): among the latest SampleWindow successes (default
	// 32, at least 20) sent since the last decrease, more are slower than LatencyFactor
	// (default 1.2) × the median or the p90 of the host's reference latencies (requests sent
	// alone), and at least LatencyMinExcess (default 2ms) more, than the host's own share
	// explains. Baseline, reported in Stats and used as a holding time, is the 10th percentile
	// of recent success latencies, followed down at once and up, only by requests sent alone,
	// with time constant BaselineForget (default 30s).
	LatencyFactor    float64
	LatencyMinExcess time.Duration
	SampleWindow     int
	BaselineForget   time.Duration

	// WindowProbe: after slow start, the window grows by one after WindowProbe × window
	// successes that found it full (default 64).
	WindowProbe int

	// RateWindow: the accepted completion rate (Stats.AcceptedRate, and Little's law on a
	// latency signal) is measured over this much recent active time (default 1s), stretched to
	// hold at least 8 completions.
	RateWindow time.Duration
}

// Defaults for the zero fields of Config.
const (
	DefaultInitialRate       = 2.0
	DefaultMinRate           = 0.1
	DefaultMaxRate           = 1000.0
	DefaultInitialWindow     = 2
	DefaultMinWindow         = 1
	DefaultMaxWindow         = 8
	DefaultSlowStartInterval = 125 * time.Millisecond
	DefaultBeta              = 0.97
	DefaultMinBeta           = 0.5
	DefaultPlateauFactor     = 0.98
	DefaultReturnTime        = 5 * time.Second
	DefaultProbeTime         = 30 * time.Second
	DefaultProbeRequests     = 400
	DefaultRestartFactor     = 1.25
	DefaultLatencyFactor     = 1.2
	DefaultLatencyMinExcess  = 2 * time.Millisecond
	DefaultSampleWindow      = 32
	DefaultBaselineForget    = 30 * time.Second
	DefaultWindowProbe       = 64
	DefaultRateWindow        = time.Second
)

func orF(v, d float64) float64 {
	if v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) {
		return v
	}
	return d
}

func orD(v, d time.Duration) time.Duration {
	if v > 0 {
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
	c.MinWindow = orI(c.MinWindow, DefaultMinWindow)
	c.MaxWindow = max(orI(c.MaxWindow, DefaultMaxWindow), c.MinWindow)
	c.InitialWindow = min(max(orI(c.InitialWindow, DefaultInitialWindow), c.MinWindow), c.MaxWindow)
	c.SlowStartInterval = orD(c.SlowStartInterval, DefaultSlowStartInterval)
	c.Beta = unit(c.Beta, DefaultBeta)
	c.MinBeta = min(unit(c.MinBeta, DefaultMinBeta), c.Beta)
	c.PlateauFactor = unit(c.PlateauFactor, DefaultPlateauFactor)
	c.ReturnTime = orD(c.ReturnTime, DefaultReturnTime)
	c.ProbeTime = orD(c.ProbeTime, DefaultProbeTime)
	c.ProbeRequests = orI(c.ProbeRequests, DefaultProbeRequests)
	c.RestartFactor = orF(c.RestartFactor, DefaultRestartFactor)
	if c.RestartFactor <= 1 {
		c.RestartFactor = DefaultRestartFactor
	}
	c.LatencyFactor = orF(c.LatencyFactor, DefaultLatencyFactor)
	if c.LatencyFactor <= 1 {
		c.LatencyFactor = DefaultLatencyFactor
	}
	c.LatencyMinExcess = orD(c.LatencyMinExcess, DefaultLatencyMinExcess)
	c.SampleWindow = max(orI(c.SampleWindow, DefaultSampleWindow), minSamples)
	c.BaselineForget = orD(c.BaselineForget, DefaultBaselineForget)
	c.WindowProbe = orI(c.WindowProbe, DefaultWindowProbe)
	c.RateWindow = orD(c.RateWindow, DefaultRateWindow)
	return c
}

// unit returns v if it lies in (0, 1], else d.
func unit(v, d float64) float64 {
	if v > 0 && v <= 1 {
		return v
	}
	return d
}
