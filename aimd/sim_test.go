package aimd

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"
	"time"
)

// This file is a small deterministic discrete-event simulation of one host and one crawler
// gate, used to check the controller against the product's targets in simulated time.
//
// The client mirrors hostlimit: a token bucket with burst 1 pacing at Rate(), a window of
// Window() requests in flight, and (optionally) a pause until the Retry-After a 429 announced.
// The host is either a token bucket of rate L and burst B that answers over-limit requests
// with an immediate 429 (Retry-After = time until a token, rounded up to whole seconds, at least
// 1, as simweb does), or a pool of W workers with service time S that never refuses and lets
// excess requests queue, or both, or neither.

type simHost struct {
	limit float64 // req/s; 0 = unlimited
	burst float64 // bucket size (>= 1)
	// retryFixed > 0: a token bucket's refusals say "Retry-After: retryFixed" (seconds), as
	// servers that send a fixed value do, instead of the time until a token.
	retryFixed float64
	workers    int     // 0 = no worker pool
	service    float64 // s each admitted request takes (the median, when sigma > 0)
	sigma      float64 // > 0: service times are lognormal with this shape (real servers' spread)
	dropAt     float64 // s; when > 0 the limit is multiplied by dropBy then
	dropBy     float64

	// A fixed-window counter instead of a token bucket (express-rate-limit's default, many
	// API gateways): at most quota requests per window seconds, counted in windows aligned
	// to time 0; a refusal's Retry-After is the time to the next window, rounded up.
	window float64
	quota  int

	// HAProxy's stick-table request rate (http_req_rate(period), refused with "sc_http_req_rate
	// gt quota"): the requests counted in the current period plus the previous period's,
	// weighted by the share of it still inside a sliding period; refused requests count too.
	// The refusal carries no Retry-After unless slidingRetry > 0 (that many seconds).
	sliding      float64
	slidingRetry float64

	// Apache's mod_evasive (DOSSiteCount banCount, DOSSiteInterval 1, DOSBlockingPeriod
	// banFor): a client that sends banCount requests within one wall-clock second is refused
	// everything (403, no Retry-After) until banFor seconds have passed without a request from
	// it: each request during the ban restarts it.
	banCount int
	banFor   float64
}

type simConfig struct {
	host       simHost
	cfg        Config
	pages      int     // 0 = unlimited demand
	duration   float64 // s: stop then (or when pages are done)
	rtt        float64 // s, round trip (split evenly)
	jitter     float64 // s, extra uniform [0, jitter) delay each way
	noPause    bool    // do not honour Retry-After
	late       float64 // s: the client's timer wakes up to this much late (uniform), as on a loaded machine
	seed       int64
	traceEvery float64 // s between rate samples in the trace (default 0.1)
	stated     float64 // the rate each success's answer states (Outcome.Stated); 0: none
	demand     Demand  // Outcome.Demand of every outcome
	restore    *State  // start from this saved State instead of New
	trail      *trail  // if set, notes the controller after every outcome (golden_test.go)
}

type simEvent struct {
	t    float64
	seq  int
	kind int // evArrive, evFinish, evRespond, evWake
	r    *simReq
	gen  int
}

const (
	evArrive = iota
	evFinish
	evRespond
	evWake
)

type simReq struct {
	sent     float64
	inFlight int // the client's requests in flight when sent, itself included
	rejected bool
	retryIn  float64
}

