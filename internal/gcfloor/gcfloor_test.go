package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

func TestPercent(t *testing.T) {
	const mb = 1 << 20
	tests := []struct {
		live, floor uint64
		want        int
	}{
		{1 * mb, 32 * mb, 800},   // the least goal (4 MB × 8) at 32 MB; 1 MB × 9 is below it
		{3 * mb, 32 * mb, 800},   // 3 MB × 9 = 27 MB, the least goal 32 MB
		{4 * mb, 32 * mb, 700},   // 4 MB × 8 = 32 MB
		{10 * mb, 32 * mb, 220},  // 10 MB × 3.2 = 32 MB
		{16 * mb, 32 * mb, 100},  // twice the live heap reaches the floor
		{200 * mb, 32 * mb, 100}, // a large heap: GOGC=100
		{0, 32 * mb, 800},
		{1 * mb, 2 * mb, 100}, // a floor under the runtime's own least goal changes nothing
	}
	for _, tc := range tests {
		if got := Percent(tc.live, tc.floor); got != tc.want {
			t.Errorf("Percent(%d, %d) = %d, want %d", tc.live, tc.floor, got, tc.want)
		}
	}
}

func gogc() int64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// TestStart: while started, a small live heap gets a GOGC that puts the goal at the floor,
// tuned again after collections; stopping puts the previous GOGC back.
func TestStart(t *testing.T) {
	t.Setenv("GOGC", "") // as if unset
	defer debug.SetGCPercent(debug.SetGCPercent(150))
	stop := Start(64 << 20)
	runtime.GC()
	runtime.GC() // the cleanup of the first runs after it
	if p := gogc(); p <= 100 {
		t.Errorf("GOGC %d with a small live heap and a 64 MB floor, want far above 100", p)
	}
	stop2 := Start(1 << 20) // a smaller floor does not lower the goal
	if p := gogc(); p <= 100 {
		t.Errorf("GOGC %d after a second Start with a smaller floor", p)
	}
	stop2()
	stop()
	stop() // twice is harmless
	if p := gogc(); p != 150 {
		t.Errorf("GOGC %d after stop, want 150 as before", p)
	}
}

func TestStartLeavesAChosenGOGC(t *testing.T) {
	t.Setenv("GOGC", "300")
	defer debug.SetGCPercent(debug.SetGCPercent(300))
	stop := Start(64 << 20)
	defer stop()
	runtime.GC()
	runtime.GC()
	if p := gogc(); p != 300 {
		t.Errorf("GOGC %d, want the 300 the environment chose", p)
	}
}
