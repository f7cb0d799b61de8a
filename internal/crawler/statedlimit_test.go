package crawler

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawl-project/crawl/fetch"
	"github.com/crawl-project/crawl/hostlimit"
	"github.com/crawl-project/crawl/internal/retry"
	"github.com/crawl-project/crawl/internal/simweb"
)

// simClock is a clock the test sets; the simulated web and the host's gate both read it.
type simClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *simClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *simClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// simCrawl is what crawlSim measured on one host: its share of the ideal (IdealMakespan over
// the time from its first request to its last) and the share of its requests it refused.
type simCrawl struct {
	ofIdeal, refused float64
	requests         int
}

// crawlSim fetches spec's host's robots.txt and every page, one request at a time, on fake
// time: the host (a simweb host on the test's clock, its handler called in-process) answers
// each request at the instant it is sent and the answer is read lat later, through the
// crawler's own reading of the answer (honourRetryAfter, responseOutcome, endRequest) and a
// registry on the same clock. A refused page is fetched again when the gate next admits a
// request.
func crawlSim(t *testing.T, spec simweb.HostSpec) simCrawl {
	t.Helper()
	return crawlSimBurst(t, spec, 2)
}

// crawlSimBurst is crawlSim where, once three pages are fetched, burst more requests leave at
// the instant of the next admitted one, past the gate, as a starved machine's late sends
// bunch up; their answers are read as the others are.
func crawlSimBurst(t *testing.T, spec simweb.HostSpec, burst int) simCrawl {
	t.Helper()
	const host, lat = "a.test", 5 * time.Millisecond
	clk := &simClock{t: time.Date(2026, 12, 1, 12, 0, 0, 300e6, time.UTC)}
	web, err := simweb.Start([]simweb.HostSpec{spec}, &simweb.Options{Seed: 1, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	serve := web.Handler(spec.Name)
	get := func(u string) *http.Response {
		rec := httptest.NewRecorder()
		serve.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, u, nil))
		return rec.Result()
	}
	c := &Crawler{
		opened:    opened{reg: hostlimit.New(hostlimit.Config{Now: clk.Now}, nil), log: slog.New(slog.NewTextHandler(io.Discard, nil))},
		hostTable: hostTable{hosts: map[string]*hostRecord{}},
	}
	queue := append([]string{web.URL(spec.Name) + "robots.txt"}, web.Expected()[spec.Name]...)
	deadline := clk.Now().Add(100 * simweb.IdealMakespan(spec))
	fetched := 0
	for len(queue) > 0 {
		now := clk.Now()
		if now.After(deadline) {
			t.Fatalf("%s: %d pages left after %v of fake time", spec.Name, len(queue), 100*simweb.IdealMakespan(spec))
		}
		tk, ready := c.reg.TryAdmit(now, host)
		if tk == nil {
			if !ready.After(now) {
				t.Fatalf("%s: the gate admits nothing and names no time (%v)", spec.Name, ready)
			}
			clk.Set(ready)
			continue
		}
		if fetched == 4 && burst > 0 {
			for range burst {
				r := get(queue[0])
				resp := &fetch.Response{Status: r.StatusCode, Header: r.Header, Started: now, HeaderLatency: lat}
				c.honourRetryAfter(host, resp, now.Add(lat))
			}
			burst = 0
		}
		r := get(queue[0])
		received := now.Add(lat)
		clk.Set(received)
		resp := &fetch.Response{Status: r.StatusCode, Header: r.Header, Started: now, HeaderLatency: lat}
		a := c.honourRetryAfter(host, resp, received)
		c.endRequest(tk, received, responseOutcome(retry.ClassifyStatus(r.StatusCode).Signal, now, resp, a))
		if r.StatusCode == http.StatusOK {
			queue = queue[1:]
			fetched++
		}
	}
	st := web.Stats()[spec.Name]
	return simCrawl{
		ofIdeal:  simweb.IdealMakespan(spec).Seconds() / st.LastRequest.Sub(st.FirstRequest).Seconds(),
		refused:  float64(st.OverLimit) / float64(st.Requests),
		requests: st.Requests,
	}
}