type eventQueue []simEvent

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].t != q[j].t {
		return q[i].t < q[j].t
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(simEvent)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type tracePoint struct {
	t      float64
	rate   float64
	window int
}

type simResult struct {
	ok, over   int
	makespan   float64 // time of the last success (pages mode) or duration
	okAt       []float64
	okLat      []float64 // latency of each success, same order as okAt
	overAt     []float64
	trace      []tracePoint
	maxQueue   int
	finalStats Stats
	ctrl       *Controller // as the crawl left it
}

// throughput is successes per second in [a, b).
func (r *simResult) throughput(a, b float64) float64 {
	n := 0
	for _, t := range r.okAt {
		if t >= a && t < b {
			n++
		}
	}
	return float64(n) / (b - a)
}

// p95 is the p95 latency of successes completed in [a, b).
func (r *simResult) p95(a, b float64) float64 {
	var ls []float64
	for i, t := range r.okAt {
		if t >= a && t < b {
			ls = append(ls, r.okLat[i])
		}
	}
	if len(ls) == 0 {
		return 0
	}
	slices.Sort(ls)
	return ls[int(math.Ceil(0.95*float64(len(ls))))-1]
}

// overIn counts over-limit replies received in [a, b).
func (r *simResult) overIn(a, b float64) int {
	n := 0
	for _, t := range r.overAt {
		if t >= a && t < b {
			n++
		}
	}
	return n
}

var simEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func simTime(t float64) time.Time { return simEpoch.Add(time.Duration(t * float64(time.Second))) }

func runSim(sc simConfig) *simResult {
	rnd := rand.New(rand.NewSource(sc.seed))
	h := sc.host
	if h.burst < 1 {
		h.burst = 1
	}
	if sc.traceEvery == 0 {
		sc.traceEvery = 0.1
	}
	ctrl := New(sc.cfg, simTime(0))
	if sc.restore != nil {
		ctrl = Restore(sc.cfg, *sc.restore, simTime(0))
	}
	res := &simResult{ctrl: ctrl}
	var q eventQueue
	seq := 0
	push := func(e simEvent) {
		seq++
		e.seq = seq
		heap.Push(&q, e)
	}
	oneWay := func() float64 { return sc.rtt/2 + rnd.Float64()*sc.jitter }
	lateRnd := rand.New(rand.NewSource(sc.seed + 1)) // its own source: the other draws stay as without lateness
	late := func() float64 { return lateRnd.Float64() * sc.late }

	// Server state.
	sTokens, sLast, dropped := h.burst, 0.0, false
	fwIndex, fwCount := -1.0, 0
	swStart, swCurr, swPrev := -1.0, 0, 0
	banSecond, banHits, bannedTill := -1.0, 0, -1.0
	busy := 0
	var waiting []*simReq
	// Client state.
	cRate := ctrl.Rate()
	cTokens, cLast := 1.0, 0.0
	inFlight, paused, gen := 0, 0.0, 0
	ready := sc.pages // URLs ready to send
	if sc.pages == 0 {
		ready = math.MaxInt
	}
	nextTrace := 0.0

	advanceClient := func(t float64) {
		cTokens = min(1, cTokens+(t-cLast)*cRate)
		cLast = t
	}
	var pump func(t float64)
	pump = func(t float64) {
		for ready > 0 {
			if t < paused {
				gen++
				push(simEvent{t: paused, kind: evWake, gen: gen})
				return
			}
			if inFlight >= ctrl.Window() {
				return
			}
			advanceClient(t)
			if cTokens < 1 {
				gen++
				push(simEvent{t: t + (1-cTokens)/cRate + 1e-9 + late(), kind: evWake, gen: gen})
				return
			}
			cTokens--
			inFlight++
			ready--
			push(simEvent{t: t + oneWay(), kind: evArrive, r: &simReq{sent: t, inFlight: inFlight}})
		}
	}
	startService := func(t float64, r *simReq) {
		d := h.service
		if h.sigma > 0 {
			d *= math.Exp(h.sigma * rnd.NormFloat64())
		}
		push(simEvent{t: t + d, kind: evFinish, r: r})
	}

	pump(0)
	for q.Len() > 0 {
		e := heap.Pop(&q).(simEvent)
		t := e.t
		if t > sc.duration {
			break
		}
		for nextTrace <= t {
			res.trace = append(res.trace, tracePoint{t: nextTrace, rate: ctrl.Rate(), window: ctrl.Window()})
			nextTrace += sc.traceEvery
		}
		switch e.kind {
		case evWake:
			if e.gen == gen {
				pump(t)
			}
		case evArrive:
			r := e.r
			if h.banCount > 0 {
				if sec := math.Floor(t); sec != banSecond {
					banSecond, banHits = sec, 0
				}
				banHits++
				if t < bannedTill || banHits > h.banCount {
					bannedTill = t + h.banFor
					r.rejected = true
					push(simEvent{t: t + oneWay(), kind: evRespond, r: r})
					continue
				}
			} else if h.sliding > 0 {
				if swStart < 0 {
					swStart = t
				}
				if n := math.Floor((t - swStart) / h.sliding); n >= 1 {
					swPrev = 0
					if n == 1 {
						swPrev = swCurr
					}
					swCurr, swStart = 0, swStart+n*h.sliding
				}
				swCurr++
				if float64(swCurr)+float64(swPrev)*(h.sliding-(t-swStart))/h.sliding > float64(h.quota) {
					r.rejected, r.retryIn = true, h.slidingRetry
					push(simEvent{t: t + oneWay(), kind: evRespond, r: r})
					continue
				}
			} else if h.window > 0 {
				if w := math.Floor(t / h.window); w != fwIndex {
					fwIndex, fwCount = w, 0
				}
				if fwCount >= h.quota {
					r.rejected = true
					r.retryIn = max(1, math.Ceil((fwIndex+1)*h.window-t))
					push(simEvent{t: t + oneWay(), kind: evRespond, r: r})
					continue
				}
				fwCount++
			} else if h.limit > 0 {
				if h.dropAt > 0 && !dropped && t >= h.dropAt {
					sTokens = min(h.burst, sTokens+(h.dropAt-sLast)*h.limit)
					sLast = h.dropAt
					h.limit *= h.dropBy
					dropped = true
				}
				sTokens = min(h.burst, sTokens+(t-sLast)*h.limit)
				sLast = t
				if sTokens < 1 {
					r.rejected = true
					r.retryIn = max(1, math.Ceil((1-sTokens)/h.limit))
					if h.retryFixed > 0 {
						r.retryIn = h.retryFixed
					}
					push(simEvent{t: t + oneWay(), kind: evRespond, r: r})
					continue
				}
				sTokens--
			}
			if h.workers > 0 && busy >= h.workers {
				waiting = append(waiting, r)
				res.maxQueue = max(res.maxQueue, len(waiting))
				continue
			}
			busy++
			startService(t, r)
		case evFinish:
			busy--
			if len(waiting) > 0 {
				next := waiting[0]
				waiting = waiting[1:]
				busy++
				startService(t, next)
			}
			push(simEvent{t: t + oneWay(), kind: evRespond, r: e.r})
		case evRespond:
			r := e.r
			inFlight--
			o := Outcome{Signal: Success, Sent: simTime(r.sent), Latency: time.Duration((t - r.sent) * float64(time.Second)), InFlight: r.inFlight, Demand: sc.demand}
			if r.rejected {
				o.Signal = Overload
				res.over++
				res.overAt = append(res.overAt, t)
				ready++
				if !sc.noPause && r.retryIn > 0 {
					paused = max(paused, t+r.retryIn)
					o.Pause = time.Duration(r.retryIn * float64(time.Second))
				}
			} else {
				o.Stated = sc.stated
				res.ok++
				res.okAt = append(res.okAt, t)
				res.okLat = append(res.okLat, t-r.sent)
			}
			ctrl.Observe(simTime(t), o)
			sc.trail.note(ctrl)
			if nr := ctrl.Rate(); nr != cRate {
				advanceClient(t)
				cRate = nr
			}
			if sc.pages > 0 && res.ok == sc.pages {
				res.makespan = t
				res.finalStats = ctrl.Stats()
				return res
			}
			pump(t)
		}
	}
	res.makespan = sc.duration
	res.finalStats = ctrl.Stats()
	return res
}

func (r *simResult) logTimeline(t *testing.T, every float64) {
	t.Helper()
	step := 0.0
	for _, p := range r.trace {
		if p.t+1e-9 >= step {
			t.Logf("  t=%6.1fs rate=%8.2f window=%d ok/s=%7.2f 429s=%d", p.t, p.rate, p.window,
				r.throughput(p.t, p.t+every), r.overIn(p.t, p.t+every))
			step += every
		}
	}
}

// backUnder returns how long after `from` the controller's rate came down to at most limit and
// then stayed there for hold (-1 if it never did before the trace ends).
func (r *simResult) backUnder(from, limit, hold float64) float64 {
	start := -1.0
	for _, p := range r.trace {
		if p.t < from {
			continue
		}
		if p.rate > limit*1.001 {
			start = -1
			continue
		}
		if start < 0 {
			start = p.t
		}
		if p.t-start >= hold {
			return start - from
		}
	}
	return -1
}

func TestSimTokenBucket(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		sc          simConfig
		maxMakespan float64 // × ideal (pages / L)
		minTput     float64 // × L, from 10s to the end
	}{
		// A burst-1 host is measured by the gaps between requests (singleTokenLimit): counting
		// with a 1.5-token burst allowance alone held L=5 at 77–80% of L.
		{"L=20 burst 1", simConfig{host: simHost{limit: 20, service: 0.02}, pages: 2000, jitter: 0.001}, 1.13, 0.91},
		{"L=5 burst 1", simConfig{host: simHost{limit: 5, service: 0.02}, pages: 500, jitter: 0.001}, 1.12, 0.92},
		// A one-token bucket ridden a little above its rate for long refuses as late as a big
		// bucket ridden further above a lower rate; the gaps tell them apart (singleTokenLimit).
		{"L=2 burst 1", simConfig{host: simHost{limit: 2, service: 0.02}, pages: 200, jitter: 0.001}, 1.08, 0.92},
		// No Retry-After: refusals cost no pause, so the return and search are quicker
		// (quickShare × returnTime): makespan 1.057x, 96.2% after 10 s.
		{"L=20 no Retry-After", simConfig{host: simHost{limit: 20, service: 0.02}, pages: 2000, jitter: 0.001, noPause: true}, 1.10, 0.935},
		// A burst refills during every Retry-After pause and hides the limit at first. The
		// second refusal measures it (R4): the rate rides at beta × it and the probe starts at
		// once, drawing a third refusal (1.116x, 94.9% and 1.113x, 95.9%).
		{"L=50 burst 3", simConfig{host: simHost{limit: 50, burst: 3, service: 0.05}, pages: 3000, jitter: 0.001}, 1.12, 0.945},
		{"L=100 burst 5", simConfig{host: simHost{limit: 100, burst: 5, service: 0.02}, pages: 5000, jitter: 0.001}, 1.12, 0.955},
		// 5ms of jitter each way on a 50ms interval: a burst-1 bucket refuses some requests
		// paced below L. Physics, not the controller: only the politeness bound is kept.
		{"L=20 burst 1, 5ms jitter", simConfig{host: simHost{limit: 20, service: 0.02}, pages: 2000, jitter: 0.005}, 1.25, 0.83},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc := tc.sc
			sc.duration, sc.rtt, sc.seed = 1000, 0.01, 1
			r := runSim(sc)
			ideal := float64(sc.pages) / sc.host.limit
			over := float64(r.over) / float64(r.ok)
			tput := r.throughput(10, r.makespan) / sc.host.limit
			t.Logf("pages %d, over-limit %d (%.2f%%), makespan %.1fs = %.3f × ideal %.0fs, throughput after 10s %.1f%% of L",
				r.ok, r.over, 100*over, r.makespan, r.makespan/ideal, ideal, 100*tput)
			if r.ok != sc.pages {
				t.Fatalf("crawl did not finish: %d of %d pages", r.ok, sc.pages)
			}
			if over > 0.01 {
				t.Errorf("over-limit replies %.2f%% of pages, want ≤ 1%%", 100*over)
			}
			if r.makespan > tc.maxMakespan*ideal {
				t.Errorf("makespan %.3f × ideal, want ≤ %.2f", r.makespan/ideal, tc.maxMakespan)
			}
			if tput < tc.minTput {
				t.Errorf("steady throughput %.1f%% of L, want ≥ %.0f%%", 100*tput, 100*tc.minTput)
			}
		})
	}
}

