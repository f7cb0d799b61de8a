package aimd

import (
	"math"
	"math/rand"
	"testing"
)

// bucketServer is a server-side token bucket of rate l and size b.
type bucketServer struct {
	l, b, level, last float64
}

// answer answers a request arriving at t (arrivals are answered in the order they are passed,
// an arrival before the previous one taking no refill).
func (s *bucketServer) answer(t float64) Signal {
	s.level = min(s.b, s.level+max(t-s.last, 0)*s.l)
	s.last = max(s.last, t)
	if s.level < 1 {
		return Overload
	}
	s.level--
	return Success
}

// crawlAgainst sends to srv, in epoch i, at the rate profiles[i] gives for the time since the
// epoch began (the last profile repeats), until a refusal, then pauses for pause seconds. It
// returns every request in send order and the index of each refusal that closed an epoch.
// Arrivals lag sends by up to jitter.
func crawlAgainst(srv *bucketServer, profiles []func(dt float64) float64, pause float64, epochs int, jitter float64, rng *rand.Rand) (evs []bucketEvent, closes []int) {
	t, start := 0.0, 0.0
	for len(closes) < epochs {
		sig := srv.answer(t + rng.Float64()*jitter)
		evs = append(evs, bucketEvent{t: t, sig: sig})
		if sig == Overload {
			closes = append(closes, len(evs)-1)
			t += pause
			start = t
			continue
		}
		t += 1 / profiles[min(len(closes), len(profiles)-1)](t-start)
	}
	return evs, closes
}

// upTo returns a copy of evs[from:to+1], as runFit passes them.
func upTo(evs []bucketEvent, from, to int) []bucketEvent {
	return append([]bucketEvent(nil), evs[from:to+1]...)
}

// slowStart doubles from r0 every 125ms; climb rises linearly from r0 by k req/s per second.
func slowStart(r0 float64) func(float64) float64 {
	return func(dt float64) float64 { return r0 * math.Pow(2, dt/0.125) }
}

func climb(r0, k float64) func(float64) float64 {
	return func(dt float64) float64 { return r0 + k*dt }
}

// TestBucketFitSound: whatever the bucket and however it was probed, the fit never rules out
// the true rate for the true size.
func TestBucketFitSound(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(7))
	for trial := 0; trial < 100; trial++ {
		l := 1 + rng.Float64()*99
		b := float64(1 + rng.Intn(12))
		srv := &bucketServer{l: l, b: b, level: b}
		r0 := l * (0.5 + 0.4*rng.Float64())
		k := l * (0.05 + 0.3*rng.Float64())
		pause := 1 + rng.Float64()*2
		jitter := 0.0005
		evs, closes := crawlAgainst(srv, []func(float64) float64{slowStart(r0 / 4), climb(r0, k)}, pause, 4, jitter, rng)
		for i, end := range closes {
			got := fitBuckets(upTo(evs, 0, end), 0.1, 1000, jitter)[int(b)-1] // burstGrid starts 1, 2, 3, …
			if got.empty() || l < got.lo*0.999 || l > got.hi*1.001 {
				t.Fatalf("trial %d (L=%.2f b=%v, climb %.2f/s from %.2f): after refusal %d the fit allows [%.3f, %.3f] for b=%v",
					trial, l, b, k, r0, i+1, got.lo, got.hi, b)
			}
		}
	}
}

// TestBucketFitPins: one refusal cannot tell a small bucket at a high rate from a big one at
// a low rate, but two, drawn as the controller draws them (slow start, then a linear climb
// after the pause), pin a bucket of rate 10 and size 2 within a few percent.
func TestBucketFitPins(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(1))
	srv := &bucketServer{l: 10, b: 2, level: 2}
	evs, closes := crawlAgainst(srv, []func(float64) float64{slowStart(2), climb(7, 1.7)}, 1, 2, 0.0005, rng)
	f := fitBuckets(upTo(evs, 0, closes[0]), 0.1, 1000, 0.001)
	lo, hi, _, _, _ := f.bounds()
	t.Logf("after one refusal: [%.2f, %.2f]", lo, hi)
	for i, r := range f[:4] {
		t.Logf("  size %v: [%.2f, %.2f]", burstGrid[i], r.lo, r.hi)
	}
	if hi <= restartFactor*lo {
		t.Errorf("one refusal pinned the limit to [%.2f, %.2f]: the fit is not sound", lo, hi)
	}
	f = fitBuckets(upTo(evs, 0, closes[1]), 0.1, 1000, 0.001)
	lo, hi, one, _, size := f.bounds()
	t.Logf("after two: [%.2f, %.2f]", lo, hi)
	if lo < 9.5 || hi > 10.5 || lo > 10 || hi < 10 || one || size == 0 {
		t.Errorf("after two refusals the fit allows [%.2f, %.2f] (one token %v, unbounded %v), want about 10, sizes bounded, and no one-token bucket",
			lo, hi, one, size == 0)
	}
}

// TestBucketFitLimitChange: once the limit falls, no bucket explains the whole crawl, and the
// requests since the first refusal at the new limit bracket it (as runFit starts over).
func TestBucketFitLimitChange(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(3))
	srv := &bucketServer{l: 20, b: 2, level: 2}
	evs, closes := crawlAgainst(srv, []func(float64) float64{slowStart(2), climb(14, 3)}, 1, 3, 0.0005, rng)
	f := fitBuckets(upTo(evs, 0, closes[2]), 0.1, 1000, 0.001)
	if lo, hi, _, _, _ := f.bounds(); lo > 20 || hi < 20 {
		t.Fatalf("before the fall: [%.2f, %.2f], want about 20", lo, hi)
	}
	srv = &bucketServer{l: 5, b: 2} // empty when the limit falls, a second after the last refusal
	offset := evs[len(evs)-1].t + 1
	more, moreCloses := crawlAgainst(srv, []func(float64) float64{climb(10, 0), climb(4, 1)}, 1, 3, 0.0005, rng)
	for _, e := range more {
		evs = append(evs, bucketEvent{t: e.t + offset, sig: e.sig})
	}
	last := len(evs) - len(more) + moreCloses[2]
	f = fitBuckets(upTo(evs, 0, last), 0.1, 1000, 0.001)
	if _, _, _, ok, _ := f.bounds(); ok {
		t.Errorf("a bucket of one rate explains a crawl whose limit fell from 20 to 5")
	}
	opened := len(evs) - len(more) + moreCloses[0]
	f = fitBuckets(upTo(evs, opened, last), 0.1, 1000, 0.001)
	if lo, hi, _, _, _ := f.bounds(); lo > 5 || hi < 5 || hi > 6.5 {
		t.Errorf("after the fall, from the first refusal at the new limit: [%.2f, %.2f], want 5 within, nothing near 20", lo, hi)
	}
}