// TestStatedLimitWithoutWindow: limiters that state a limit but not its window
// (X-RateLimit-Limit, -Remaining and -Reset, the reset as delta seconds or a Unix time) are
// crawled at 0.9 of the ideal or more with at most 1% of requests refused: token buckets whose
// reset names their next token (a second away, rounded up), which a wait for the reset paced at
// one request a second, and fixed windows, whose spent quota is waited out. Each is crawled
// beside the same limiter stating nothing, which the statement must not do worse than (by
// more than 2% of the ideal, or below 0.95 of it). On fake time: the figures are the same on
// any machine.
func TestStatedLimitWithoutWindow(t *testing.T) {
	t.Parallel()
	specs := simweb.StatedNoWindowBench()
	got := make(map[string]simCrawl, len(specs))
	var mu sync.Mutex
	t.Run("crawl", func(t *testing.T) {
		for _, sp := range specs {
			t.Run(sp.Name, func(t *testing.T) {
				t.Parallel()
				sp.CrossLinks = nil
				r := crawlSim(t, sp)
				t.Logf("%s: %.3f of the ideal, %.2f%% of %d requests refused", sp.Name, r.ofIdeal, 100*r.refused, r.requests)
				mu.Lock()
				got[sp.Name] = r
				mu.Unlock()
			})
		}
	})
	for _, sp := range specs {
		if sp.Headers == simweb.HeadersNone {
			continue
		}
		r, ok := got[sp.Name]
		if !ok {
			continue // its crawl failed
		}
		if r.ofIdeal < 0.9 || r.refused > 0.01 {
			t.Errorf("%s: %.3f of the ideal, %.2f%% refused; want ≥ 0.9 and ≤ 1%%", sp.Name, r.ofIdeal, 100*r.refused)
		}
		// A fixed window lets its quota through at any speed, and stating nothing its last
		// window may end early; a window stated (or inferred) is paced at 0.97 of its rate.
		kind, _, _ := strings.Cut(sp.Name, "-")
		if none, ok := got[kind+"-none"]; ok && r.ofIdeal < min(none.ofIdeal-0.02, 0.95) {
			t.Errorf("%s: %.3f of the ideal, where stating nothing gave %.3f", sp.Name, r.ofIdeal, none.ofIdeal)
		}
	}
}

// TestStatedResetsRefuted: a bucket of 10 req/s, burst 1, whose answers state X-RateLimit-Limit
// 600, the bucket's Remaining (0 after nearly every request) and the end of a minute as the
// reset, has accepted requests sent a tenth of a second after spent answers; two requests that
// leave together past the gate are refused with a spent quota (and the next request, which
// they left without a token). The crawl goes on at the rate the refusals leave: the host's
// resets were refuted and are not waited for (0.62 of the ideal; without the burst 0.95, the
// rest is the rate's climb back after its cut). Before, two refusals with a spent quota made
// every later spent answer (nearly every one) a wait for the minute's end, and the crawl of 200
// pages, 20 s at the limit, took hours. On fake time.
func TestStatedResetsRefuted(t *testing.T) {
	spec := simweb.HostSpec{Name: "x10", Pages: 200, Limit: 10, Burst: 1, Reply: simweb.Reply429Seconds,
		Headers: simweb.HeadersX, PolicyWindow: time.Minute}
	got := crawlSimBurst(t, spec, 2)
	t.Logf("x10 with two refusals: %.2f of the ideal, %d requests, %.2f%% refused", got.ofIdeal, got.requests, 100*got.refused)
	if got.ofIdeal < 0.5 || got.refused > 0.02 {
		t.Errorf("x10 with two refusals: %.2f of the ideal, %.2f%% refused; want ≥ 0.5 and ≤ 2%%", got.ofIdeal, 100*got.refused)
	}
}
