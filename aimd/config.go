package aimd

import (
	"math"
	"time"
)

// Config is the controller's policy, plain data, one line per field. A zero field takes the
// default written next to it (the Default constants below); Config{} is a valid configuration.
// Out-of-range values are clamped. docs/aimd.md gives the rule each field serves.
type Config struct {
	InitialRate    float64       // req/s at start (--initial-rate); 2; clamped into [MinRate, MaxRate]
	MinRate        float64       // the rate's floor, req/s (--min-rate); 0.1
	MaxRate        float64       // the rate's ceiling, req/s (--max-rate); 1000; raised to MinRate if below it
	InitialWindow  int           // requests in flight at start; 2
	MinWindow      int           // the window's floor; 1
	MaxWindow      int           // the window's ceiling (--host-concurrency); 8; raised to MinWindow if below it
	Beta           float64       // share of a measured or stated limit the rate is set to (R3, R4, R8, R11); 0.97
	MinBeta        float64       // the deepest cut one decrease makes, as a share of the rate (R4); 0.5
	ReturnTime     time.Duration // the linear return to the plateau, and a search step's spacing (R6, R7); 5s
	ProbeRequests  int           // the probe time stretches to this many sending intervals at the plateau (R7); 400
	RestartFactor  float64       // a probe this far above the plateau restarts slow start; a search stops this close (R3, R6); 1.25
	LatencyFactor  float64       // a success this many times the reference latency is slow (R10); 1.2
	SampleWindow   int           // the latest successes the latency signal judges, at least 20 (R10); 32
	BaselineForget time.Duration // the time constant the latency baseline rises with (R10); 30s
}

// Defaults for the zero fields of Config.
const (
	DefaultInitialRate    = 2.0
	DefaultMinRate        = 0.1
	DefaultMaxRate        = 1000.0
	DefaultInitialWindow  = 2
	DefaultMinWindow      = 1
	DefaultMaxWindow      = 8
	DefaultBeta           = 0.97
	DefaultMinBeta        = 0.5
	DefaultReturnTime     = 5 * time.Second
	DefaultProbeRequests  = 400
	DefaultRestartFactor  = 1.25
	DefaultLatencyFactor  = 1.2
	DefaultSampleWindow   = 32
	DefaultBaselineForget = 30 * time.Second
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
	c.Beta = unit(c.Beta, DefaultBeta)
	c.MinBeta = min(unit(c.MinBeta, DefaultMinBeta), c.Beta)
	c.ReturnTime = orD(c.ReturnTime, DefaultReturnTime)
	c.ProbeRequests = orI(c.ProbeRequests, DefaultProbeRequests)
	c.RestartFactor = orF(c.RestartFactor, DefaultRestartFactor)
	if c.RestartFactor <= 1 {
		c.RestartFactor = DefaultRestartFactor
	}
	c.LatencyFactor = orF(c.LatencyFactor, DefaultLatencyFactor)
	if c.LatencyFactor <= 1 {
		c.LatencyFactor = DefaultLatencyFactor
	}
	c.SampleWindow = max(orI(c.SampleWindow, DefaultSampleWindow), minSamples)
	c.BaselineForget = orD(c.BaselineForget, DefaultBaselineForget)
	return c
}

// unit returns v if it lies in (0, 1], else d.
func unit(v, d float64) float64 {
	if v > 0 && v <= 1 {
		return v
	}
	return d
}
