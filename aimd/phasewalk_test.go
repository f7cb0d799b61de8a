package aimd

import (
	"slices"
	"testing"
	"time"
)

// phaseWalk crawls a host behind a token bucket (limit req/s, burst, 429 with a one-second
// Retry-After) for span, one request in flight, 10 ms each, and returns the phases
// Stats reported after each outcome, repeats removed.
func phaseWalk(limit, burst float64, span time.Duration) []Phase {
	c := New(Config{}, t0)
	const lat = 10 * time.Millisecond
	tokens, last := burst, t0
	var walk []Phase
	for now := t0; now.Sub(t0) < span; {
		tokens = min(burst, tokens+now.Sub(last).Seconds()*limit)
		last = now
		o := Outcome{Signal: Success, Sent: now, Latency: lat, InFlight: 1}
		next := now.Add(time.Duration(float64(time.Second) / c.Rate()))
		if tokens >= 1 {
			tokens--
		} else {
			o.Signal, o.Pause = Overload, time.Second
			if p := now.Add(time.Second); p.After(next) {
				next = p
			}
		}
		c.Observe(now.Add(lat), o)
		if p := c.Stats().Phase; len(walk) == 0 || walk[len(walk)-1] != p {
			walk = append(walk, p)
		}
		if d := now.Add(lat); d.After(next) {
			next = d
		}
		now = next
	}
	return walk
}

// TestPhaseWalk: the stored phase follows a token-bucket host as docs/aimd.md tells it: slow
// start until the first refusal, a refusal run until the next success, the return to the
// measured limit, then the probe.
func TestPhaseWalk(t *testing.T) {
	t.Parallel()
	walk := phaseWalk(10, 2, 3*time.Minute)
	t.Logf("phases: %v", walk)
	if len(walk) < 2 || walk[0] != PhaseSlowStart || walk[1] != PhaseRefusalRun {
		t.Fatalf("phases %v: want slow start, then a refusal run", walk)
	}
	for _, want := range []Phase{PhaseReturn, PhaseProbe} {
		if !slices.Contains(walk, want) {
			t.Errorf("phases %v: no %v", walk, want)
		}
	}
	for i, p := range walk[:len(walk)-1] {
		if p == PhaseRefusalRun && walk[i+1] == PhaseSlowStart {
			t.Errorf("phases %v: a refusal run ended in slow start on a host that accepts", walk)
		}
	}
}
