package crawler

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/aimd"
	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/hostlimit"
)

func TestSortBusiest(t *testing.T) {
	cases := []struct {
		name     string
		hosts    []HostStatus
		requests map[string]uint64
		want     string
	}{
		{name: "empty"},
		{
			name:  "pages and failures count alike",
			hosts: []HostStatus{{Host: "a", Pages: 1}, {Host: "b", Pages: 2, Failed: 3}, {Host: "c", Failed: 4}},
			want:  "b c a",
		},
		{
			name:     "requests break ties",
			hosts:    []HostStatus{{Host: "a", Pages: 2}, {Host: "b", Pages: 1, Failed: 1}, {Host: "c", Pages: 2}},
			requests: map[string]uint64{"a": 3, "b": 9, "c": 5},
			want:     "b c a",
		},
		{
			name:     "then names",
			hosts:    []HostStatus{{Host: "z"}, {Host: "m"}, {Host: "a"}, {Host: "r", Pages: 1}},
			requests: map[string]uint64{"z": 1, "m": 1, "a": 1},
			want:     "r a m z",
		},
		{
			name:     "requests do not outweigh pages",
			hosts:    []HostStatus{{Host: "robots-only"}, {Host: "one-page", Pages: 1}},
			requests: map[string]uint64{"robots-only": 50, "one-page": 2},
			want:     "one-page robots-only",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sortBusiest(tc.hosts, func(h HostStatus) uint64 { return tc.requests[h.Host] })
			var got []string
			for _, h := range tc.hosts {
				got = append(got, h.Host)
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("order %q, want %q", got, tc.want)
			}
		})
	}
}

