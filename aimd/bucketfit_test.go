package aimd

import (
	"math"
	"math/rand"
	"testing"
)

// bucketServer is a server-side token bucket of rate l and size b, full at time 0.
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

// epochsAgainst sends to srv, in epoch i, at the rate profiles[i] gives for the time since
// the epoch began, until a refusal, then pauses for pause seconds (the last profile repeats).
// It returns the events of each epoch as runFit cuts them: from the refusal that opened it
// (the crawl's start for the first) to the one that closed it, times relative to the latter.
// Arrivals lag sends by up to jitter.
func epochsAgainst(srv *bucketServer, profiles []func(dt float64) float64, pause float64, epochs int, jitter float64, rng *rand.Rand) [][]bucketEvent {
	var out [][]bucketEvent
	var cur []bucketEvent
	t, start := 0.0, 0.0
	for len(out) < epochs {
		sig := srv.answer(t + rng.Float64()*jitter)
		cur = append(cur, bucketEvent{t: t, sig: sig})
		if sig == Overload {
			evs := make([]bucketEvent, len(cur))
			for i, e := range cur {
				evs[i] = bucketEvent{t: e.t - t, sig: e.sig}
			}
			out = append(out, evs)
			cur = []bucketEvent{{t: t, sig: Overload}}
			t += pause
			start = t
			continue
		}
		t += 1 / profiles[min(len(out), len(profiles)-1)](t-start)
	}
	return out
}

// slowStart doubles from r0 every 125ms; climb rises linearly from r0 by k req/s per second.
func slowStart(r0 float64) func(float64) float64 {
	return func(dt float64) float64 { return r0 * math.Pow(2, dt/0.125) }
}

func climb(r0, k float64) func(float64) float64 {
	return func(dt float64) float64 { return r0 + k*dt }
}

// TestBucketFitSound: whatever the bucket and however it was probed, the fit never rules out
// the true rate for the true size, and after a few epochs it pins the rate within a few
// percent.
func TestBucketFitSound(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for trial := 0; trial < 100; trial++ {
		l := 1 + rng.Float64()*99
		b := float64(1 + rng.Intn(12))
		srv := &bucketServer{l: l, b: b, level: b}
		r0 := l * (0.5 + 0.4*rng.Float64())
		k := l * (0.05 + 0.3*rng.Float64())
		pause := 1 + rng.Float64()*2
		jitter := 0.0005
		var f bucketFit
		bi := int(b) - 1 // burstGrid starts 1, 2, 3, …
		profiles := []func(float64) float64{slowStart(r0 / 4), climb(r0, k)}
		for i, evs := range epochsAgainst(srv, profiles, pause, 4, jitter, rng) {
			f.update(fitEpoch(evs, 0.1, 1000, jitter))
			got := f.ranges[bi]
			if got.empty() || l < got.lo*0.999 || l > got.hi*1.001 {
				t.Fatalf("trial %d (L=%.2f b=%v, climb %.2f/s from %.2f): after epoch %d the fit allows [%.3f, %.3f] for b=%v",
					trial, l, b, k, r0, i+1, got.lo, got.hi, b)
			}
		}
		lo, hi, _, ok := f.bounds()
		if !ok || lo > l || hi < l {
			t.Fatalf("trial %d (L=%.2f b=%v): bounds [%.3f, %.3f] miss L", trial, l, b, lo, hi)
		}
	}
}

// TestBucketFitPins: two epochs against a bucket of rate 10 and size 2, probed as the
// controller does (slow start, then a linear climb after the pause), pin the limit within a
// few percent, where one epoch cannot tell a small bucket at a high rate from a big one at a
// low rate.
func TestBucketFitPins(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	srv := &bucketServer{l: 10, b: 2, level: 2}
	epochs := epochsAgainst(srv, []func(float64) float64{slowStart(2), climb(7, 1.7)}, 1, 2, 0.0005, rng)
	var f bucketFit
	f.update(fitEpoch(epochs[0], 0.1, 1000, 0.001))
	lo, hi, _, _ := f.bounds()
	t.Logf("after one epoch: [%.2f, %.2f]", lo, hi)
	if hi <= fitNarrow*lo {
		t.Errorf("one epoch pinned the limit to [%.2f, %.2f]: the fit is not sound", lo, hi)
	}
	f.update(fitEpoch(epochs[1], 0.1, 1000, 0.001))
	lo, hi, one, _ := f.bounds()
	t.Logf("after two epochs: [%.2f, %.2f]", lo, hi)
	if lo < 9.5 || hi > 10.5 || lo > 10 || hi < 10 || one {
		t.Errorf("after two epochs the fit allows [%.2f, %.2f] (one token %v), want about 10 and no one-token bucket", lo, hi, one)
	}
}

// TestBucketFitLimitChange: an epoch no bucket size of the fit explains (the limit fell)
// starts the fit over from that epoch alone.
func TestBucketFitLimitChange(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	var f bucketFit
	srv := &bucketServer{l: 20, b: 2, level: 2}
	for _, evs := range epochsAgainst(srv, []func(float64) float64{slowStart(2), climb(14, 3)}, 1, 3, 0.0005, rng) {
		f.update(fitEpoch(evs, 0.1, 1000, 0.001))
	}
	if lo, hi, _, _ := f.bounds(); lo > 20 || hi < 20 {
		t.Fatalf("before the fall: [%.2f, %.2f], want about 20", lo, hi)
	}
	srv = &bucketServer{l: 5, b: 2, level: 2}
	for _, evs := range epochsAgainst(srv, []func(float64) float64{climb(10, -2), climb(4, 1)}, 1, 3, 0.0005, rng) {
		f.update(fitEpoch(evs, 0.1, 1000, 0.001))
	}
	if lo, hi, _, _ := f.bounds(); lo > 5 || hi < 5 || hi > 6 {
		t.Errorf("after the fall: [%.2f, %.2f], want about 5", lo, hi)
	}
}
