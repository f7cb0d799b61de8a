package aimd

import (
	"testing"
	"time"
)

// BenchmarkObserve measures one Observe at a steady 100 req/s with 4 in flight.
func BenchmarkObserve(b *testing.B) {
	c := New(Config{InitialRate: 100, MaxRate: 100}, t0)
	now := t0
	for i := 0; b.Loop(); i++ {
		sent := now.Add(-40 * time.Millisecond)
		c.Observe(now, Outcome{Signal: Success, Sent: sent, Latency: 40 * time.Millisecond})
		now = now.Add(10 * time.Millisecond)
	}
}
