package aimd

import (
	"testing"
	"time"
)

// TestQuickStarvedRestarts: a plateau cut to 1.5 req/s after the host sustained 8 (a gate that
// lost the competition for a limit it shares with another gate) on a host whose refusals
// cost no pause restarts slow start once it has held the plateau unrefused for
// QuickReturnTime + ProbeTime / quickStarvedWait (R45). Under R44 alone it stays (1.5 × 4 is
// above InitialRate) and R15 stretches its probe to 2 minutes. The same plateau with a
// Retry-After, under a rate sustained less than 4× above it, under a peak that only slow start
// reached (a big bucket's burst), or above InitialRate is no starved plateau and keeps probing.
func TestQuickStarvedRestarts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                     string
		plateau, peak, sustained float64
		pause                    time.Duration // the last refusal's Retry-After
		want                     starvation
	}{
		{"bare refusals: restarts", 1.5, 8, 8, 0, quickStarved},
		{"floor, bare refusals: R44 after the quick wait", 0.2, 8, 0, 0, quickStarved},
		{"floor, Retry-After: R44", 0.2, 8, 0, time.Second, starved},
		{"Retry-After: keeps probing", 1.5, 8, 8, time.Second, notStarved},
		{"only slow start was faster: keeps probing", 1.5, 200, 1.6, 0, notStarved},
		{"sustained under 4x: keeps probing", 1.5, 8, 5, 0, notStarved},
		{"above InitialRate: keeps probing", 2.5, 20, 20, 0, notStarved},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := New(Config{}, t0)
			c.rate = tc.plateau
			c.curve = curve{plateau: tc.plateau, from: tc.plateau, peak: tc.peak, sustained: tc.sustained}
			c.phase = PhaseProbe
			c.pace.quick, c.pace.pause = tc.pause <= 0, tc.pause
			if got := c.starvation(); got != tc.want {
				t.Fatalf("starvation %d, want %d", got, tc.want)
			}
			d := &driver{c: c, now: t0, lat: 20 * time.Millisecond, pause: tc.pause}
			// The restart comes after the return time and the starved wait of use, plus a
			// sending interval of slack.
			probe := DefaultProbeTime / quickStarvedWait
			if tc.want == starved {
				probe = DefaultProbeTime
			}
			wait := c.returnTime() + probe + time.Duration(float64(time.Second)/tc.plateau)
			d.run(wait)
			restarted := c.Stats().Phase == PhaseSlowStart
			t.Logf("after %v unrefused at %.2f req/s (peak %.1f, sustained %.1f): phase %s, rate %.2f",
				wait, tc.plateau, tc.peak, tc.sustained, c.Stats().Phase, c.Rate())
			if restarted != (tc.want != notStarved) {
				t.Errorf("restarted slow start: %v, want %v", restarted, tc.want != notStarved)
			}
			// Holding the plateau may have made it the rate sustained.
			if s := max(tc.sustained, tc.plateau) / 2; restarted && (c.curve.peak != tc.peak/2 || c.curve.sustained > s) {
				t.Errorf("peak %.2f, sustained %.2f after the restart, want %.2f, at most %.2f (halved)",
					c.curve.peak, c.curve.sustained, tc.peak/2, s)
			}
		})
	}
}
