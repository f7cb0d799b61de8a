package crawler

import (
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/internal/urlnorm"
	"github.com/crawl-project/crawl/storage"
)

// recorder is an Observer that keeps what it is told.
type recorder struct {
	mu        sync.Mutex
	requests  map[string]int // by host
	overLimit int
	retries   map[string]int // by reason
	waits     int
	ticks     []Tick
}

func (r *recorder) Request(e RequestEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests[e.Host]++
	if e.OverLimit() {
		r.overLimit++
	}
}
func (r *recorder) Retry(host, reason string) {
	r.mu.Lock()
	r.retries[reason]++
	r.mu.Unlock()
}
func (r *recorder) BudgetExhausted(host, scope string) {}
func (r *recorder) LimiterWait(host string, wait time.Duration) {
	r.mu.Lock()
	r.waits++
	r.mu.Unlock()
}
func (r *recorder) Tick(t Tick) {
	r.mu.Lock()
	r.ticks = append(r.ticks, t)
	r.mu.Unlock()
}

// TestObservedCrawl checks the events, the run counters and the samples of a crawl against
// what the simulated servers themselves counted.
func TestObservedCrawl(t *testing.T) {
	t.Parallel()
	web, err := simweb.Start(simweb.Small(), &simweb.Options{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	cfg := testConfig(t, web)
	cfg.InitialRate = 100 // so that host b (50 req/s) answers some 429s
	rec := &recorder{requests: map[string]int{}, retries: map[string]int{}}
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.SetObserver(rec)
	sum, err := c.Run(t.Context())
	if cerr := c.Close(); cerr != nil {
		t.Error(cerr)
	}
	if err != nil {
		t.Fatal(err)
	}

	hostKey := map[string]string{} // simweb name -> host key
	for _, n := range web.Names() {
		u, _ := url.Parse(web.URL(n))
		hostKey[n] = urlnorm.HostKey(u)
	}
	served, over := 0, 0
	for n, s := range web.Stats() {
		served += s.Requests
		over += s.OverLimit
		if got := rec.requests[hostKey[n]]; got != s.Requests {
			t.Errorf("host %s: observer saw %d requests, server %d", n, got, s.Requests)
		}
	}
	if sum.Run == nil || sum.Run.Requests != served || sum.Run.OverLimit != over || rec.overLimit != over {
		t.Errorf("Summary.Run = %+v, observer over-limit %d; servers: %d requests, %d over limit", sum.Run, rec.overLimit, served, over)
	}
	if over > 0 && sum.Run.Retries == 0 {
		t.Errorf("%d over-limit replies but no retry counted", over)
	}
	if rec.waits < sum.Fetched {
		t.Errorf("%d limiter waits observed for %d pages; want one per admitted request", rec.waits, sum.Fetched)
	}
	if len(rec.ticks) < 2 || rec.ticks[len(rec.ticks)-1].Status.Fetched != sum.Fetched {
		t.Errorf("%d ticks; the last must carry the final status", len(rec.ticks))
	}
	t.Logf("run counters %+v, retries by reason %v, %d ticks", *sum.Run, rec.retries, len(rec.ticks))

	// The samples in the store add up to the same totals.
	db, err := storage.Open(cfg.Dir, &storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	wide, err := db.Samples(storage.CrawlWide)
	if err != nil || len(wide) < 2 {
		t.Fatalf("crawl-wide samples: %d, %v", len(wide), err)
	}
	pages, reqs, ol := 0, 0, 0
	for _, s := range wide {
		pages, reqs, ol = pages+s.Pages, reqs+s.Requests, ol+s.OverLimit
	}
	if pages != sum.Fetched || reqs != served || ol != over {
		t.Errorf("crawl-wide samples sum to %d pages, %d requests, %d over limit; want %d, %d, %d", pages, reqs, ol, sum.Fetched, served, over)
	}
	for n, s := range web.Stats() {
		got, err := db.Samples(hostKey[n])
		if err != nil {
			t.Fatal(err)
		}
		req, pg := 0, 0
		for _, x := range got {
			req, pg = req+x.Requests, pg+x.Pages
			if x.Requests > 0 && (x.P95 <= 0 || x.P50 > x.P95) {
				t.Errorf("host %s: sample with %d requests has p50 %v, p95 %v", n, x.Requests, x.P50, x.P95)
			}
			if x.Rate <= 0 {
				t.Errorf("host %s: sample without a rate: %+v", n, x)
			}
		}
		if req != s.Requests || pg != len(web.Expected()[n]) {
			t.Errorf("host %s: samples sum to %d requests, %d pages; servers saw %d requests, expected %d pages", n, req, pg, s.Requests, len(web.Expected()[n]))
		}
	}
}

func TestIntervalLatencies(t *testing.T) {
	cases := []struct {
		name     string
		n        int
		p50, p95 time.Duration
	}{
		{"none", 0, 0, 0},
		{"one", 1, 1, 1},
		{"hundred", 100, 51, 96},
		{"thinned", 10000, 5000, 9500}, // beyond maxLatencies: evenly thinned, quantiles kept
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var iv interval
			for i := 1; i <= tc.n; i++ {
				iv.addLatency(time.Duration(i))
			}
			if len(iv.lat) > maxLatencies {
				t.Fatalf("kept %d latencies, more than %d", len(iv.lat), maxLatencies)
			}
			p50, p95 := iv.quantiles()
			tol := time.Duration(tc.n / 50) // thinning may move a quantile by a couple of percent
			if p50 < tc.p50-tol || p50 > tc.p50+tol || p95 < tc.p95-tol || p95 > tc.p95+tol {
				t.Errorf("p50, p95 = %v, %v; want %v, %v (±%v)", p50, p95, tc.p50, tc.p95, tol)
			}
		})
	}
}

// TestRequestEventCounts: the crawl's counters read statuses as the host's controller does
// (retry.KindOf), the non-standard "slow down" codes included.
func TestRequestEventCounts(t *testing.T) {
	tests := []struct {
		status            int
		overLimit, failed bool
	}{
		{0, false, true}, {200, false, false}, {301, false, false}, {404, false, false},
		{408, false, false}, {420, true, false}, {429, true, false}, {500, false, true},
		{502, false, true}, {503, true, false}, {509, true, false}, {529, true, false},
	}
	for _, tc := range tests {
		e := RequestEvent{Host: "h", Status: tc.status}
		if e.OverLimit() != tc.overLimit || e.Failed() != tc.failed {
			t.Errorf("status %d: OverLimit %v, Failed %v; want %v, %v", tc.status, e.OverLimit(), e.Failed(), tc.overLimit, tc.failed)
		}
	}
}
