package aimd

import (
	"testing"
	"time"
)

// TestStatedSetsRate: a stated limit sets the rate just under it at once, from the first
// answer, and holds it there (capped) through a long run of successes; the robots ceiling and
// MaxRate still win; a refusal's statement is not taken (the rate never rises on a refusal),
// the next success's is.
func TestStatedSetsRate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     Config
		ceiling float64
		first   Signal
		stated  float64
		want    float64 // after the first answer; -1: no more than the initial 2 (a refusal's cut)
		hold    float64 // after 60 s of successes stating the same
	}{
		{"at once, just under", Config{}, 0, Success, 20, 19.4, 19.4},
		{"slow host", Config{}, 0, Success, 0.5, 0.485, 0.485},
		{"never past MaxRate", Config{MaxRate: 100}, 0, Success, 5000, 100, 100},
		{"the robots ceiling wins", Config{}, 5, Success, 20, 5, 5},
		{"not on a refusal", Config{}, 0, Overload, 20, -1, 19.4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New(tc.cfg, t0)
			if tc.ceiling > 0 {
				c.SetCeiling(tc.ceiling)
			}
			c.Observe(t0.Add(10*time.Millisecond), Outcome{Signal: tc.first, Sent: t0, Latency: 10 * time.Millisecond, Stated: tc.stated})
			if got := c.Rate(); tc.want < 0 && got > 2 || tc.want >= 0 && !near(got, tc.want, 1e-9) {
				t.Fatalf("after the first answer: rate %.4f, want %.4f", got, tc.want)
			}
			d := &driver{c: c, now: t0.Add(2 * time.Second), lat: 10 * time.Millisecond, stated: tc.stated}
			d.run(60 * time.Second)
			if got := c.Rate(); !near(got, tc.hold, 1e-9) {
				t.Errorf("after 60 s: rate %.4f, want %.4f (phase %v)", got, tc.hold, c.Stats().Phase)
			}
			if got := c.Stats().Stated; got != tc.stated {
				t.Errorf("Stats.Stated = %v, want %v", got, tc.stated)
			}
		})
	}
}

// TestStatedChange: a statement that moves by more than 1% sets the rate again (down or up);
// a smaller move, or an answer stating nothing, changes nothing.
func TestStatedChange(t *testing.T) {
	t.Parallel()
	c := New(Config{}, t0)
	now := t0
	for i, tc := range []struct {
		stated, want float64
	}{{20, 19.4}, {20.1, 19.4}, {0, 19.4}, {10, 9.7}, {40, 38.8}} {
		now = now.Add(100 * time.Millisecond)
		c.Observe(now, Outcome{Signal: Success, Sent: now.Add(-time.Millisecond), Latency: time.Millisecond, Stated: tc.stated})
		if got := c.Rate(); !near(got, tc.want, 1e-9) {
			t.Errorf("answer %d stating %v: rate %.4f, want %.4f", i+1, tc.stated, got, tc.want)
		}
	}
}

// TestStatedRefuted: refusals under a stated limit are answered as today (a decrease), and
// the second, in a later epoch, refutes the limit: later statements are ignored and the rate
// is learned above the stated one.
func TestStatedRefuted(t *testing.T) {
	t.Parallel()
	c := New(Config{}, t0)
	d := &driver{c: c, now: t0, lat: 10 * time.Millisecond, pause: time.Second, stated: 20}
	d.run(5 * time.Second)
	if c.Stats().Stated != 20 || !near(c.Rate(), 19.4, 1e-9) {
		t.Fatalf("before: stated %v, rate %.3f", c.Stats().Stated, c.Rate())
	}
	d.refuse(Overload)
	if c.Stats().Decreases != 1 || c.Stats().Stated != 20 || c.Rate() >= 19.4 {
		t.Fatalf("after one refusal: decreases %d, stated %v, rate %.3f; want a decrease, still trusted",
			c.Stats().Decreases, c.Stats().Stated, c.Rate())
	}
	d.run(10 * time.Second)
	d.refuse(Overload)
	if c.Stats().Decreases != 2 || c.Stats().Stated != 0 {
		t.Fatalf("after the second refusal: decreases %d, stated %v; want 2, refuted", c.Stats().Decreases, c.Stats().Stated)
	}
	cut := c.Rate()
	d.run(120 * time.Second)
	if c.Rate() <= 19.4 || c.Stats().Stated != 0 {
		t.Errorf("refuted: rate %.3f (cut to %.3f), stated %v; want the rate learned past the refuted 19.4, statements ignored",
			c.Rate(), cut, c.Stats().Stated)
	}
}
