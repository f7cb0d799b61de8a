package retry

import (
	"testing"
	"time"
)

// TestGiveUpIdle: an idle crawl waits for a host's re-checks that fall within IdleUnreachable
// of its first failure, and no longer.
func TestGiveUpIdle(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	for _, tc := range []struct {
		name             string
		since, next, now time.Time
		want             bool
	}{
		{"first failure, check in 1s", t0, at(1), at(0), false},
		{"check due at the deadline", t0, at(20), at(7), false},
		{"check due past the deadline", t0, at(31), at(15), true},
		{"deadline passed", t0, at(21), at(20), true},
		{"long past", t0, at(60), at(45), true},
		{"a failure long ago, a recent streak", at(100), at(104), at(102), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := GiveUpIdle(tc.since, tc.next, tc.now); got != tc.want {
				t.Errorf("GiveUpIdle(since %v, next %v, now %v) = %v, want %v",
					tc.since.Sub(t0), tc.next.Sub(t0), tc.now.Sub(t0), got, tc.want)
			}
		})
	}
	// The robots.txt backoff (1s, 2s, 4s, 8s, 16s …): an idle crawl gives up at its fifth
	// failure, 15 s after the first.
	since, now, wait := t0, t0, time.Second
	for tries := 1; ; tries++ {
		next := now.Add(wait)
		if GiveUpIdle(since, next, now) {
			if d := now.Sub(since); d != 15*time.Second || tries != 5 {
				t.Errorf("gave up after %d tries, %v after the first; want 5 tries, 15s", tries, d)
			}
			break
		}
		now, wait = next, wait*2
	}
}
