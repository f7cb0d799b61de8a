package hostlimit

import (
	"testing"
	"time"

	"github.com/crawl-project/crawl/aimd"
)

// bucketHost is a server-side token bucket of rate l and size b, answering at once on the fake
// clock.
type bucketHost struct {
	l, b, level float64
	last        time.Time
}

func (s *bucketHost) answer(t time.Time) aimd.Signal {
	s.level = min(s.b, s.level+t.Sub(s.last).Seconds()*s.l)
	s.last = t
	if s.level < 1 {
		return aimd.Overload
	}
	s.level--
	return aimd.Success
}

// crawlBucket sends to srv through r's gate for key as fast as the gate admits, on fake time
// from start, each answer 1 ms after its send (a refusal pausing the host 1 s), until d has
// passed; it returns the time it stopped.
func crawlBucket(t *testing.T, r *Registry, key string, srv *bucketHost, start time.Time, d time.Duration) time.Time {
	t.Helper()
	now := start
	for now.Before(start.Add(d)) {
		tk, ready := r.TryAdmit(now, key)
		if tk == nil {
			if ready.IsZero() {
				t.Fatal("window full with nothing in flight")
			}
			now = ready
			continue
		}
		o := aimd.Outcome{Signal: srv.answer(now), Latency: time.Millisecond}
		if o.Signal == aimd.Overload {
			o.Pause = time.Second
		}
		now = now.Add(time.Millisecond)
		tk.Done(now, o)
	}
	return now
}

// TestGateBurstFollowsController: once aimd's bucket fit holds a host's rate and shows the
// host's bucket holds 5 tokens, the gate lets the controller's Burst (2) leave back to back
// after an idle spell, then paces at the rate; a Crawl-delay ceiling puts it back to 1.
func TestGateBurstFollowsController(t *testing.T) {
	r, _ := newTestRegistry(t, Config{AIMD: aimd.Config{MaxWindow: 8}}, nil)
	srv := &bucketHost{l: 50, b: 5, level: 5, last: t0}
	now := crawlBucket(t, r, "a.test", srv, t0, 40*time.Second) // past the first probe (a 1 s pause ÷ (1 − beta))
	s := mustHost(t, r, now, "a.test")
	if s.Burst != 2 || s.OverLimit > 3 {
		t.Fatalf("after 40 s against 50/s burst 5: Burst %d with %d refusals, want 2 with at most 3 (rate %.2f)", s.Burst, s.OverLimit, s.Rate)
	}
	now = now.Add(time.Second) // idle: the gate's bucket fills to Burst
	for i := range s.Burst {
		tk, _ := r.TryAdmit(now, "a.test")
		if tk == nil {
			t.Fatalf("after an idle second: request %d of %d refused", i+1, s.Burst)
		}
		tk.Done(now.Add(time.Millisecond), aimd.Outcome{Signal: aimd.Success, Latency: time.Millisecond})
	}
	if tk, _ := r.TryAdmit(now, "a.test"); tk != nil {
		t.Fatalf("admitted %d back to back, want Burst = %d", s.Burst+1, s.Burst)
	}
	r.SetCeiling("a.test", 40)
	if s := mustHost(t, r, now, "a.test"); s.Burst != 1 {
		t.Fatalf("under a Crawl-delay: Burst %d, want 1", s.Burst)
	}
}
