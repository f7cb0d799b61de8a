package metrics

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"

	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/simweb"
)

type families map[string]*dto.MetricFamily

// scrape fetches and parses the text exposition at url.
func scrape(t *testing.T, url string) families {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Errorf("scrape: %v", err)
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("scrape: %s", resp.Status)
		return nil
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Errorf("parse scrape: %v", err)
	}
	return fams
}

// sum adds the values of name's series whose labels include every label=value in match.
func (f families) sum(name string, match ...string) float64 {
	mf := f[name]
	if mf == nil {
		return -1
	}
	total := 0.0
	for _, m := range mf.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		ok := true
		for _, kv := range match {
			k, v, _ := strings.Cut(kv, "=")
			ok = ok && labels[k] == v
		}
		if !ok {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		}
	}
	return total
}

func (f families) hosts(name string) []string {
	var hs []string
	for _, m := range f[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "host" {
				hs = append(hs, l.GetValue())
			}
		}
	}
	return hs
}

// TestScrapeDuringCrawl crawls the small simulated web with metrics served on loopback,
// scrapes the endpoint while the crawl runs and after it, and checks the figures against what
// the simulated servers counted themselves.
func TestScrapeDuringCrawl(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	specs := simweb.Small()
	specs[1].Limit, specs[1].Burst = 10, 1 // at an initial 100 req/s, 429s from host b are certain
	web, err := simweb.Start(specs, &simweb.Options{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	col := New(2) // three hosts, two get series
	srv, err := Listen("127.0.0.1:0", col.Handler())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	url := "http://" + srv.Addr() + "/metrics"

	cfg := crawler.Defaults()
	cfg.Dir = t.TempDir()
	cfg.Seeds = web.Seeds()
	cfg.InitialRate = 100 // host b allows 10/s: some 429s are certain
	cfg.StatusEvery = 50 * time.Millisecond
	c, err := crawler.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.SetObserver(col)

	// Scrape every 40 ms while the crawl runs.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var during []families
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(40 * time.Millisecond):
			}
			during = append(during, scrape(t, url))
		}
	})
	sum, err := c.Run(t.Context())
	close(stop)
	wg.Wait()
	if cerr := c.Close(); cerr != nil {
		t.Error(cerr)
	}
	if err != nil {
		t.Fatal(err)
	}

	midCrawl := 0
	for _, f := range during {
		if f.sum("crawl_frontier_urls", "state=queued") > 0 && f.sum("crawl_requests_total") > 0 {
			midCrawl++
		}
	}
	if midCrawl == 0 {
		t.Fatalf("none of %d scrapes during the crawl showed queued URLs and requests made", len(during))
	}

	f := scrape(t, url)
	requests, robots, over := 0, 0, 0
	for _, s := range web.Stats() {
		requests += s.Requests
		robots += s.RobotsRequests
		over += s.OverLimit
	}
	if over == 0 {
		t.Fatal("host b sent no 429: the test cannot check the over-limit and retry counters")
	}
	checks := []struct {
		name  string
		match []string
		want  float64
	}{
		{"crawl_requests_total", nil, float64(requests)},
		{"crawl_requests_total", []string{"kind=robots"}, float64(robots)},
		{"crawl_requests_total", []string{"class=error"}, 0},
		{"crawl_over_limit_responses_total", nil, float64(over)},
		{"crawl_over_limit_responses_total", []string{"code=429"}, float64(over)}, // host b answers 429 only
		{"crawl_request_duration_seconds", nil, float64(requests)},
		{"crawl_frontier_urls", []string{"state=fetched"}, float64(sum.Fetched)},
		{"crawl_frontier_urls", []string{"state=queued"}, 0},
		{"crawl_frontier_urls", []string{"state=excluded"}, float64(sum.Excluded)},
		{"crawl_requests_in_flight", nil, 0},
		{"crawl_hosts", nil, 3},
		{"crawl_hosts_active", nil, 0},
	}
	for _, ck := range checks {
		if got := f.sum(ck.name, ck.match...); got != ck.want {
			t.Errorf("%s%v = %v, want %v", ck.name, ck.match, got, ck.want)
		}
	}
	if got, want := f.sum("crawl_retries_total", "reason=status-429"), float64(over); got != want {
		t.Errorf("retries for status-429 = %v, want %v (one per 429)", got, want)
	}
	if got := f.sum("crawl_limiter_wait_seconds"); got < float64(sum.Fetched) {
		t.Errorf("limiter waits observed %v times, want at least once per page (%d)", got, sum.Fetched)
	}
	// Bounded cardinality: exactly the top 2 hosts have per-host series.
	for _, name := range []string{"crawl_host_rate_requests_per_second", "crawl_host_fetched_urls", "crawl_host_paused"} {
		if hs := f.hosts(name); len(hs) != 2 || hs[0] == hs[1] {
			t.Errorf("%s has series for hosts %q, want 2 distinct", name, hs)
		}
	}
	for _, h := range f.hosts("crawl_host_rate_requests_per_second") {
		if f.sum("crawl_host_rate_requests_per_second", "host="+h) <= 0 || f.sum("crawl_host_fetched_urls", "host="+h) != 20 {
			t.Errorf("host %s: rate %v, fetched %v; want a rate and 20 pages", h,
				f.sum("crawl_host_rate_requests_per_second", "host="+h), f.sum("crawl_host_fetched_urls", "host="+h))
		}
	}
	t.Logf("%d scrapes, %d mid-crawl; %d requests, %d over limit", len(during), midCrawl, requests, over)

	// Naming conventions, as promlint checks them.
	problems, err := testutil.GatherAndLint(col.Gatherer())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "crawl_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
}

func TestBusiest(t *testing.T) {
	hs := []crawler.HostStatus{
		{Host: "done-big", Pages: 100},
		{Host: "busy-small", Pages: 1, Queued: 5},
		{Host: "flying", Pages: 3, InFlight: 1},
		{Host: "done-small", Pages: 2},
		{Host: "a-done-small", Pages: 2},
	}
	cases := []struct {
		n    int
		want string
	}{
		{0, ""},
		{2, "flying busy-small"},
		{4, "flying busy-small done-big a-done-small"},
		{9, "flying busy-small done-big a-done-small done-small"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) {
			var got []string
			for _, h := range busiest(hs, tc.n) {
				got = append(got, h.Host)
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("busiest(%d) = %q, want %q", tc.n, got, tc.want)
			}
		})
	}
}

func TestListenBadAddress(t *testing.T) {
	if s, err := Listen("127.0.0.1:-1", New(0).Handler()); err == nil {
		s.Close()
		t.Fatal("Listen on a bad port succeeded")
	}
}
