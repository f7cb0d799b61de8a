package aimd

import "time"

// Hint returns a controller started from a rate and window learned elsewhere (another crawl's
// saved State): a starting point, never a limit. A rate above cfg's InitialRate is taken, at
// most MaxRate, as Restore takes a saved rate (held as the plateau the controller probes
// above), with the window, at least InitialWindow and at most MaxWindow. Any other rate (not
// above InitialRate, negative, NaN, infinite) gives the controller New makes: a hint never
// starts a host slower than knowing nothing would.
func Hint(cfg Config, rate float64, window int, now time.Time) *Controller {
	c := New(cfg, now)
	if r := validRate(rate); r > c.cfg.InitialRate {
		return Restore(c.cfg, State{Rate: r, Window: max(window, c.cfg.InitialWindow)}, now)
	}
	return c
}
