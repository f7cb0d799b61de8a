package hostlimit

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crawl-project/crawl/aimd"
)

// atomicClock is a clock shared by many goroutines; every reading moves it on a little, and
// After fires at once after moving it by d, so Wait never really blocks.
type atomicClock struct{ ns atomic.Int64 }

func (c *atomicClock) Now() time.Time {
	return t0.Add(time.Duration(c.ns.Add(int64(50 * time.Microsecond))))
}

func (c *atomicClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	ch <- t0.Add(time.Duration(c.ns.Add(int64(d))))
	return ch
}

// inflight tracks requests in flight per host as the callers see them, and the maximum.
type inflight struct {
	mu  sync.Mutex
	cur map[string]int
	max map[string]int
}

func (f *inflight) add(host string, d int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cur[host] += d
	f.max[host] = max(f.max[host], f.cur[host])
}

func TestConcurrentNeverExceedsWindow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window int
		evict  bool
		mixed  bool // outcomes move the window; MaxWindow must still hold
	}{
		{"fixed window", 3, false, false},
		{"mixed outcomes", 2, false, true},
		{"with eviction", 2, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &atomicClock{}
			acfg := testAIMD(5000, tc.window)
			acfg.MaxWindow = 4
			limit := tc.window
			if tc.mixed {
				limit = acfg.MaxWindow
			}
			r, _ := newTestRegistry(t, Config{AIMD: acfg, IdleEvict: time.Nanosecond, Now: clk.Now, After: clk.After}, newFakeStore())
			hosts := []string{"a.test", "b.test", "c.test"}
			f := &inflight{cur: map[string]int{}, max: map[string]int{}}
			signals := []aimd.Signal{aimd.Neutral}
			if tc.mixed {
				signals = []aimd.Signal{aimd.Success, aimd.Success, aimd.Success, aimd.Overload, aimd.Failure, aimd.Neutral}
			}
			var admitted atomic.Int64
			var wg sync.WaitGroup
			stop := make(chan struct{})
			if tc.evict {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						if err := r.Evict(clk.Now().Add(time.Hour)); err != nil {
							t.Error(err)
							return
						}
						runtime.Gosched()
					}
				})
			}
			var workers sync.WaitGroup
			for g := range 8 {
				workers.Go(func() {
					for i := range 300 {
						host := hosts[(g+i)%len(hosts)]
						var tk *Ticket
						if g%4 == 0 { // some goroutines block like workers, the rest poll
							var err error
							ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
							tk, err = r.Wait(ctx, host)
							cancel()
							if err != nil {
								t.Error(err)
								return
							}
						} else if tk, _ = r.TryAdmit(clk.Now(), host); tk == nil {
							continue
						}
						admitted.Add(1)
						f.add(host, 1)
						runtime.Gosched() // let others try while this one is in flight
						f.add(host, -1)
						o := aimd.Outcome{Signal: signals[i%len(signals)], Latency: time.Millisecond}
						tk.Done(clk.Now(), o)
						tk.Done(clk.Now(), o)
					}
				})
			}
			workers.Wait()
			close(stop)
			wg.Wait()
			for _, h := range hosts {
				if f.max[h] > limit {
					t.Errorf("%s: %d in flight at once, window %d", h, f.max[h], limit)
				}
				if s, ok := r.Host(clk.Now(), h); ok && s.InFlight != 0 {
					t.Errorf("%s: InFlight %d after all Done", h, s.InFlight)
				}
			}
			if admitted.Load() < 100 {
				t.Errorf("only %d admitted", admitted.Load())
			}
			t.Log(fmt.Sprintf("admitted %d, max in flight %v", admitted.Load(), f.max))
		})
	}
}

// BenchmarkTryAdmitDone measures the gate alone (Neutral outcomes move no controller math) and
// with the controller's work on a Success.
func BenchmarkTryAdmitDone(b *testing.B) {
	for _, sig := range []aimd.Signal{aimd.Neutral, aimd.Success} {
		b.Run(fmt.Sprint("signal=", sig), func(b *testing.B) {
			r := New(Config{AIMD: testAIMD(1e6, 16)}, nil)
			now := t0
			for b.Loop() {
				now = now.Add(time.Millisecond)
				if tk, _ := r.TryAdmit(now, "a.test"); tk != nil {
					tk.Done(now, aimd.Outcome{Signal: sig, Latency: time.Millisecond})
				}
			}
		})
	}
}

func BenchmarkTryAdmitManyHostsParallel(b *testing.B) {
	r := New(Config{AIMD: testAIMD(1e6, 16)}, nil)
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		host := fmt.Sprintf("h%d.test", n.Add(1))
		now := t0
		for pb.Next() {
			now = now.Add(time.Millisecond)
			if tk, _ := r.TryAdmit(now, host); tk != nil {
				tk.Done(now, aimd.Outcome{Signal: aimd.Success, Latency: time.Millisecond})
			}
		}
	})
}