func TestSimLimitDrop(t *testing.T) {
	t.Parallel()
	for _, noPause := range []bool{false, true} {
		name := "Retry-After honoured"
		if noPause {
			name = "no Retry-After"
		}
		t.Run(name, func(t *testing.T) {
			// 40 req/s, divided by 4 at 30s.
			sc := simConfig{host: simHost{limit: 40, service: 0.02, dropAt: 30, dropBy: 0.25}, duration: 70, rtt: 0.01, jitter: 0.001, noPause: noPause, seed: 1}
			r := runSim(sc)
			rec := r.backUnder(30, 10, 5)
			t.Logf("back under 10 req/s %.1fs after the drop; %d over-limit replies in the 10s after it; throughput 40-70s %.1f req/s",
				rec, r.overIn(30, 40), r.throughput(40, 70))
			r.logTimeline(t, 5)
			if rec < 0 || rec > 5 {
				t.Errorf("back under the new limit after %.1fs, want within 5s", rec)
			}
			// 80%: after the halving the limit is measured with a 1.5-token burst allowance (~8%
			// low on this burst-1 host) and held at beta × that.
			if tp := r.throughput(40, 70); tp < 0.8*10 {
				t.Errorf("throughput after recovery %.1f req/s, want ≥ 80%% of 10", tp)
			}
			if r.overIn(40, 70) > 2 {
				t.Errorf("%d over-limit replies after recovery", r.overIn(40, 70))
			}
		})
	}
}

