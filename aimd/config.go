package aimd

import "math"

// Config is the controller's policy, plain data, one line per field: what an operator or a
// library user sets. A zero field takes the default written next to it; Config{} is valid.
// Out-of-range values are clamped.
type Config struct {
	InitialRate   float64 // req/s at start (--initial-rate); 2; clamped into [MinRate, MaxRate]
	MinRate       float64 // the rate's floor, req/s (--min-rate); 0.1
	MaxRate       float64 // the rate's ceiling, req/s (--max-rate); 1000; raised to MinRate if below it
	InitialWindow int     // requests in flight at start; 2
	MinWindow     int     // the window's floor; 1
	MaxWindow     int     // the window's ceiling (--host-concurrency); 8; raised to MinWindow if below it
}

// Defaults for the zero fields of Config.
const (
	DefaultInitialRate   = 2.0
	DefaultMinRate       = 0.1
	DefaultMaxRate       = 1000.0
	DefaultInitialWindow = 2
	DefaultMinWindow     = 1
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
	c.MinWindow = orI(c.MinWindow, DefaultMinWindow)
	c.MaxWindow = max(orI(c.MaxWindow, DefaultMaxWindow), c.MinWindow)
	c.InitialWindow = min(max(orI(c.InitialWindow, DefaultInitialWindow), c.MinWindow), c.MaxWindow)
	return c
}
