package aimd

import (
	"testing"
	"time"
)

// TestBurstFromFit: Burst is 1 until a bucket fit holds the rate, then half the least bucket
// size the fit allows (at most maxBurst), and 1 again after any refusal, under a stated limit,
// and on a host whose fit bounded no size (a fixed window). The state carries it.
func TestBurstFromFit(t *testing.T) {
	t.Parallel()
	if got := New(Config{}, t0).Burst(); got != 1 {
		t.Fatalf("a new controller: Burst %d, want 1", got)
	}
	tests := []struct {
		name     string
		host     simHost
		lo, hi   int
		pages    int
		duration float64
	}{
		{"50/s burst 5", simHost{limit: 50, burst: 5}, 2, 2, 1000, 0},
		{"20/s burst 8", simHost{limit: 20, burst: 8}, 2, 4, 400, 0},
		{"10/s burst 3: too small to share", simHost{limit: 10, burst: 3}, 1, 1, 150, 0},
		{"10/s burst 2", simHost{limit: 10, burst: 2}, 1, 1, 150, 0},
		{"8/s burst 1", simHost{limit: 8, burst: 1}, 1, 1, 100, 0},
		{"fixed window 50 per 10 s", simHost{window: 10, quota: 50}, 1, 1, 0, 120},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc := simConfig{host: tc.host, pages: tc.pages, duration: 300, rtt: 0.001, jitter: 0.0005, seed: 1}
			if tc.duration > 0 {
				sc.duration = tc.duration
			}
			sc.host.service = 0.001
			r := runSim(sc)
			c := r.ctrl
			b := c.Burst()
			t.Logf("Burst %d at rate %.2f (least size allowed %v)", b, c.Rate(), c.fit.size)
			if b < tc.lo || b > tc.hi {
				t.Fatalf("Burst %d, want %d to %d", b, tc.lo, tc.hi)
			}
			if b == 1 {
				return
			}
			s := runSim(sc).ctrl // the same crawl again, then a stated limit
			at := s.last.Add(time.Millisecond)
			s.Observe(at.Add(time.Millisecond), Outcome{Signal: Success, Sent: at, Latency: time.Millisecond, Stated: 100})
			if got := s.Burst(); got != 1 {
				t.Errorf("under a stated limit: Burst %d, want 1", got)
			}
			now := c.last.Add(time.Millisecond)
			c.Observe(now, Outcome{Signal: Overload, Sent: now.Add(-time.Millisecond), Latency: time.Millisecond, Pause: time.Second})
			if got := c.Burst(); got != 1 {
				t.Errorf("after a refusal: Burst %d, want 1", got)
			}
		})
	}
}

// TestSimLateTimer: a pacer whose timer wakes late (a loaded machine's dispatcher) loses the
// lateness from every interval of a burst-1 pacer; with Burst it catches up within the host's
// known bucket, with no more refusals than on time.
func TestSimLateTimer(t *testing.T) {
	t.Parallel()
	for _, late := range []float64{0, 0.005, 0.010} {
		sc := simConfig{host: simHost{limit: 50, burst: 5, service: 0.001}, pages: 1000, duration: 300, rtt: 0.001, jitter: 0.0005, seed: 1, late: late}
		r := runSim(sc)
		share := 20 / r.makespan
		t.Logf("timer up to %.0f ms late: %.3f of the ideal, %d refusals", late*1000, share, r.over)
		if share < 0.85 || r.over > 2 {
			t.Errorf("timer up to %.0f ms late: %.3f of the ideal with %d refusals, want ≥ 0.85 with ≤ 2", late*1000, share, r.over)
		}
	}
}