func TestSimRisingLimit(t *testing.T) {
	t.Parallel()
	// 10 req/s, tripled at 30s: the probe finds the new limit.
	sc := simConfig{host: simHost{limit: 10, service: 0.02, dropAt: 30, dropBy: 3}, duration: 150, rtt: 0.01, jitter: 0.001, seed: 1}
	r := runSim(sc)
	var found float64 = -1
	for _, p := range r.trace {
		if p.t > 30 && p.rate >= 0.9*30 {
			found = p.t - 30
			break
		}
	}
	t.Logf("rate reached 90%% of the risen limit %.0fs after the rise; throughput 120-150s %.1f req/s; over-limit %d", found, r.throughput(120, 150), r.over)
	if found < 0 || found > 90 {
		t.Errorf("risen limit found after %.0fs, want within 90s", found)
	}
	// 85%: above a measured limit the probe rises slowly (a limit that rises is rarer than one
	// that holds).
	if tp := r.throughput(120, 150); tp < 0.85*30 {
		t.Errorf("throughput %.1f, want ≥ 85%% of 30", tp)
	}
}

func TestSimLatencyOnly(t *testing.T) {
	t.Parallel()
	// W workers, service time S, never a refusal: latency is the only signal.
	tests := []struct {
		workers int
		service float64
	}{
		{4, 0.1}, {2, 0.2}, {6, 0.05}, {8, 0.03}, {1, 0.05},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("W=%d S=%gms", tc.workers, tc.service*1000), func(t *testing.T) {
			sc := simConfig{host: simHost{workers: tc.workers, service: tc.service}, duration: 60, rtt: 0.002, jitter: 0.0005, seed: 1}
			r := runSim(sc)
			ideal := float64(tc.workers) / tc.service
			tput, p95 := r.throughput(10, 60), r.p95(10, 60)
			t.Logf("throughput %.1f req/s = %.1f%% of W/S; p95 %.1fms = %.2f × S; window %d; peak queue %d",
				tput, 100*tput/ideal, p95*1000, p95/tc.service, r.finalStats.Window, r.maxQueue)
			if tput < 0.8*ideal {
				t.Errorf("throughput %.1f%% of W/S, want ≥ 80%%", 100*tput/ideal)
			}
			if p95 > 1.5*tc.service {
				t.Errorf("p95 %.2f × S, want ≤ 1.5", p95/tc.service)
			}
			if r.over != 0 {
				t.Errorf("%d refusals from a host that never refuses", r.over)
			}
		})
	}
}