func TestGateUsed(t *testing.T) {
	fresh := hostlimit.HostStats{Host: "h"}
	fresh.Rate, fresh.Window = 1, 1
	cases := []struct {
		name string
		edit func(*hostlimit.HostStats)
		want bool
	}{
		{"fresh gate (loaded, or refused a request)", func(*hostlimit.HostStats) {}, false},
		{"admitted a request", func(g *hostlimit.HostStats) { g.Admitted = 1 }, true},
		{"request in flight", func(g *hostlimit.HostStats) { g.InFlight = 1 }, true},
		{"a 429 seen", func(g *hostlimit.HostStats) { g.OverLimit = 1 }, true},
		{"a failure seen", func(g *hostlimit.HostStats) { g.Failures = 1 }, true},
		{"a neutral reply seen", func(g *hostlimit.HostStats) { g.Neutral = 1 }, true},
		{"baseline learned in an earlier run", func(g *hostlimit.HostStats) { g.Baseline = time.Millisecond }, true},
		{"paused", func(g *hostlimit.HostStats) { g.PausedUntil = time.Unix(1, 0) }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := fresh
			tc.edit(&g)
			if got := gateUsed(g); got != tc.want {
				t.Errorf("gateUsed = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSnapshotListsContactedHosts: hosts only queued or excluded are counted, not listed; a host
// becomes a row once its gate admits a request; the references with no host (recorded as
// excluded under the host "") are neither.
func TestSnapshotListsContactedHosts(t *testing.T) {
	c := openSeeded(t, "http://127.0.0.2:9/", "http://127.0.0.3:9/", "http://127.0.0.4:9/")
	err := c.fr.Exclude([]frontier.Exclusion{
		{Entry: frontier.Entry{URL: "http://off.example/", Host: "off.example"}, Reason: frontier.ReasonScope},
		{Entry: frontier.Entry{URL: "mailto:x@y.example"}, Reason: frontier.ReasonScheme},
		{Entry: frontier.Entry{URL: "tel:+1"}, Reason: frontier.ReasonScheme},
	})
	if err != nil {
		t.Fatal(err)
	}

	check := func(step string, hosts string, notCrawled, queued int) {
		t.Helper()
		st := c.snapshot(false, 0)
		var got []string
		for _, h := range st.Hosts {
			got = append(got, h.Host)
		}
		if strings.Join(got, " ") != hosts || st.HostsNotCrawled != notCrawled || st.HostsNotCrawledQueued != queued {
			t.Errorf("%s: hosts %q, not crawled %d (%d queued); want %q, %d (%d)",
				step, got, st.HostsNotCrawled, st.HostsNotCrawledQueued, hosts, notCrawled, queued)
		}
		if st.ExcludedBy[frontier.ReasonScheme] != 2 {
			t.Errorf("%s: excluded by scheme %d, want 2 (the mailto: and tel: links)", step, st.ExcludedBy[frontier.ReasonScheme])
		}
	}
	check("before any request", "", 4, 3)

	tk, _ := c.reg.TryAdmit(time.Now(), "127.0.0.3:9")
	if tk == nil {
		t.Fatal("a fresh gate refused its first request")
	}
	check("a request admitted", "127.0.0.3:9", 3, 2)

	// The crawl's own snapshot, taken every second, lists only the busiest listedHosts and
	// counts the rest; it sees the same hosts contacted as a stopped store's.
	tk2, _ := c.reg.TryAdmit(time.Now(), "127.0.0.2:9")
	if tk2 == nil {
		t.Fatal("a fresh gate refused its first request")
	}
	st := c.snapshot(true, 1)
	if len(st.Hosts) != 1 || st.HostsNotListed != 1 || st.HostsNotCrawled != 2 || st.Hosts[0].Window == 0 {
		t.Errorf("running snapshot: %d hosts listed (%+v), %d not listed, %d not crawled; want 1 with its gate's figures, 1, 2",
			len(st.Hosts), st.Hosts, st.HostsNotListed, st.HostsNotCrawled)
	}

	// A gate that left memory (idle) still shows its figures at the end of a run, from the store.
	now := time.Now()
	for _, h := range []string{"127.0.0.3:9", "127.0.0.2:9"} {
		completeSeed(t, c, now, h, frontier.Result{Kind: frontier.Fetched})
	}
	tk.Done(now, aimd.Outcome{Signal: aimd.Success, Latency: time.Millisecond})
	tk2.Done(now, aimd.Outcome{Signal: aimd.Success, Latency: time.Millisecond})
	if err := c.reg.Evict(now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.reg.Host(now, "127.0.0.3:9"); ok {
		t.Fatal("gate still in memory after Evict")
	}
	st = c.snapshot(false, listedHosts)
	if len(st.Hosts) != 2 || st.Hosts[0].Window == 0 || st.Hosts[1].Window == 0 {
		t.Errorf("final snapshot after eviction: %+v; want both hosts with their gates' figures", st.Hosts)
	}
}

// TestLinksWithNoHostAreNoHostRow crawls a page linking to mailto:, tel:, javascript: and data:
// URLs and to two other sites: the status lists the one host crawled, counts the two others as
// linked to but not crawled, and has no row (and no count) for the links with no host.
func TestLinksWithNoHostAreNoHostRow(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/":
			fmt.Fprint(w, `<a href="mailto:me@a.example">m</a><a href="tel:+15551234">t</a>
<a href="javascript:void(0)">j</a><a href="data:,x">d</a><a href="MAILTO:you@b.example">M</a>
<a href="http://off1.example/">o</a><a href="/next">n</a>`)
		case "/next":
			fmt.Fprint(w, `<a href="https://off2.example/x">o</a><a href="mailto:me@a.example?subject=again">m</a>`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	cfg := Defaults()
	cfg.Dir = t.TempDir()
	cfg.Seeds = []string{srv.URL + "/"}
	cfg.InitialRate = 50
	cfg.StatusEvery = 50 * time.Millisecond
	sum := runCrawl(t, cfg)

	u, _ := url.Parse(srv.URL)
	fromStore, err := ReadStatus(cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := ReadStatusFile(cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		st   Status
	}{{"summary", sum.Status}, {"ReadStatus", fromStore}, {"status.json", fromFile}} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.st
			if len(st.Hosts) != 1 || st.Hosts[0].Host != u.Host || st.Hosts[0].Pages != 2 {
				t.Errorf("hosts %+v, want only %s with 2 pages", st.Hosts, u.Host)
			}
			if st.HostsNotCrawled != 2 || st.HostsNotCrawledQueued != 0 {
				t.Errorf("not crawled %d (%d queued), want 2 (0): off1.example and off2.example",
					st.HostsNotCrawled, st.HostsNotCrawledQueued)
			}
			if st.ExcludedBy[frontier.ReasonScheme] != 6 {
				t.Errorf("excluded by scheme %d, want 6 (%v)", st.ExcludedBy[frontier.ReasonScheme], st.ExcludedBy)
			}
			b, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), `"hosts_not_crawled":2`) || strings.Contains(string(b), `"host":""`) {
				t.Errorf("JSON: %s", b)
			}
		})
	}
}

// sortBusiest orders hosts as snapshot lists them (busier): most pages fetched plus failed, then
// most requests (as requests reports them), then by name.
func sortBusiest(hosts []HostStatus, requests func(HostStatus) uint64) {
	slices.SortFunc(hosts, func(a, b HostStatus) int {
		return busier(a.Pages+a.Failed, b.Pages+b.Failed, requests(a), requests(b), a.Host, b.Host)
	})
}

// TestSnapshotKeepsFailedHosts: a snapshot that leaves the least busy hosts out still lists the
// hosts whose every request failed (the run's summary names them) and counts them all.
func TestSnapshotKeepsFailedHosts(t *testing.T) {
	c := openSeeded(t, "http://127.0.0.2:9/", "http://127.0.0.3:9/", "http://127.0.0.4:9/")
	now := time.Now()
	completeSeed(t, c, now, "127.0.0.2:9", frontier.Result{Kind: frontier.Fetched})
	completeSeed(t, c, now, "127.0.0.3:9", frontier.Result{Kind: frontier.Fetched})
	completeSeed(t, c, now, "127.0.0.4:9", frontier.Result{Kind: frontier.Failed, Reason: "connection", Detail: "connection refused"})
	st := c.snapshot(true, 1)
	var got []string
	for _, h := range st.Hosts {
		got = append(got, h.Host)
	}
	if !slices.Equal(got, []string{"127.0.0.2:9", "127.0.0.4:9"}) || st.HostsNotListed != 1 || st.HostsFailed != 1 {
		t.Errorf("listed %v, %d not listed, %d failed; want [127.0.0.2:9 127.0.0.4:9] (the failed one kept), 1, 1",
			got, st.HostsNotListed, st.HostsFailed)
	}
}

func TestRelistEvery(t *testing.T) {
	for _, tc := range []struct {
		hosts int
		want  time.Duration
	}{{0, 0}, {19_999, 0}, {20_000, time.Second}, {100_000, 5 * time.Second}, {1_000_000, 30 * time.Second}} {
		if got := relistEvery(tc.hosts); got != tc.want {
			t.Errorf("relistEvery(%d) = %v, want %v", tc.hosts, got, tc.want)
		}
	}
}

// TestSnapshotKeepsListUntilRelist: a running snapshot reuses the hosts the last scan listed
// until relistAt; the totals are read afresh.
func TestSnapshotKeepsListUntilRelist(t *testing.T) {
	c := openSeeded(t, "http://127.0.0.2:9/", "http://127.0.0.3:9/")
	now := time.Now()
	complete := func(h string) { completeSeed(t, c, now, h, frontier.Result{Kind: frontier.Fetched}) }
	complete("127.0.0.2:9")
	if st := c.snapshot(true, listedHosts); len(st.Hosts) != 1 {
		t.Fatalf("first snapshot lists %d hosts, want 1", len(st.Hosts))
	}
	c.ob.relistAt = now.Add(time.Hour) // as after a scan of many hosts
	complete("127.0.0.3:9")
	st := c.snapshot(true, listedHosts)
	if len(st.Hosts) != 1 || st.Fetched != 2 {
		t.Errorf("before relistAt: %d hosts listed, %d fetched; want the 1 listed before, 2 fetched", len(st.Hosts), st.Fetched)
	}
	c.ob.relistAt = time.Time{}
	if st := c.snapshot(true, listedHosts); len(st.Hosts) != 2 {
		t.Errorf("after relistAt: %d hosts listed, want 2", len(st.Hosts))
	}
}

// openSeeded opens a crawler on a fresh store with seeds queued; it is closed when t ends.
func openSeeded(t *testing.T, seeds ...string) *Crawler {
	t.Helper()
	cfg := Defaults()
	cfg.Dir = t.TempDir()
	cfg.Seeds = seeds
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// completeSeed leases host's next URL and completes it with r.
func completeSeed(t *testing.T, c *Crawler, now time.Time, host string, r frontier.Result) {
	t.Helper()
	l, ok, err := c.fr.Lease(now, host)
	if !ok || err != nil {
		t.Fatalf("lease from %s: %v %v", host, ok, err)
	}
	if err := c.fr.Complete(l, r); err != nil {
		t.Fatal(err)
	}
}
