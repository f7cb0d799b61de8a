package retry

import (
	"math"
	"math/rand"
	"testing"
	"time"
)

const seed = 20150304 // the Brooker post's date; printed by tests that use it

func TestCeiling(t *testing.T) {
	tests := []struct {
		name    string
		p       Policy
		attempt int
		want    time.Duration
	}{
		{"defaults, first retry", Policy{}, 0, 500 * time.Millisecond},
		{"defaults, doubling", Policy{}, 3, 4 * time.Second},
		{"defaults, capped", Policy{}, 7, 60 * time.Second},
		{"defaults, far beyond", Policy{}, 1000, 60 * time.Second},
		{"negative attempt", Policy{}, -3, 500 * time.Millisecond},
		{"custom", Policy{Base: 5 * time.Millisecond, Cap: 2 * time.Second}, 8, 1280 * time.Millisecond},
		{"custom capped", Policy{Base: 5 * time.Millisecond, Cap: 2 * time.Second}, 9, 2 * time.Second},
		{"huge cap no overflow", Policy{Base: time.Second, Cap: time.Duration(math.MaxInt64)}, 200, time.Duration(math.MaxInt64)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Ceiling(tc.attempt); got != tc.want {
				t.Errorf("Ceiling(%d) = %v, want %v", tc.attempt, got, tc.want)
			}
			if got := tc.p.Backoff(tc.attempt, nil); got != tc.want {
				t.Errorf("Backoff(%d, nil) = %v, want the ceiling %v", tc.attempt, got, tc.want)
			}
		})
	}
}

func TestBackoffFullJitter(t *testing.T) {
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewSource(seed))
	p := Policy{}
	for _, attempt := range []int{0, 2, 6, 10} {
		ceil := p.Ceiling(attempt)
		const n = 4000
		var sum time.Duration
		var low, high int // samples in the bottom and top tenth
		for i := 0; i < n; i++ {
			d := p.Backoff(attempt, rnd)
			if d < 0 || d >= ceil {
				t.Fatalf("Backoff(%d) = %v outside [0, %v)", attempt, d, ceil)
			}
			sum += d
			if d < ceil/10 {
				low++
			}
			if d >= ceil-ceil/10 {
				high++
			}
		}
		// Uniform over the whole capped range: mean near ceil/2, both tails populated.
		if mean := sum / n; mean < ceil*45/100 || mean > ceil*55/100 {
			t.Errorf("attempt %d: mean %v, want about %v", attempt, mean, ceil/2)
		}
		if low < n/20 || high < n/20 {
			t.Errorf("attempt %d: %d in the bottom tenth, %d in the top, want about %d each", attempt, low, high, n/10)
		}
	}
}

func TestBackoffDeterministic(t *testing.T) {
	a, b := rand.New(rand.NewSource(seed)), rand.New(rand.NewSource(seed))
	for i := 0; i < 100; i++ {
		if x, y := (Policy{}).Backoff(i%8, a), (Policy{}).Backoff(i%8, b); x != y {
			t.Fatalf("same seed, different backoff: %v != %v", x, y)
		}
	}
}

func TestDelay(t *testing.T) {
	p := Policy{Base: time.Second, Cap: 10 * time.Second}
	tests := []struct {
		name       string
		attempt    int
		retryAfter time.Duration
		lo, hi     time.Duration // want lo <= Delay < hi (hi == lo: exactly)
	}{
		{"no Retry-After: the backoff", 2, 0, 0, 4 * time.Second},
		{"Retry-After above the backoff wins", 1, 30 * time.Second, 30 * time.Second, 30 * time.Second},
		{"huge Retry-After kept", 0, 24 * time.Hour, 24 * time.Hour, 24 * time.Hour},
		{"small Retry-After: at least it", 3, 2 * time.Second, 2 * time.Second, 8 * time.Second},
	}
	rnd := rand.New(rand.NewSource(seed))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i := 0; i < 200; i++ {
				d := p.Delay(tc.attempt, tc.retryAfter, rnd)
				if d < tc.lo || (tc.hi > tc.lo && d >= tc.hi) || (tc.hi == tc.lo && d != tc.lo) {
					t.Fatalf("Delay(%d, %v) = %v, want in [%v, %v)", tc.attempt, tc.retryAfter, d, tc.lo, tc.hi)
				}
			}
		})
	}
}

func TestPolicyDefaults(t *testing.T) {
	p := Policy{}.withDefaults()
	if p.Base != 500*time.Millisecond || p.Cap != time.Minute || p.MaxAttempts != 5 {
		t.Errorf("defaults = %+v", p)
	}
	q := Policy{Base: time.Second, Cap: time.Hour, MaxAttempts: 9}.withDefaults()
	if q.Base != time.Second || q.Cap != time.Hour || q.MaxAttempts != 9 {
		t.Errorf("explicit values changed: %+v", q)
	}
}