func TestSimSpreadLatency(t *testing.T) {
	t.Parallel()
	// Real servers' latencies spread (log-normal service times, p95 2-5x the median) whether
	// or not we load them. The spread alone must not read as congestion: an unlimited host runs
	// at the full window, a rate-limited one at its limit. A worker pool with spread service
	// times must still be found. 20 seeds each; the worst and the mean are checked. A signal
	// that compared recent latencies with a reference of a few lucky requests sent alone fell to
	// 22-49% on the worst seeds; one that asks for a concurrency at which most were slow does not.
	const window = 8 // DefaultMaxWindow
	tests := []struct {
		name       string
		host       simHost
		ideal      float64 // req/s
		worst, avg float64 // fractions of ideal
	}{
		// Unlimited: the window bounds, ideal = window / mean latency (rtt + median·e^(σ²/2)).
		{"unlimited σ=0.5", simHost{service: 0.1, sigma: 0.5}, window / (0.021 + 0.1*math.Exp(0.125)), 0.9, 0.95},
		{"unlimited σ=1", simHost{service: 0.1, sigma: 1}, window / (0.021 + 0.1*math.Exp(0.5)), 0.85, 0.9},
		{"20/s burst 5 σ=0.5", simHost{limit: 20, burst: 5, service: 0.15, sigma: 0.5}, 20, 0.85, 0.9},
		{"20/s burst 5 σ=0.8", simHost{limit: 20, burst: 5, service: 0.15, sigma: 0.8}, 20, 0.8, 0.88},
		// Four workers: capacity = 4 / mean service time.
		{"4 workers σ=0.5", simHost{workers: 4, service: 0.1, sigma: 0.5}, 4 / (0.1 * math.Exp(0.125)), 0.8, 0.9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			worst, sum := math.Inf(1), 0.0
			for seed := int64(1); seed <= 20; seed++ {
				r := runSim(simConfig{host: tc.host, duration: 60, rtt: 0.02, jitter: 0.002, seed: seed})
				f := r.throughput(10, 60) / tc.ideal
				worst, sum = min(worst, f), sum+f
			}
			t.Logf("throughput in 10-60 s: mean %.1f%%, worst %.1f%% of %.1f req/s", 5*sum, 100*worst, tc.ideal)
			if worst < tc.worst || sum/20 < tc.avg {
				t.Errorf("mean %.1f%%, worst %.1f%%; want ≥ %.0f%% and ≥ %.0f%%", 5*sum, 100*worst, 100*tc.avg, 100*tc.worst)
			}
		})
	}
}

func TestSimUnlimited(t *testing.T) {
	t.Parallel()
	// No limit at all: full speed is MaxWindow (8) requests in flight.
	sc := simConfig{host: simHost{service: 0.02}, duration: 10, rtt: 0.002, jitter: 0.0005, seed: 1}
	r := runSim(sc)
	full := 8 / (0.02 + 0.002 + 0.0005)
	reached := -1.0
	for t0 := 0.0; t0 < 10; t0 += 0.1 {
		if r.throughput(t0, t0+0.5) >= 0.9*full {
			reached = t0 + 0.5
			break
		}
	}
	t.Logf("90%% of full speed (%.0f req/s) reached after %.1fs; final rate %.0f, window %d", full, reached, r.finalStats.Rate, r.finalStats.Window)
	if reached < 0 || reached > 4 {
		t.Errorf("full speed reached after %.1fs, want within a few (4) seconds", reached)
	}
}

