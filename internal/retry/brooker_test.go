package retry

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"
	"time"
)

// A reproduction of the simulation behind Marc Brooker's "Exponential Backoff and Jitter"
// (AWS Architecture Blog, March 2015), written from its description and the published method:
// N clients each want to update one row guarded by optimistic concurrency control. A client
// reads the row's version, then writes with that version; the server accepts the write only if
// the version is still current (no other client wrote in between), else the client backs off
// and starts over with a fresh read. Every message crosses a network hop of |N(10ms, 2ms)|.
// Backoff uses base 5ms and cap 2s, and retry n (n = 1 for the first) waits:
//
//	exponential:  min(cap, base·2^n)                  (no jitter: Policy.Backoff with a nil rand)
//	full jitter:  uniform [0, min(cap, base·2^n))     (Policy.Backoff, this package's choice)
//	equal jitter: v/2 + uniform [0, v/2), v = min(cap, base·2^n)
//	decorrelated: min(cap, uniform [base, 3·previous wait))
//	none:         0
//
// "Calls" counts writes reaching the server (the work the contention costs it); "time" is when
// the last client finished. Both are averaged over trials. The simulation is seeded, so the
// figures below are exactly reproducible:
//
//	go test ./internal/retry -run TestBrookerSimulation -v

// brookerPolicy is the post's backoff: base 5ms, cap 2s.
var brookerPolicy = Policy{Base: 5 * time.Millisecond, Cap: 2 * time.Second}

type backoffFunc func(attempt int, rnd *rand.Rand, prev *float64) float64 // ms

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

var brookerAlgorithms = []struct {
	name string
	f    backoffFunc
}{
	{"exponential", func(n int, _ *rand.Rand, _ *float64) float64 { return ms(brookerPolicy.Backoff(n, nil)) }},
	{"full jitter", func(n int, rnd *rand.Rand, _ *float64) float64 { return ms(brookerPolicy.Backoff(n, rnd)) }},
	{"equal jitter", func(n int, rnd *rand.Rand, _ *float64) float64 {
		v := ms(brookerPolicy.Ceiling(n))
		return v/2 + rnd.Float64()*v/2
	}},
	{"decorrelated", func(_ int, rnd *rand.Rand, prev *float64) float64 {
		base, cap := ms(brookerPolicy.Base), ms(brookerPolicy.Cap)
		if *prev < base {
			*prev = base
		}
		*prev = math.Min(cap, base+rnd.Float64()*(*prev*3-base))
		return *prev
	}},
	{"none", func(int, *rand.Rand, *float64) float64 { return 0 }},
}

// occEvent is a message arriving somewhere at t (ms).
type occEvent struct {
	t       float64
	seq     int
	kind    int // occRead, occReadReply, occWrite, occWriteReply
	client  int
	version int
	ok      bool
}

const (
	occRead = iota
	occReadReply
	occWrite
	occWriteReply
)

// occQueue is a binary min-heap of events by time (then by sequence, for determinism), typed
// to avoid boxing every event.
type occQueue []occEvent

func (q occQueue) less(i, j int) bool {
	if q[i].t != q[j].t {
		return q[i].t < q[j].t
	}
	return q[i].seq < q[j].seq
}

func (q *occQueue) push(e occEvent) {
	*q = append(*q, e)
	h := *q
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *occQueue) pop() occEvent {
	h := *q
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l, small := 2*i+1, i
		if l < n && h.less(l, small) {
			small = l
		}
		if r := l + 1; r < n && h.less(r, small) {
			small = r
		}
		if small == i {
			break
		}
		h[i], h[small] = h[small], h[i]
		i = small
	}
	*q = h
	return top
}

