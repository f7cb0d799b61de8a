package crawler

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawl-project/crawl/aimd"
	"github.com/crawl-project/crawl/fetch"
	"github.com/crawl-project/crawl/hostlimit"
	"github.com/crawl-project/crawl/internal/urlnorm"
	"github.com/crawl-project/crawl/storage"
)

// TestHonourRetryAfterQuota: a spent quota pauses the host on any status (through the
// request's Done), a Retry-After still wins when longer, and only the Retry-After is returned
// as the wait (the retry floor and, for robots.txt, the "slow down" signal).
func TestHonourRetryAfterQuota(t *testing.T) {
	now := time.Date(2025, 3, 4, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		status int
		header []string // name, value pairs
		wait   time.Duration
		pause  time.Duration // 0: not paused
	}{
		{"200 with the quota spent", 200, []string{"RateLimit", `"d";r=0;t=5`, "RateLimit-Policy", `"d";q=1`}, 0, 5 * time.Second},
		{"200 with quota left", 200, []string{"RateLimit", `"d";r=3;t=5`}, 0, 0},
		{"301 with the quota spent", 301, []string{"X-RateLimit-Limit", "1", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1"}, 0, time.Second},
		{"404 with the quota spent", 404, []string{"RateLimit-Limit", "1", "RateLimit-Remaining", "0", "RateLimit-Reset", "3"}, 0, 3 * time.Second},
		{"200, a bucket's burst of a limit with no window spent", 200,
			[]string{"X-RateLimit-Limit", "600", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1"}, 0, 0},
		{"spent quota without a reset", 200, []string{"X-RateLimit-Remaining", "0"}, 0, 0},
		{"429: the quota's longer reset wins", 429, []string{"Retry-After", "2", "RateLimit", `"d";r=0;t=10`},
			2 * time.Second, 10 * time.Second},
		{"503: the longer Retry-After wins", 503, []string{"Retry-After", "20", "RateLimit", `"d";r=0;t=10`},
			20 * time.Second, 20 * time.Second},
		{"429 without Retry-After", 429, []string{"RateLimit", `"d";r=0;t=4`}, 0, 4 * time.Second},
		{"Retry-After on a 200 is not a pause", 200, []string{"Retry-After", "30"}, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &Crawler{
				reg:   hostlimit.New(hostlimit.Config{Now: func() time.Time { return now }}, nil),
				log:   slog.New(slog.NewTextHandler(io.Discard, nil)),
				hosts: map[string]*hostRecord{},
			}
			resp := &fetch.Response{Status: tc.status, Header: http.Header{}}
			for i := 0; i+1 < len(tc.header); i += 2 {
				resp.Header.Add(tc.header[i], tc.header[i+1])
			}
			tk, _ := c.reg.TryAdmit(now, "a.test")
			a := c.honourRetryAfter("a.test", resp, now)
			if a.Wait != tc.wait {
				t.Errorf("returned %v, want %v", a.Wait, tc.wait)
			}
			c.endRequest(tk, now, responseOutcome(aimd.Neutral, now, resp, a))
			var paused time.Duration
			if s, ok := c.reg.Host(now, "a.test"); ok && !s.PausedUntil.IsZero() {
				paused = s.PausedUntil.Sub(now)
			}
			if paused != tc.pause {
				t.Errorf("host paused for %v, want %v", paused, tc.pause)
			}
		})
	}
}

// TestQuotaResetOnTheHostsClock: a host names its quota's reset as a Unix time
// (X-RateLimit-Reset) and dates its responses to the second, as express-rate-limit's legacy
// headers do. Measured against one response's Date, the pause also waited out that Date's
// fraction of a second; measured against the host's clock as its Date headers bound it, it
// ends within a few ms of the reset it names, and never before.
func TestQuotaResetOnTheHostsClock(t *testing.T) {
	const skew = 7*time.Second + 300*time.Millisecond // the host's clock is ahead of ours
	start := time.Date(2025, 3, 4, 12, 0, 0, 0, time.UTC)
	c := &Crawler{
		reg:   hostlimit.New(hostlimit.Config{Now: func() time.Time { return start }}, nil),
		log:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		hosts: map[string]*hostRecord{},
	}
	// A response received at local (our clock) left the host 1 ms before, Date truncated.
	resp := func(local time.Time, remaining int, reset time.Time) *fetch.Response {
		h := http.Header{}
		h.Set("Date", local.Add(skew-time.Millisecond).UTC().Format(http.TimeFormat))
		h.Set("X-RateLimit-Limit", "41")
		h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
		h.Set("X-RateLimit-Reset", fmt.Sprintf("%d.%03d", reset.Unix(), reset.Nanosecond()/1e6))
		return &fetch.Response{Status: 200, Header: h, Started: local.Add(-3 * time.Millisecond), HeaderLatency: 3 * time.Millisecond}
	}
	// 40 responses at 93-ms spacing naming a reset half a second past a whole second on the
	// host's clock (a whole-second reset would be retry.Windows' to judge), the last at 0.9 s
	// past a whole second there (its Date is 0.9 s behind).
	last := start.Add(skew).Add(5 * time.Second).Truncate(time.Second).Add(900 * time.Millisecond).Add(-skew)
	reset := last.Add(skew).Truncate(time.Second).Add(2500 * time.Millisecond)
	for i := range 40 {
		now := last.Add(time.Duration(i-40) * 93 * time.Millisecond)
		if pause := c.honourRetryAfter("a.test", resp(now, 40-i, reset), now).Pause; pause != 0 {
			t.Fatalf("response %d paused the host with quota left", i)
		}
	}
	pause := c.honourRetryAfter("a.test", resp(last, 0, reset), last).Pause
	want := reset.Sub(last.Add(skew)) // the reset, on our clock, from now: 1.6 s
	oneDate := reset.Sub(last.Add(skew).Truncate(time.Second))
	t.Logf("pause %v; the reset is %v away; one Date's measure: %v", pause, want, oneDate)
	if pause < want || pause > want+50*time.Millisecond {
		t.Errorf("paused %v, want the %v to the reset (+50ms at most; one Date gives %v)", pause, want, oneDate)
	}
}

// fixedWindow is a server-side limiter: at most limit requests per Unix second; the next one in
// the same second is refused with 429 and Retry-After. Every response, refusals and robots.txt
// included, advertises the quota left in one header style.
type fixedWindow struct {
	limit int
	style string // "structured", "draft" or "x-epoch"

	mu       sync.Mutex
	second   int64 // the current window: [second, second+1) in Unix time
	n        int   // requests seen in it
	requests int   // all requests
	over     int   // requests beyond the limit of their window
	spent    int   // responses that said the quota was spent (remaining 0)
}

func (f *fixedWindow) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	f.mu.Lock()
	if s := now.Unix(); s != f.second {
		f.second, f.n = s, 0
	}
	f.n++
	f.requests++
	refused := f.n > f.limit
	if refused {
		f.over++
	}
	remaining := max(f.limit-f.n, 0)
	if remaining == 0 {
		f.spent++
	}
	f.mu.Unlock()

	// The window ends at the next whole second: one second away in whole seconds (rounded up,
	// so a client that waits that long is always past it), or that second as a Unix time. Date
	// is set from the same clock reading, so the epoch form measured against it is exact too.
	h := w.Header()
	h.Set("Date", now.UTC().Format(http.TimeFormat))
	switch f.style {
	case "structured":
		h.Set("RateLimit-Policy", fmt.Sprintf(`"burst";q=%d;w=1, "daily";q=100000;w=86400`, f.limit))
		h.Set("RateLimit", fmt.Sprintf(`"burst";r=%d;t=1, "daily";r=99000;t=3600`, remaining))
	case "draft":
		h.Set("RateLimit-Limit", fmt.Sprintf("%d, %d;w=1", f.limit, f.limit))
		h.Set("RateLimit-Remaining", strconv.Itoa(remaining))
		h.Set("RateLimit-Reset", "1")
	case "x-epoch":
		h.Set("X-RateLimit-Limit", strconv.Itoa(f.limit))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(now.Unix()+1, 10))
	}
	if refused {
		h.Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	if r.URL.Path == "/robots.txt" {
		h.Set("Content-Type", "text/plain")
		fmt.Fprint(w, "User-agent: *\nAllow: /\n")
		return
	}
	h.Set("Content-Type", "text/html")
	if r.URL.Path == "/" {
		var b strings.Builder
		for i := 1; i < rlPages; i++ {
			fmt.Fprintf(&b, "<a href=\"/p/%d\">%d</a>\n", i, i)
		}
		fmt.Fprint(w, b.String())
		return
	}
	fmt.Fprint(w, "<p>leaf</p>")
}

// rlPages is the number of pages of the rate-limited site, "/" included.
const rlPages = 30

// TestRateLimitHeadersHonoured crawls a site that allows 10 requests per second and says so in
// its headers, in each header style, at a rate well above that (50/s to start): the crawl must
// complete without a single request over the limit, so that the headers, not luck or a slow
// machine, kept it polite: where they state the policy (structured, draft) the host's rate was
// set just under it (saved at 0.97 × 10/s); where they name only a limit and a reset a second
// away (x-epoch), which tells no window, the crawl ran the quota down to 0 at least once.
//
// Exact, not "at most one over": with one request in flight per host (HostConcurrency 1) the
// response saying "0 left" is read before the next request is sent, and the host is paused
// (before its window slot is freed) until the reset, which the server rounds up to the end of
// its window. The next request therefore reaches the server in a later window.
func TestRateLimitHeadersHonoured(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of real-time crawling")
	}
	for _, style := range []string{"structured", "draft", "x-epoch"} {
		t.Run(style, func(t *testing.T) {
			t.Parallel()
			lim := &fixedWindow{limit: 10, style: style}
			srv := httptest.NewServer(lim)
			defer srv.Close()
			cfg := Defaults()
			cfg.Dir = t.TempDir()
			cfg.Seeds = []string{srv.URL + "/"}
			cfg.HostConcurrency = 1
			cfg.InitialRate = 50
			cfg.StatusEvery = 100 * time.Millisecond
			start := time.Now()
			sum := runCrawl(t, cfg)
			lim.mu.Lock()
			defer lim.mu.Unlock()
			t.Logf("%s: %d requests in %v, %d over the limit, quota spent %d times",
				style, lim.requests, time.Since(start).Round(time.Millisecond), lim.over, lim.spent)
			if sum.StopReason != "done" || sum.Fetched != rlPages || sum.Failed != 0 || sum.Queued != 0 {
				t.Errorf("stop %q, fetched %d, failed %d, queued %d; want done, %d, 0, 0",
					sum.StopReason, sum.Fetched, sum.Failed, sum.Queued, rlPages)
			}
			if got := len(storedOK(t, cfg.Dir)); got != rlPages {
				t.Errorf("stored %d distinct 2xx pages, want %d", got, rlPages)
			}
			if lim.over != 0 {
				t.Errorf("server saw %d requests over its advertised limit, want 0", lim.over)
			}
			if style == "x-epoch" && lim.spent == 0 {
				t.Errorf("the crawl never ran the quota down; the test did not exercise the headers")
			}
			if style != "x-epoch" {
				if r := savedRate(t, cfg.Dir, srv.URL); math.Abs(r-9.7) > 1e-9 {
					t.Errorf("the host's saved rate is %v, want 9.7 (just under the stated 10/s)", r)
				}
			}
		})
	}
}

// savedRate is the rate the store in dir saved for the host of rawURL.
func savedRate(t *testing.T, dir, rawURL string) float64 {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	db, err := storage.Open(dir, &storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b, ok, err := db.LoadHostState(urlnorm.HostKey(u))
	if err != nil || !ok {
		t.Fatalf("no saved state for %s: %v", rawURL, err)
	}
	var st struct {
		AIMD struct {
			Rate float64 `json:"rate"`
		} `json:"aimd"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st.AIMD.Rate
}