// TestSimShortCrawl mirrors the politeness benchmark (bench/crawlbench): short crawls at a few
// hidden limits, where every over-limit reply costs a whole-second Retry-After pause that is a
// visible share of the makespan, and the rate starts at the crawler's default of 2 req/s.
func TestSimShortCrawl(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		host        simHost
		pages       int
		noPause     bool
		maxMakespan float64 // × ideal
		maxOver     int
	}{
		// Bounds are regression guards at today's figures (the real benchmark agrees with these
		// within a few %); the product targets (≤ 1.1x, ~1 refusal per host) are not met yet.
		// "L=10 burst 2" drew a third refusal when a measured refusal still left the climb's
		// overshoot to be searched. After the Retry-After pause the refilled burst counts in
		// the second refusal's measure (R4): "L=50 burst 5" rides above the limit until a third
		// refusal (1.202x).
		{"L=10 burst 2", simHost{limit: 10, burst: 2}, 150, false, 1.22, 2},
		{"L=10 burst 3", simHost{limit: 10, burst: 3}, 150, false, 1.25, 3},
		{"L=8 burst 1 no Retry-After", simHost{limit: 8, burst: 1}, 100, true, 1.2, 2},
		{"L=50 burst 5", simHost{limit: 50, burst: 5}, 1000, false, 1.21, 3},
		{"L=20→5 at 5s burst 2", simHost{limit: 20, burst: 2, dropAt: 5, dropBy: 0.25}, 200, false, 1.7, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc := simConfig{host: tc.host, pages: tc.pages, noPause: tc.noPause, duration: 300, rtt: 0.001, jitter: 0.0005, seed: 1}
			sc.host.service = 0.001
			r := runSim(sc)
			ideal := float64(tc.pages) / tc.host.limit
			if d := tc.host.dropAt; d > 0 && ideal > d {
				ideal = d + (float64(tc.pages)-tc.host.limit*d)/(tc.host.limit*tc.host.dropBy)
			}
			t.Logf("makespan %.2fs = %.3f × ideal %.1fs; over-limit %d at %v", r.makespan, r.makespan/ideal, ideal, r.over, r.overAt)
			r.logTimeline(t, 1)
			if r.makespan > tc.maxMakespan*ideal {
				t.Errorf("makespan %.3f × ideal, want ≤ %.2f", r.makespan/ideal, tc.maxMakespan)
			}
			if r.over > tc.maxOver {
				t.Errorf("%d over-limit replies, want ≤ %d", r.over, tc.maxOver)
			}
		})
	}
}

// checkQuotaCrawl runs sc (a crawl of sc.pages) and checks that it finished within
// maxMakespan × ideal with at most maxOver over-limit replies per page.
func checkQuotaCrawl(t *testing.T, sc simConfig, ideal, maxMakespan, maxOver float64) *simResult {
	t.Helper()
	r := runSim(sc)
	over := float64(r.over) / float64(r.ok)
	t.Logf("over-limit %d (%.2f%%), makespan %.1fs = %.3f × ideal %.0fs, final rate %.2f",
		r.over, 100*over, r.makespan, r.makespan/ideal, ideal, r.finalStats.Rate)
	if r.ok != sc.pages {
		t.Fatalf("crawl did not finish: %d of %d pages", r.ok, sc.pages)
	}
	if r.makespan > maxMakespan*ideal {
		t.Errorf("makespan %.3f × ideal, want ≤ %.2f", r.makespan/ideal, maxMakespan)
	}
	if over > maxOver {
		t.Errorf("over-limit replies %.2f%% of pages, want ≤ %.1f%%", 100*over, 100*maxOver)
	}
	return r
}

// TestSimFixedWindow: a fixed-window counter is no token bucket; the controller (whose
// measures count tokens) must still ride it. Bounds are regression guards at
// today's figures. Ideal = pages at quota/window.
func TestSimFixedWindow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		window      float64
		quota       int
		maxMakespan float64 // × ideal
		maxOver     float64 // over-limit replies per page
	}{
		{2, 20, 1.06, 0.006},
		{1, 10, 1.09, 0.005},
		{1, 5, 1.1, 0.005},
		// Ten seconds' quota taken in a burst, then a pause to the next window: about one
		// refusal per window (quota 100: 1.2%), and faster than pacing at quota/window.
		{10, 100, 1.0, 0.013},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d per %gs", tc.quota, tc.window), func(t *testing.T) {
			sc := simConfig{host: simHost{window: tc.window, quota: tc.quota, service: 0.02}, pages: 2000,
				duration: 2000, rtt: 0.01, jitter: 0.001, seed: 1}
			checkQuotaCrawl(t, sc, float64(sc.pages)*tc.window/float64(tc.quota), tc.maxMakespan, tc.maxOver)
		})
	}
}

