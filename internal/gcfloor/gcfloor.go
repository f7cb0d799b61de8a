// Package gcfloor keeps the Go heap goal at or above a floor while a crawl runs.
//
// With GOGC=100 the runtime collects when the heap has doubled since the last collection, and
// never lets the goal fall below 4 MB. A crawl of a few hosts keeps little live while it
// allocates fast (bodies, bbolt's nodes, URLs), so it collected many times a second, and the
// fixed cost of each collection (stopping the world, scanning every goroutine's stack,
// sweeping) added up to a good share of its CPU (BENCHMARKS.md, "CPU per page"). Start raises
// GOGC while the live heap is under half the floor, so that the next collection comes when the
// heap reaches the floor; a live heap of half the floor or more is left at GOGC=100, so large
// crawls are unchanged.
package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// heapMinimum is the runtime's least heap goal at GOGC=100; it scales with GOGC.
const heapMinimum = 4 << 20

// Percent returns the GOGC that puts the next collection's goal at max(floor, 2 × live): 100
// when twice the live heap reaches the floor, more below it, but never so much that the
// runtime's least goal (heapMinimum × GOGC/100) passes the floor.
func Percent(live, floor uint64) int {
	live = max(live, 1)
	if 2*live >= floor {
		return 100
	}
	return int(max(min(100*(floor-live)/live, 100*floor/heapMinimum), 100))
}

// tuner is the process's one: GOGC is process-wide.
var tuner struct {
	mu      sync.Mutex
	users   int    // Starts not yet stopped
	floor   uint64 // the largest floor of those
	percent int    // GOGC as set by the tuner
	prev    int    // GOGC before the first Start
	armed   bool   // a cleanup will run after the next collection
}

// Start keeps the heap goal at least floor bytes until stop is called: after each collection it
// sets GOGC to Percent(live heap, floor). Overlapping Starts share one tuner, which keeps the
// largest floor asked for; when the last is stopped GOGC is put back. If the GOGC environment
// variable is set, Start does nothing: the user chose.
func Start(floor uint64) (stop func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	tuner.mu.Lock()
	defer tuner.mu.Unlock()
	if tuner.users == 0 {
		tuner.prev = debug.SetGCPercent(100)
		tuner.percent, tuner.floor = 100, 0
	}
	tuner.users++
	tuner.floor = max(tuner.floor, floor)
	tuneLocked()
	if !tuner.armed {
		arm()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			tuner.mu.Lock()
			defer tuner.mu.Unlock()
			if tuner.users--; tuner.users == 0 {
				debug.SetGCPercent(tuner.prev)
			}
		})
	}
}

// tuneLocked sets GOGC from the live heap the last collection marked. It requires tuner.mu.
func tuneLocked() {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	if p := Percent(s[0].Value.Uint64(), tuner.floor); p != tuner.percent {
		debug.SetGCPercent(p)
		tuner.percent = p
	}
}

// arm registers a cleanup on a new unreachable object, so that it runs after the next
// collection: it tunes GOGC and arms again while the tuner has users. It requires tuner.mu.
func arm() {
	tuner.armed = true
	runtime.AddCleanup(new([64]byte), afterGC, 0)
}

func afterGC(int) {
	tuner.mu.Lock()
	defer tuner.mu.Unlock()
	tuner.armed = false
	if tuner.users == 0 {
		return
	}
	tuneLocked()
	arm()
}
