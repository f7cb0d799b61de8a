package aimd

// servedPeak is the highest success rate (over the RateWindow, by send time) the host answered
// within the last servedMemory: a rate it has just shown it takes.
type servedPeak struct {
	rate float64
	at   nanos // the send time of the success it was measured at
}

// note takes the success rate measured at a success sent at ts: it becomes the peak if it is
// at least as high, or if the peak is older than servedMemory (then the peak errs low).
func (p *servedPeak) note(ts nanos, rate float64) {
	if rate >= p.rate || ts-p.at > nanos(servedMemory) {
		p.rate, p.at = rate, ts
	}
}

// covers reports whether a Failure sent at ts while the host was receiving rs req/s came far
// under the peak: rs ≤ under × a peak measured no more than servedMemory before ts.
// Slowing down cannot relieve such a failure: the host has just answered twice the rate.
func (p *servedPeak) covers(ts nanos, rs, under float64) bool {
	return p.rate > 0 && ts-p.at <= nanos(servedMemory) && rs <= under*p.rate
}