// TestSimSlidingWindow: HAProxy's stick-table rate limit counts every request over a sliding
// period, refused ones included, and refuses without Retry-After by default: a client that
// takes a long period's quota in a burst is refused whatever it sends until the period has
// slid past the burst. The controller must come back to the quota's rate afterwards, not to
// the rate its refusals halved it to (before a run's end returned the rate: 3.5x the ideal at 10 per 1 s, 29x at
// 100 per 10 s, 34x at 300 per 60 s), must not search back toward slow start's refused rate
// (hundreds of req/s: each step overshot into another block), and a run resumed soon after
// the last is the same episode (else it was measured over the backoff alone: 100 per 10 s
// with 1-ms pages took 3.2x–3.6x). Each case runs seeds 1–4 and checks the worst; bounds are
// regression guards at today's figures. A long period punishes every
// overshoot for the whole period (slow start's, a probe's) with a run of refusals, hence over
// 1% there. Ideal = pages at quota/period.
func TestSimSlidingWindow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		period, retry float64
		quota         int
		service       float64 // s
		maxMakespan   float64 // × ideal
		maxOver       float64 // over-limit replies per page
	}{
		{1, 0, 10, 0.02, 1.25, 0.005},
		{1, 1, 20, 0.02, 1.2, 0.004},
		{10, 0, 100, 0.02, 1.15, 0.016},
		{10, 0, 100, 0.001, 1.2, 0.014}, // before resumed runs and the bounded search: 3.2x–3.6x
		{60, 0, 300, 0.02, 1.05, 0.02},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d per %gs retry %gs service %gs", tc.quota, tc.period, tc.retry, tc.service), func(t *testing.T) {
			t.Parallel()
			for seed := int64(1); seed <= 4; seed++ {
				sc := simConfig{host: simHost{sliding: tc.period, slidingRetry: tc.retry, quota: tc.quota, service: tc.service}, pages: 2000,
					duration: 20000, rtt: 0.01, jitter: 0.001, seed: seed}
				r := checkQuotaCrawl(t, sc, float64(sc.pages)*tc.period/float64(tc.quota), tc.maxMakespan, tc.maxOver)
				if testing.Verbose() && seed == 1 {
					r.logTimeline(t, r.makespan/20)
				}
			}
		})
	}
}

// TestSimBan: a host that bans a client sending more than banCount requests in a second, for
// banFor seconds that each request restarts (mod_evasive). Slow start meets the ban once; the
// halvings then leave a gap as long as the ban, and the episode's measurement (the requests
// accepted over the burst and the ban) puts the rate far under the limit. The search above it
// is bounded (see runEnd); holding just under the bound for longer than the run lasted,
// unrefused, proves the bound was the backoff's, so it doubles; and after a later ban the rate
// returns to what was held before it for as long as the run lasted, not to the episode's
// measurement. Before both, the rate stayed near twice the first measurement (~6 req/s
// against 50) for minutes: 6.0x–6.3x the ideal with 1.7% refusals over seeds 1–4; with the
// doubling 2.9x–3.0x with 1.0%; with both 2.3x–2.5x with 0.67%–0.97%. Bounds are regression
// guards at today's figures. Ideal = pages at banCount per second.
func TestSimBan(t *testing.T) {
	t.Parallel()
	for seed := int64(1); seed <= 4; seed++ {
		sc := simConfig{host: simHost{banCount: 50, banFor: 5, service: 0.001}, pages: 3000,
			duration: 3000, rtt: 0.001, jitter: 0.0005, seed: seed}
		r := checkQuotaCrawl(t, sc, float64(sc.pages)/50, 2.7, 0.011)
		if testing.Verbose() && seed == 1 {
			r.logTimeline(t, r.makespan/20)
		}
	}
}

// TestSimLongRetryAfter: a token bucket (10 req/s, burst 2) whose refusals ask for a fixed,
// long pause, as many servers' "Retry-After: 60" does. Every refusal costs the whole pause, so
// probing above a limit that has not moved must be rare: before the probe time followed the
// pause (÷ (1 − beta)), 3,000 pages drew 5 refusals (slow start's, the climb's, then a
// probe every 1–2 minutes) and took 1.19x the ideal at 10 s, 1.52x at 30 s and 2.02x at 60 s.
// Now 2, 2 and 2 (1.12x, 1.28x, 1.48x): the two refusals that find the limit, and probes only
// every 33 pauses. Bounds are regression guards at today's figures.
func TestSimLongRetryAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pause       float64 // s
		maxOver     int
		maxMakespan float64 // × ideal
	}{
		{10, 3, 1.14},
		{30, 2, 1.28},
		{60, 2, 1.48},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("Retry-After %gs", tc.pause), func(t *testing.T) {
			for seed := int64(1); seed <= 2; seed++ {
				sc := simConfig{host: simHost{limit: 10, burst: 2, service: 0.02, retryFixed: tc.pause},
					pages: 3000, duration: 5000, rtt: 0.01, jitter: 0.001, seed: seed}
				r := runSim(sc)
				ideal := float64(sc.pages) / sc.host.limit
				t.Logf("seed %d: over-limit %d at %.0fs, makespan %.1fs = %.3f × ideal %.0fs",
					seed, r.over, r.overAt, r.makespan, r.makespan/ideal, ideal)
				if r.ok != sc.pages {
					t.Fatalf("crawl did not finish: %d of %d pages", r.ok, sc.pages)
				}
				if r.over > tc.maxOver || r.makespan > tc.maxMakespan*ideal {
					t.Errorf("seed %d: %d refusals, makespan %.3f × ideal; want ≤ %d and ≤ %.2f",
						seed, r.over, r.makespan/ideal, tc.maxOver, tc.maxMakespan)
				}
			}
		})
	}
}

