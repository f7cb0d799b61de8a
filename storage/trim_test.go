package storage

import (
	"runtime"
	"testing"
	"time"
)

func TestTrimDue(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const mb = 1 << 20
	for _, c := range []struct {
		name           string
		since          time.Duration
		left, resident int64
		want           bool
	}{
		{"quiet, soon after a trim", 10 * time.Millisecond, 40 * mb, 41 * mb, false},
		{"quiet, trimEvery later", trimEvery, 40 * mb, 40 * mb, true},
		{"grown by trimGrowth", 10 * time.Millisecond, 40 * mb, 40*mb + trimGrowth, true},
		{"grown by less", 50 * time.Millisecond, 40 * mb, 40*mb + trimGrowth - 1, false},
		{"resident not known", 50 * time.Millisecond, -1, -1, false},
		{"resident not known, trimEvery later", trimEvery, -1, -1, true},
	} {
		if got := trimDue(t0.Add(c.since), t0, c.left, c.resident); got != c.want {
			t.Errorf("%s: trimDue = %v, want %v", c.name, got, c.want)
		}
	}
}

// The trimmer reads the process's resident file pages on Linux (the statm figure it acts on).
func TestResidentRead(t *testing.T) {
	r := openResident()
	defer r.close()
	n := r.read()
	if runtime.GOOS != "linux" {
		if n != -1 {
			t.Errorf("read = %d outside Linux, want -1", n)
		}
		return
	}
	if n <= 0 {
		t.Fatalf("read = %d, want the resident shared bytes (> 0: the binary's own text)", n)
	}
	if again := r.read(); again <= 0 {
		t.Errorf("second read = %d", again)
	}
}