// runOCC runs one trial: clients contending until each has written once. It returns the time
// the last one finished (ms) and the writes the server saw.
func runOCC(clients int, backoff backoffFunc, rnd *rand.Rand) (finish float64, calls int) {
	hop := func() float64 { return math.Abs(10 + 2*rnd.NormFloat64()) }
	var q occQueue
	seq := 0
	send := func(e occEvent) {
		seq++
		e.seq = seq
		q.push(e)
	}
	attempt := make([]int, clients)
	prev := make([]float64, clients)
	version := 0
	for c := 0; c < clients; c++ {
		send(occEvent{t: hop(), kind: occRead, client: c})
	}
	for len(q) > 0 {
		e := q.pop()
		finish = e.t
		switch e.kind {
		case occRead:
			send(occEvent{t: e.t + hop(), kind: occReadReply, client: e.client, version: version})
		case occReadReply:
			send(occEvent{t: e.t + hop(), kind: occWrite, client: e.client, version: e.version})
		case occWrite:
			calls++
			ok := e.version == version
			if ok {
				version++
			}
			send(occEvent{t: e.t + hop(), kind: occWriteReply, client: e.client, ok: ok})
		case occWriteReply:
			if !e.ok {
				attempt[e.client]++
				wait := backoff(attempt[e.client], rnd, &prev[e.client])
				send(occEvent{t: e.t + hop() + wait, kind: occRead, client: e.client})
			}
		}
	}
	return finish, calls
}

type brookerResult struct{ calls, time float64 }

// brooker averages trials of every algorithm at each client count.
func brooker(clientCounts []int, trials int, seed int64) map[string]map[int]brookerResult {
	out := map[string]map[int]brookerResult{}
	for ai, a := range brookerAlgorithms {
		out[a.name] = map[int]brookerResult{}
		for _, n := range clientCounts {
			rnd := rand.New(rand.NewSource(seed + int64(1000*ai+n)))
			var sumT, sumC float64
			for i := 0; i < trials; i++ {
				t, c := runOCC(n, a.f, rnd)
				sumT += t
				sumC += float64(c)
			}
			out[a.name][n] = brookerResult{calls: sumC / float64(trials), time: sumT / float64(trials)}
		}
	}
	return out
}

func TestBrookerSimulation(t *testing.T) {
	const trials = 20
	counts := []int{10, 25, 50, 75, 100}
	t.Logf("seed %d, %d trials per cell, base 5ms, cap 2s, hops |N(10ms, 2ms)|", seed, trials)
	res := brooker(counts, trials, seed)

	var b strings.Builder
	fmt.Fprintf(&b, "\n| clients | algorithm | calls | time (ms) |\n|---:|---|---:|---:|\n")
	for _, n := range counts {
		for _, a := range brookerAlgorithms {
			r := res[a.name][n]
			fmt.Fprintf(&b, "| %d | %s | %.0f | %.0f |\n", n, a.name, r.calls, r.time)
		}
	}
	t.Log(b.String())

	exp, full := res["exponential"][100], res["full jitter"][100]
	callRatio, timeRatio := full.calls/exp.calls, full.time/exp.time
	t.Logf("100 clients: full jitter / exponential = %.2f× the calls, %.3f× the time", callRatio, timeRatio)
	if callRatio > 0.45 {
		t.Errorf("full jitter made %.2f× the calls of exponential backoff, want ≤ 0.45×", callRatio)
	}
	if timeRatio > 0.10 {
		t.Errorf("full jitter took %.3f× the time of exponential backoff, want ≤ 0.10×", timeRatio)
	}
	// Every jittered variant beats un-jittered exponential on calls; none does no better than
	// no backoff at all on calls.
	for _, a := range []string{"full jitter", "equal jitter", "decorrelated"} {
		if r := res[a][100]; r.calls >= exp.calls {
			t.Errorf("%s: %.0f calls, not fewer than exponential's %.0f", a, r.calls, exp.calls)
		}
	}
	if none := res["none"][100]; none.calls <= full.calls {
		t.Errorf("no backoff made %.0f calls, full jitter %.0f: backoff should save work", none.calls, full.calls)
	}
}

// BenchmarkBrooker times one 100-client trial per algorithm.
func BenchmarkBrooker(b *testing.B) {
	for _, a := range brookerAlgorithms {
		b.Run(strings.ReplaceAll(a.name, " ", "-"), func(b *testing.B) {
			rnd := rand.New(rand.NewSource(seed))
			var calls int
			for b.Loop() {
				_, c := runOCC(100, a.f, rnd)
				calls += c
			}
			b.ReportMetric(float64(calls)/float64(b.N), "calls/trial")
		})
	}
}