// TestSimBigBurstBare: token buckets with a big burst that refuse with a bare 503 or 429 (nginx
// "limit_req ... burst=20 nodelay" without Retry-After, a common setup). The burst hides the
// limit: slow start is refused at several times it, and with no pause the bucket stays empty
// afterwards. Three rules used to misread the refusals that follow. The rule that ends a
// refusal run (made for sliding windows) took two quick refusals for a window's block and
// returned the rate to what the host accepted, burst included (3x the limit); the rate then
// fell 3% per refusal (33–98 refusals in the first seconds). At 1 req/s the halvings take
// longer than minSpan, so the run is taken for a block: its end returned the rate to the burst
// over the run's length (19 req/s), and every run that resumed the episode came back to 3%
// under the last (196 refusals in 300 pages). And the refusals above the limit taught a
// background share (learned under 0.6 × the first bare cut, itself 3.5x the limit), under
// which the controller sent 29 req/s to a 10 req/s host (4,044 refusals in 3,000 pages). Now a
// run shorter than minSpan is no window's block, a resumed run's end is also held to what the
// host accepted since the episode's first run ended (over at least as long as its longest run:
// a window's quota per period, a bucket's refill; Controller.runEnd), and a refusal with 5 or
// more of 16 refused lowers the rate the share is learned under (failureLog.excess).
func TestSimBigBurstBare(t *testing.T) {
	t.Parallel()
	tests := []struct {
		h           simHost
		pages       int
		rtt         float64
		maxOver     int
		maxMakespan float64 // × ideal
	}{
		{simHost{limit: 10, burst: 20}, 3000, 0.01, 30, 1.05},
		{simHost{limit: 10, burst: 50}, 3000, 0.01, 30, 1.05},
		{simHost{limit: 10, burst: 100}, 3000, 0.01, 30, 1.05},
		{simHost{limit: 5, burst: 30}, 3000, 0.01, 30, 1.05},
		// The probe's refusals at 38 s measure their epoch (R4): the rate falls to 27 req/s
		// and returns to 44 (1.088x).
		{simHost{limit: 50, burst: 100}, 3000, 0.01, 30, 1.09},
		// 40 s of tokens at 1 req/s, 100 ms away: slow start's run alone draws 15 refusals.
		// The measure of 4 successes over 3.4 s (R4) leaves the plateau at 0.71 req/s; the
		// probe reaches 1.25 × it unrefused, and slow start, restarted, spends the refilled
		// burst and draws 25 more refusals (49, 1.101x).
		{simHost{limit: 1, burst: 40}, 300, 0.1, 49, 1.11},
	}
	for _, tc := range tests {
		h := tc.h
		t.Run(fmt.Sprintf("L=%g burst %g rtt %gs", h.limit, h.burst, tc.rtt), func(t *testing.T) {
			h.service = 0.02
			sc := simConfig{host: h, pages: tc.pages, duration: 5000, rtt: tc.rtt, jitter: 0.002, noPause: true, seed: 1}
			r := runSim(sc)
			ideal := (float64(sc.pages) - h.burst) / h.limit
			t.Logf("over-limit %d (%.2f%%), makespan %.1fs = %.3f × ideal, final rate %.2f",
				r.over, 100*float64(r.over)/float64(r.ok), r.makespan, r.makespan/ideal, r.finalStats.Rate)
			if r.ok != sc.pages {
				t.Fatalf("crawl did not finish: %d of %d pages", r.ok, sc.pages)
			}
			if r.over > tc.maxOver || r.finalStats.Rate > 1.2*h.limit || r.makespan > tc.maxMakespan*ideal {
				t.Errorf("over-limit %d, final rate %.2f, makespan %.3f × ideal; want ≤ %d, ≤ %.2f, ≤ %.2f",
					r.over, r.finalStats.Rate, r.makespan/ideal, tc.maxOver, 1.2*h.limit, tc.maxMakespan)
			}
		})
	}
}

// TestSimLateTimer: a pacer whose timer wakes late (a loaded machine's dispatcher) loses the
// lateness from every interval of its one-token bucket (0.832, 0.814 and 0.745 of the ideal
// at up to 0, 5 and 10 ms late), and draws no more refusals than on time.
func TestSimLateTimer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ late, minShare float64 }{{0, 0.83}, {0.005, 0.81}, {0.010, 0.74}} {
		sc := simConfig{host: simHost{limit: 50, burst: 5, service: 0.001}, pages: 1000, duration: 300, rtt: 0.001, jitter: 0.0005, seed: 1, late: tc.late}
		r := runSim(sc)
		share := 20 / r.makespan
		t.Logf("timer up to %.0f ms late: %.3f of the ideal, %d refusals", tc.late*1000, share, r.over)
		if share < tc.minShare || r.over > 3 {
			t.Errorf("timer up to %.0f ms late: %.3f of the ideal with %d refusals, want ≥ %.2f with ≤ 3", tc.late*1000, share, r.over, tc.minShare)
		}
	}
}
