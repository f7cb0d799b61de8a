package aimd

// targetKind says what a target's rate is.
type targetKind uint8

const (
	noTarget        targetKind = iota // nothing to search toward
	targetRefused                     // the rate the last refusal was drawn at
	targetBound                       // a bound runEnd set on the search after a refusal run, below the rate that drew the run
	targetSlowStart                   // the rate slow start was refused at, not yet sustained: it may have measured nothing
)

// target is the rate above the plateau that the search climbs toward, and what it is. The
// rate is positive unless the kind is noTarget.
type target struct {
	rate float64
	kind targetKind
}

// set makes rate (of kind k) the target; a rate of 0 clears it.
func (t *target) set(rate float64, k targetKind) {
	if !(rate > 0) {
		*t = target{}
		return
	}
	*t = target{rate: rate, kind: k}
}

// clear drops the target: nothing is searched.
func (t *target) clear() { *t = target{} }

// reached reports whether plateau has come within RestartFactor of PlateauFactor × the
// target: a search has no step left to take.
func (t target) reached(plateau float64, cfg *Config) bool {
	return t.kind != noTarget && plateau*cfg.RestartFactor >= plateauFactor*t.rate
}

// searching reports whether there is a target the plateau has not reached.
func (t target) searching(plateau float64, cfg *Config) bool {
	return t.kind != noTarget && !t.reached(plateau, cfg)
}
