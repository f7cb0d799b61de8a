package crawler

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"html"
	"math/rand"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/klauspost/compress/gzip"
	"go.uber.org/goleak"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/retry"
	"github.com/crawl-project/crawl/storage"
)

// The hostile-server suite: loopback servers that each do one bad thing. For each, the crawl
// must end by itself ("done", nothing queued or in flight) within a bound, record the bad URL as
// failed, excluded or truncated with a clear reason, keep crawling the rest of the host (its
// "/ok" page is fetched), leave a consistent store (frontier.Check), and keep memory flat: the
// heap is sampled during the whole suite and must stay far below what any of the bombs, endless
// bodies or million-link pages would cost if they were not bounded.

// hostileHeapLimit bounds the Go heap in use at any moment of the suite (all cases run in
// parallel; about 300 MiB is seen, most of it for the million-link page). Unbounded decoding of
// one bomb alone would need 1 GiB.
const hostileHeapLimit = 512 << 20

// hostileRSSLimit bounds the peak resident set of the test process over the whole suite
// (VmHWM, reset when the suite starts; Linux only, and not under the race detector, whose
// shadow memory multiplies it), and hostileStoreLimit the store file of each case.
const (
	hostileRSSLimit   = 256 << 20
	hostileStoreLimit = 100 << 20
)

// hostileDeadline is how long a case may take to end by itself: far longer than any takes
// alone on a loaded machine, and more under the race detector, whose cost grows with the bytes
// parsed.
var hostileDeadline = map[bool]time.Duration{false: 2 * time.Minute, true: 3 * time.Minute}[raceEnabled]

// hostileParallel is how many cases run at once, whatever -parallel says, so that the peak
// resident set does not depend on the machine's cores; a heavy case (one that holds a hundred
// MiB or more by design: a body of 18 MB, sitemaps of 4 MB) runs alone.
const hostileParallel = 2

// handler is one bad behaviour; done is closed when the test ends, so that handlers that dribble
// or hold connections return.
type handler func(done <-chan struct{}, w http.ResponseWriter, r *http.Request)

// expect is what the store must say about one URL after the crawl.
type expect struct {
	url       string // a path on the case's host, or an absolute URL; "{host}" is replaced
	state     string // "fetched", "failed" or "excluded"
	reason    string // failed/excluded: the reason (exact)
	status    int    // fetched: the HTTP status stored (0: any)
	truncated bool   // fetched: the stored page must be marked truncated, with MaxBody bytes
}

type hostileCase struct {
	name     string
	head     string             // markup in the <head> of "/"
	links    []string           // linked from "/" besides "/ok"
	noOK     bool               // "/ok" is not to be fetched (the case's settings exclude it)
	stop     string             // the run's StopReason; "" means "done"
	heavy    bool               // runs alone (see hostileParallel)
	handlers map[string]handler // exact paths, or prefixes ending in "/"
	robots   handler            // replaces the allow-all robots.txt
	raw      func(done <-chan struct{}, c net.Conn)
	cfg      func(*Config)
	want     []expect
	check    func(t *testing.T, r *hostileResult)
}

func TestHostileServers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a crawl per hostile server")
	}
	ignore := goleak.IgnoreCurrent()
	runtime.GC()
	rssReset := resetPeakRSS()
	sampler := startHeapSampler()
	slots := make(chan struct{}, hostileParallel)
	var alone sync.RWMutex // a heavy case holds it to run alone; the others share it
	t.Run("case", func(t *testing.T) {
		for _, tc := range hostileCases() {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				if tc.heavy {
					alone.Lock()
					defer alone.Unlock()
					debug.FreeOSMemory() // start from what the cases before it left live, not their garbage
				} else {
					alone.RLock()
					defer alone.RUnlock()
					slots <- struct{}{}
					defer func() { <-slots }()
				}
				runHostile(t, tc)
			})
		}
	})
	peak := sampler.stop()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("heap in use: peak %d MiB during the suite, %d MiB after it", peak>>20, ms.HeapInuse>>20)
	if peak > hostileHeapLimit {
		t.Errorf("heap in use peaked at %d MiB, want at most %d MiB", peak>>20, hostileHeapLimit>>20)
	}
	if rss, ok := peakRSS(); ok && rssReset {
		t.Logf("resident set: peak %d MiB during the suite (race detector: %v)", rss>>20, raceEnabled)
		if rss > hostileRSSLimit && !raceEnabled {
			t.Errorf("resident set peaked at %d MiB, want at most %d MiB", rss>>20, hostileRSSLimit>>20)
		}
	}
	goleak.VerifyNone(t, ignore)
}

func hostileConfig(t *testing.T) Config {
	cfg := Defaults()
	cfg.Dir = t.TempDir()
	cfg.Workers = 8
	cfg.HostConcurrency = 4
	cfg.InitialRate, cfg.MinRate = 100, 20
	cfg.Timeout = 700 * time.Millisecond
	cfg.MaxBody = 1 << 20
	cfg.MaxDepth = 40
	cfg.MaxHostPages = 60
	cfg.RobotsRetry = time.Millisecond
	cfg.Retry, cfg.MaxAttempts = Backoff{Base: 5 * time.Millisecond, Cap: 50 * time.Millisecond}, 2
	cfg.StatusEvery = 100 * time.Millisecond
	cfg.Grace = time.Second
	return cfg
}

func hostileCases() []hostileCase {
	return []hostileCase{
		{
			name:     "gzip bomb",
			links:    []string{"/bomb"},
			handlers: map[string]handler{"/bomb": serveBytes("gzip", gzipBomb)},
			cfg:      func(c *Config) { c.Timeout = 10 * time.Second }, // bounded by --max-body, not by time: decoding is slow under -race
			want:     []expect{{url: "/bomb", state: "fetched", status: 200, truncated: true}},
		},
		{
			name:     "brotli bomb",
			links:    []string{"/bomb"},
			handlers: map[string]handler{"/bomb": serveBytes("br", brotliBomb)},
			cfg:      func(c *Config) { c.Timeout = 10 * time.Second }, // bounded by --max-body, not by time: decoding is slow under -race
			want:     []expect{{url: "/bomb", state: "fetched", status: 200, truncated: true}},
		},
		{
			name:     "endless body",
			links:    []string{"/endless"},
			handlers: map[string]handler{"/endless": endless},
			want:     []expect{{url: "/endless", state: "fetched", status: 200, truncated: true}},
		},
		{
			name:     "slowloris headers",
			links:    []string{"/slow"},
			handlers: map[string]handler{"/slow": slowHeaders},
			want:     []expect{{url: "/slow", state: "failed", reason: "timeout"}},
		},
		{
			name:     "slowloris body",
			links:    []string{"/slow"},
			handlers: map[string]handler{"/slow": slowBody},
			want:     []expect{{url: "/slow", state: "failed", reason: "timeout"}},
		},
		{
			name:  "redirect loops",
			links: []string{"/loop-a", "/self"},
			handlers: map[string]handler{
				"/loop-a": redirect("/loop-b"), "/loop-b": redirect("/loop-a"), "/self": redirect("/self"),
			},
			want: []expect{
				{url: "/loop-a", state: "fetched", status: 302},
				{url: "/loop-b", state: "fetched", status: 302},
				{url: "/self", state: "fetched", status: 302},
			},
		},
		{
			name:     "redirect chain of 50 hops",
			links:    []string{"/chain/0"},
			handlers: map[string]handler{"/chain/": chain(50)},
			want: []expect{
				{url: "/chain/10", state: "fetched", status: 302}, // 10 redirects followed
				{url: "/chain/11", state: "excluded", reason: "limit"},
			},
		},
		{
			name:  "redirect to another scheme",
			links: []string{"/to-ftp", "/to-js", "/to-mailto", "/to-https"},
			handlers: map[string]handler{
				"/to-ftp":    redirect("ftp://127.0.0.1/file"),
				"/to-js":     redirect("javascript:alert(1)"),
				"/to-mailto": redirect("mailto:someone@example.com"),
				"/to-https":  redirect("https://{host}/secure"),
			},
			want: []expect{
				{url: "/to-ftp", state: "fetched", status: 302},
				{url: "ftp://127.0.0.1/file", state: "excluded", reason: "scheme"},
				{url: "javascript:alert(1)", state: "excluded", reason: "scheme"},
				{url: "mailto:someone@example.com", state: "excluded", reason: "scheme"},
				{url: "https://{host}/secure", state: "failed", reason: "tls"}, // a plain-HTTP port
			},
		},
		{
			name:     "calendar with next month forever",
			links:    []string{calPath(0)},
			handlers: map[string]handler{"/cal/": calendar},
			want: []expect{
				{url: calPath(39), state: "fetched", status: 200}, // depth 40 = --max-depth
				{url: calPath(40), state: "excluded", reason: "depth"},
			},
		},
		{
			name:     "session id in every link",
			links:    []string{"/s?sid=0"},
			handlers: map[string]handler{"/s": sessions()},
			check: func(t *testing.T, r *hostileResult) {
				h := r.hostCount(t)
				if used := h.Queued + h.Fetched + h.Failed; used != 60 || r.sum.ExcludedBy["limit"] == 0 {
					t.Errorf("host used %d URLs of its budget with %d excluded as limit; want 60 and some", used, r.sum.ExcludedBy["limit"])
				}
			},
		},
		{
			name:     "URL that grows with every link",
			links:    []string{"/g/"},
			handlers: map[string]handler{"/g/": growing},
			check: func(t *testing.T, r *hostileResult) {
				if r.sum.ExcludedBy["too-long"] != 1 {
					t.Errorf("excluded by %v, want one too-long", r.sum.ExcludedBy)
				}
			},
		},
		{
			name:     "page with a million links",
			heavy:    true,
			links:    []string{"/million"},
			handlers: map[string]handler{"/million": serveBytes("", millionLinks)},
			cfg:      func(c *Config) { c.MaxBody, c.Timeout = 24<<20, 20*time.Second }, // 18 MB, slow under -race
			want:     []expect{{url: "/million", state: "fetched", status: 200}},
			check: func(t *testing.T, r *hostileResult) {
				h := r.hostCount(t)
				// fetch.MaxLinks (100 000) links are kept; the budget queues 57 of them, the next
				// frontier.OverBudgetRecords are recorded as limit, the rest only counted.
				limit := r.sum.ExcludedBy["limit"]
				if used := h.Queued + h.Fetched + h.Failed; used != 60 || limit > frontier.OverBudgetRecords || limit+r.sum.Dropped < 99_000 {
					t.Errorf("host used %d URLs, %d excluded as limit, %d dropped; want 60, at most %d and at least 99000 in all",
						used, limit, r.sum.Dropped, frontier.OverBudgetRecords)
				}
			},
		},
		{
			name:  "malformed and deeply nested HTML",
			links: []string{"/nested", "/malformed"},
			handlers: map[string]handler{
				"/nested": serveBytes("", func() []byte {
					return []byte(strings.Repeat("<div><span><p>", 40_000) + `<a href="/deep-target">x</a>`)
				}),
				"/malformed":   serveBytes("", func() []byte { return []byte(malformedHTML) }),
				"/deep-target": leaf, "/mal-target": leaf,
			},
			want: []expect{
				{url: "/nested", state: "fetched", status: 200},
				{url: "/deep-target", state: "fetched", status: 200},
				{url: "/malformed", state: "fetched", status: 200},
				{url: "/mal-target", state: "fetched", status: 200},
			},
		},
		{
			name:  "invalid UTF-8 and odd charsets",
			links: []string{"/latin1", "/utf16", "/bad-utf8", "/odd-charset"},
			handlers: map[string]handler{
				"/latin1":      typed("text/html; charset=iso-8859-1", "<title>caf\xe9</title><a href=\"/caf\xe9\">caf\xe9</a>"),
				"/utf16":       typed("text/html; charset=utf-16", utf16LE(`<html><a href="/u16">x</a></html>`)),
				"/bad-utf8":    typed("text/html; charset=utf-8", "<title>\xff\xfe\xfd</title><a href=\"/bad\xff\xc0\">\xc3\x28</a>"),
				"/odd-charset": typed("text/html; charset=x-klingon-42", `<a href="/odd-target">x</a>`),
				"/odd-target":  leaf,
			},
			want: []expect{
				{url: "/latin1", state: "fetched", status: 200},
				{url: "/caf%E9", state: "fetched", status: 404},
				{url: "/utf16", state: "fetched", status: 200},
				{url: "/bad-utf8", state: "fetched", status: 200},
				{url: "/bad%FF%C0", state: "fetched", status: 404},
				{url: "/odd-target", state: "fetched", status: 200},
			},
		},
		{
			name:  "huge headers",
			links: []string{"/huge-headers", "/many-headers"},
			handlers: map[string]handler{
				"/huge-headers": headers(1100, 1000), // over fetch's 1 MiB header limit
				"/many-headers": headers(200, 1000),
			},
			cfg: func(c *Config) { c.Timeout = 10 * time.Second }, // bounded by the header limit, not by time: reading 1 MiB of headers takes over 700 ms under -race on a loaded machine
			want: []expect{
				{url: "/huge-headers", state: "failed", reason: "protocol"},
				{url: "/many-headers", state: "fetched", status: 200},
			},
		},
		{
			name:  "wrong or missing Content-Type",
			links: []string{"/wrong-ct", "/no-ct", "/bogus-ct"},
			handlers: map[string]handler{
				"/wrong-ct":       typed("image/png", `<a href="/hidden-by-ct">x</a>`),
				"/no-ct":          typed("", `<html><body><a href="/found-by-sniff">x</a></body></html>`),
				"/bogus-ct":       typed("text/html;;; charset", `<a href="/bogus-target">x</a>`),
				"/found-by-sniff": leaf, "/bogus-target": leaf, "/hidden-by-ct": leaf,
			},
			want: []expect{
				{url: "/wrong-ct", state: "fetched", status: 200},
				{url: "/no-ct", state: "fetched", status: 200},
				{url: "/found-by-sniff", state: "fetched", status: 200},
				{url: "/bogus-target", state: "fetched", status: 200},
			},
			check: func(t *testing.T, r *hostileResult) {
				if _, seen, _ := r.fr.State(r.base + "/hidden-by-ct"); seen || r.site.hit("/hidden-by-ct") != 0 {
					t.Errorf("a link inside an image/png body was followed")
				}
			},
		},
		{
			name:   "10 MB robots.txt",
			links:  []string{"/blocked"},
			robots: serveBytes("", bigRobots),
			cfg:    func(c *Config) { c.Timeout = 10 * time.Second }, // the 1 MB read of it is slow under -race on a loaded machine
			want:   []expect{{url: "/blocked", state: "excluded", reason: "robots"}},
		},
		{
			name:   "binary garbage robots.txt",
			links:  []string{"/anything"},
			robots: serveBytes("", garbage),
			want:   []expect{{url: "/anything", state: "fetched", status: 404}},
		},
		{
			name:     "page that resets the connection",
			links:    []string{"/reset"},
			handlers: map[string]handler{"/reset": resetConn},
			want:     []expect{{url: "/reset", state: "failed", reason: "conn-reset"}},
		},
		{
			name:     "page that never answers",
			links:    []string{"/silent"},
			handlers: map[string]handler{"/silent": silent},
			want:     []expect{{url: "/silent", state: "failed", reason: "timeout"}},
		},
		{
			name:     "host whose pages all drip a byte a second",
			links:    dripLinks(50),
			handlers: map[string]handler{"/drip/": slowHeaders},
			want:     []expect{{url: "/drip/0", state: "failed", reason: "timeout"}, {url: "/drip/49", state: "failed", reason: "timeout"}},
			check: func(t *testing.T, r *hostileResult) {
				// given up after retry.UnansweredLimit requests in a row without an answer,
				// a window of them at once at most: not --max-attempts × 50
				limit := retry.UnansweredLimit * hostileConfig(t).HostConcurrency
				if n := r.site.hitPrefix("/drip/"); n > limit {
					t.Errorf("%d requests for the 50 dripping pages, want at most %d", n, limit)
				}
				if h := r.hostCount(t); h.Failed != 50 {
					t.Errorf("%d URLs failed, want the 50 dripping pages", h.Failed)
				}
			},
		},
		{
			name:     "nested sitemap indexes of 50,000 entries",
			heavy:    true,
			handlers: map[string]handler{"/sitemap.xml": sitemapBomb, "/smap/": sitemapBomb, "/p/": leaf},
			cfg: func(c *Config) {
				c.Sitemaps, c.Sitemap, c.MaxBody, c.Timeout = true, hostileSitemapLimits, 5<<20, 10*time.Second
			},
			want:  []expect{{url: "/sitemap.xml", state: "fetched", status: 200}},
			check: checkSitemapBomb,
		},
		{
			name:     "nested sitemap indexes with --max-depth 0 --max-host-pages 1000",
			heavy:    true,
			handlers: map[string]handler{"/sitemap.xml": sitemapBomb, "/smap/": sitemapBomb, "/p/": leaf},
			noOK:     true, // one link hop away
			cfg: func(c *Config) {
				c.Sitemaps, c.Sitemap, c.MaxBody, c.Timeout = true, hostileSitemapLimits, 5<<20, 10*time.Second
				c.MaxDepth, c.MaxHostPages = SeedsOnly, 1000
			},
			want:  []expect{{url: "/sitemap.xml", state: "fetched", status: 200}, {url: "/ok", state: "excluded", reason: "depth"}},
			check: checkSitemapBomb,
		},
		{
			name:     "endless CSS @import chain with --max-depth 0",
			head:     `<link rel="stylesheet" href="/css/0.css">`,
			handlers: map[string]handler{"/css/": cssChain, "/img/": typed("image/png", "png")},
			noOK:     true,
			cfg:      func(c *Config) { c.Requisites, c.MaxDepth = true, SeedsOnly },
			want:     cssChainWant(expect{url: "/ok", state: "excluded", reason: "depth"}),
			check:    checkCSSChain,
		},
		{
			name:     "endless CSS @import chain with --max-pages 1",
			head:     `<link rel="stylesheet" href="/css/0.css">`,
			handlers: map[string]handler{"/css/": cssChain, "/img/": typed("image/png", "png")},
			noOK:     true,
			cfg:      func(c *Config) { c.Requisites, c.MaxPages = true, 1 },
			stop:     "max-pages",
			want:     cssChainWant(expect{url: "/ok", state: "excluded", reason: "limit"}),
			check:    checkCSSChain,
		},
		{
			name:     "CSS that imports 200 new stylesheets each",
			head:     `<link rel="stylesheet" href="/fan/r.css">`,
			handlers: map[string]handler{"/fan/": cssFan},
			cfg:      func(c *Config) { c.Requisites = true },
			check: func(t *testing.T, r *hostileResult) {
				// 2 pages fetched: at most requisiteBudgetPerPage stylesheets each taken from
				// stylesheets, the rest cut and counted (one record per cut stylesheet).
				if n := r.site.hitPrefix("/fan/"); n > 1+2*requisiteBudgetPerPage {
					t.Errorf("%d stylesheets fetched, want at most %d", n, 1+2*requisiteBudgetPerPage)
				}
				if r.sum.ExcludedBy[ReasonRequisiteBudget] == 0 {
					t.Errorf("excluded by %v, want the cut stylesheets recorded as %s", r.sum.ExcludedBy, ReasonRequisiteBudget)
				}
			},
		},
		{
			name:     "endless chain of documents embedding the next as an <object>, with --max-depth 0",
			head:     `<object data="/doc/0.html"></object>`,
			handlers: map[string]handler{"/doc/": docChain, "/js/": typed("text/javascript", "js")},
			noOK:     true,
			cfg:      func(c *Config) { c.Requisites, c.MaxDepth = true, SeedsOnly },
			want:     docChainWant(expect{url: "/ok", state: "excluded", reason: "depth"}),
			check:    checkDocChain,
		},
		{
			name:     "document requisite that embeds 200 new documents each",
			head:     `<embed src="/docfan/r.html">`,
			handlers: map[string]handler{"/docfan/": docFan},
			cfg:      func(c *Config) { c.Requisites = true },
			check: func(t *testing.T, r *hostileResult) {
				if n := r.site.hitPrefix("/docfan/"); n > 1+2*requisiteBudgetPerPage {
					t.Errorf("%d documents fetched, want at most %d", n, 1+2*requisiteBudgetPerPage)
				}
				if r.sum.ExcludedBy[ReasonRequisiteBudget] == 0 {
					t.Errorf("excluded by %v, want the cut documents recorded as %s", r.sum.ExcludedBy, ReasonRequisiteBudget)
				}
			},
		},
		{
			name: "host that resets every connection",
			raw: func(_ <-chan struct{}, c net.Conn) {
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
			},
			want: []expect{{url: "/", state: "failed", reason: "robots-unreachable"}},
		},
		{
			name: "host that accepts and never answers",
			raw: func(done <-chan struct{}, c net.Conn) {
				<-done
				c.Close()
			},
			cfg:  func(c *Config) { c.Timeout = 300 * time.Millisecond },
			want: []expect{{url: "/", state: "failed", reason: "robots-unreachable"}},
		},
	}
}

// hostileResult is a finished case: its summary and its store, open read-only.
type hostileResult struct {
	sum  *Summary
	base string // http://127.0.0.1:port
	host string // 127.0.0.1:port
	site *hostileSite
	db   *storage.DB
	fr   *frontier.Frontier
}

func (r *hostileResult) hostCount(t *testing.T) frontier.HostCount {
	for _, h := range r.fr.Hosts() {
		if h.Host == r.host {
			return h
		}
	}
	t.Fatalf("no counters for host %s", r.host)
	return frontier.HostCount{}
}

// runToEnd opens a crawler on cfg, runs it until it ends by itself (within hostileDeadline) and
// closes it, failing the test if it does not end or cannot be opened.
func runToEnd(t *testing.T, cfg Config) *Summary {
	t.Helper()
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hostileDeadline)
	defer cancel()
	sum, err := c.Run(ctx)
	if cerr := c.Close(); cerr != nil {
		t.Errorf("Close: %v", cerr)
	}
	if err != nil {
		t.Fatalf("Run: %v (the crawl must end by itself)", err)
	}
	return sum
}

func runHostile(t *testing.T, tc hostileCase) {
	var base string
	var site *hostileSite
	if tc.raw != nil {
		base = startRaw(t, tc.raw)
	} else {
		site = startSite(t, tc)
		base = site.srv.URL
	}
	cfg := hostileConfig(t)
	cfg.Seeds = []string{base + "/"}
	if tc.cfg != nil {
		tc.cfg(&cfg)
	}
	sum := runToEnd(t, cfg)
	t.Logf("%v: fetched %d, failed %v, excluded %v", sum.Elapsed.Round(time.Millisecond), sum.Fetched, sum.FailedBy, sum.ExcludedBy)
	if stop := cmp.Or(tc.stop, "done"); sum.StopReason != stop || sum.Queued != 0 || sum.InFlight != 0 {
		t.Errorf("stopped %q with %d queued, %d in flight; want %s, 0, 0", sum.StopReason, sum.Queued, sum.InFlight, stop)
	}

	if fi, err := os.Stat(filepath.Join(cfg.Dir, storage.FileName)); err != nil {
		t.Errorf("store: %v", err)
	} else if t.Logf("store: %.1f MiB", float64(fi.Size())/(1<<20)); fi.Size() > hostileStoreLimit {
		t.Errorf("store of %d MiB, want at most %d MiB", fi.Size()>>20, hostileStoreLimit>>20)
	}
	db, err := storage.Open(cfg.Dir, &storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("store does not reopen: %v", err)
	}
	defer db.Close()
	fr, err := frontier.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fr.Check(); err != nil {
		t.Errorf("store inconsistent: %v", err)
	}
	r := &hostileResult{sum: sum, base: base, host: strings.TrimPrefix(base, "http://"), site: site, db: db, fr: fr}
	want := tc.want
	if site != nil && !tc.noOK {
		want = append([]expect{{url: "/ok", state: "fetched", status: 200}}, want...) // the crawl went on
	}
	for _, w := range want {
		u := strings.ReplaceAll(w.url, "{host}", r.host)
		if strings.HasPrefix(u, "/") {
			u = base + u
		}
		st, seen, err := fr.State(u)
		if err != nil || !seen {
			t.Errorf("%s: never recorded (%v)", u, err)
			continue
		}
		if st.State != w.state || (w.reason != "" && st.Reason != w.reason) || (w.status != 0 && st.Status != w.status) {
			t.Errorf("%s: %s %q (status %d, %s); want %s %q (status %d)", u, st.State, st.Reason, st.Status, st.Detail, w.state, w.reason, w.status)
			continue
		}
		if st.State != "fetched" && st.Detail == "" && st.Reason != "robots" && st.Reason != "depth" {
			t.Errorf("%s: %s %q without a detail", u, st.State, st.Reason)
		}
		if st.State == "fetched" {
			p, err := db.Page(st.PageSeq)
			if err != nil {
				t.Errorf("%s: stored page: %v", u, err)
				continue
			}
			if p.Truncated != w.truncated || (w.truncated && int64(len(p.Body)) != cfg.MaxBody) {
				t.Errorf("%s: truncated %v with %d body bytes; want truncated %v (at %d bytes)", u, p.Truncated, len(p.Body), w.truncated, cfg.MaxBody)
			}
		}
	}
	if tc.check != nil {
		tc.check(t, r)
	}
}

// hostileSite serves one case over HTTP on loopback.
type hostileSite struct {
	srv  *httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

func (s *hostileSite) hit(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

// hitPrefix is how many requests had a path starting with prefix.
func (s *hostileSite) hitPrefix(prefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for p, k := range s.hits {
		if strings.HasPrefix(p, prefix) {
			n += k
		}
	}
	return n
}

func startSite(t *testing.T, tc hostileCase) *hostileSite {
	done := make(chan struct{})
	s := &hostileSite{hits: map[string]int{}}
	var index strings.Builder
	index.WriteString(`<html><head><title>index</title>` + tc.head + `</head><body><a href="/ok">ok</a>`)
	for _, l := range tc.links {
		fmt.Fprintf(&index, ` <a href="%s">%s</a>`, html.EscapeString(l), html.EscapeString(l))
	}
	index.WriteString("</body></html>")
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte("<p>not found</p>"))
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(index.String()))
	})
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { leaf(done, w, r) })
	robots := tc.robots
	if robots == nil {
		robots = typed("text/plain", "User-agent: *\nAllow: /\n")
	}
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) { robots(done, w, r) })
	for p, h := range tc.handlers {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) { h(done, w, r) })
	}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		close(done)
		s.srv.Close()
	})
	return s
}

// startRaw serves every TCP connection with serve and returns the base URL.
func startRaw(t *testing.T, serve func(done <-chan struct{}, c net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				serve(done, c)
			}()
		}
	}()
	t.Cleanup(func() {
		close(done)
		ln.Close()
		wg.Wait()
	})
	return "http://" + ln.Addr().String()
}

// dripLinks are n paths under /drip/.
func dripLinks(n int) []string {
	links := make([]string, n)
	for i := range links {
		links[i] = "/drip/" + strconv.Itoa(i)
	}
	return links
}

func leaf(_ <-chan struct{}, w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, "<html><head><title>%s</title></head><body><p>a page</p></body></html>", html.EscapeString(r.URL.Path))
}

// typed serves body with the given Content-Type; "" sends none at all (no sniffing either).
func typed(ctype, body string) handler {
	return func(_ <-chan struct{}, w http.ResponseWriter, _ *http.Request) {
		if ctype == "" {
			w.Header()["Content-Type"] = nil
		} else {
			w.Header().Set("Content-Type", ctype)
		}
		w.Write([]byte(body))
	}
}

// serveBytes serves the bytes body() returns (computed once) as text/html, with the given
// Content-Encoding if not "".
func serveBytes(encoding string, body func() []byte) handler {
	get := sync.OnceValue(body)
	return func(_ <-chan struct{}, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if encoding != "" {
			w.Header().Set("Content-Encoding", encoding)
		}
		w.Write(get())
	}
}

// gzipBomb decodes to 1 GiB of zeros: one gzip member of 1 MiB of zeros, 1024 times over
// (concatenated members are one valid gzip stream), about 1 MiB on the wire.
func gzipBomb() []byte {
	var member bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&member, gzip.BestCompression)
	zw.Write(make([]byte, 1<<20))
	zw.Close()
	return bytes.Repeat(member.Bytes(), 1024)
}

// brotliBomb decodes to 1 GiB of zeros from 809 bytes (see testdata/hostile/README.md).
func brotliBomb() []byte {
	b, err := os.ReadFile("../../testdata/hostile/zeros-1g.br")
	if err != nil {
		panic(err)
	}
	return b
}

func endless(done <-chan struct{}, w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html")
	chunk := bytes.Repeat([]byte("<p>and on and on</p>\n"), 3000)
	for {
		select {
		case <-done:
			return
		default:
		}
		if _, err := w.Write(chunk); err != nil {
			return
		}
	}
}

// dribble writes msg one byte per second until it is written, the peer leaves or done.
func dribble(done <-chan struct{}, c net.Conn, msg string) {
	for i := 0; i < len(msg); i++ {
		if _, err := c.Write([]byte{msg[i]}); err != nil {
			return
		}
		select {
		case <-done:
			return
		case <-time.After(time.Second):
		}
	}
}

func hijack(w http.ResponseWriter) net.Conn {
	c, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	return c
}

func slowHeaders(done <-chan struct{}, w http.ResponseWriter, _ *http.Request) {
	c := hijack(w)
	defer c.Close()
	dribble(done, c, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 2\r\n\r\nok")
}

func slowBody(done <-chan struct{}, w http.ResponseWriter, _ *http.Request) {
	c := hijack(w)
	defer c.Close()
	if _, err := c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100\r\n\r\n")); err != nil {
		return
	}
	dribble(done, c, strings.Repeat("x", 100))
}

func resetConn(_ <-chan struct{}, w http.ResponseWriter, _ *http.Request) {
	c := hijack(w)
	c.(*net.TCPConn).SetLinger(0)
	c.Close()
}

// silent holds the connection without answering until the client leaves or the test ends.
func silent(done <-chan struct{}, w http.ResponseWriter, _ *http.Request) {
	c := hijack(w)
	defer c.Close()
	left := make(chan struct{})
	go func() {
		defer close(left)
		var b [1]byte
		for {
			if _, err := c.Read(b[:]); err != nil {
				return
			}
		}
	}()
	select {
	case <-left:
	case <-done:
	}
}

// redirect answers 302 with Location loc; "{host}" in loc is replaced by the request's host.
func redirect(loc string) handler {
	return func(_ <-chan struct{}, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", strings.ReplaceAll(loc, "{host}", r.Host))
		w.WriteHeader(http.StatusFound)
	}
}

// chain redirects /chain/N to /chain/N+1 up to n, which is a page.
func chain(n int) handler {
	return func(done <-chan struct{}, w http.ResponseWriter, r *http.Request) {
		i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/chain/"))
		if err != nil || i > n {
			http.NotFound(w, r)
			return
		}
		if i == n {
			leaf(done, w, r)
			return
		}
		redirect(fmt.Sprintf("/chain/%d", i+1))(done, w, r)
	}
}

func calPath(month int) string { return fmt.Sprintf("/cal/%04d-%02d", 2000+month/12, month%12+1) }

// calendar links every month to the next and the previous one, forever.
func calendar(_ <-chan struct{}, w http.ResponseWriter, r *http.Request) {
	var y, m int
	if _, err := fmt.Sscanf(r.URL.Path, "/cal/%d-%d", &y, &m); err != nil {
		http.NotFound(w, r)
		return
	}
	month := (y-2000)*12 + m - 1
	w.Header().Set("Content-Type", "text/html")
	fmt.Fprintf(w, `<h1>%s</h1><a href="%s">next month</a>`, r.URL.Path, calPath(month+1))
	if month > 0 {
		fmt.Fprintf(w, ` <a href="%s">previous month</a>`, calPath(month-1))
	}
}

// sessions links every page to three pages with fresh session ids.
func sessions() handler {
	var n atomic.Int64
	return func(_ <-chan struct{}, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		for i := 0; i < 3; i++ {
			fmt.Fprintf(w, `<a href="/s?sid=%x">more</a> `, n.Add(1)*0x9e3779b9)
		}
		w.Write([]byte(`<a href="/ok">ok</a>`))
	}
}

// hostileSitemapLimits are the sitemap budgets of the sitemap bombs: the defaults, but smaller
// under the race detector, which makes reading a sitemap of 50,000 entries ten times slower.
var hostileSitemapLimits = func() SitemapLimits {
	if raceEnabled {
		return SitemapLimits{Docs: 8, URLs: 20_000}
	}
	return SitemapLimits{}
}()

// sitemapEntries is how many entries each document of sitemapBomb lists: the protocol's most.
const sitemapEntries = 50_000

// sitemapBomb serves /sitemap.xml and /smap/…: every index lists sitemapEntries sitemaps,
// even ones new indexes and odd ones urlsets of sitemapEntries new pages (/p/…), made up as
// they are asked for.
func sitemapBomb(_ <-chan struct{}, w http.ResponseWriter, r *http.Request) {
	id, ok := strings.CutPrefix(r.URL.Path, "/smap/")
	if r.URL.Path == "/sitemap.xml" {
		id, ok = "ir", true
	}
	id, _ = strings.CutSuffix(id, ".xml")
	if !ok || len(id) < 2 {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/xml")
	b := make([]byte, 0, 64<<10)
	flush := func() {
		w.Write(b)
		b = b[:0]
	}
	b = append(b, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"...)
	if id[0] == 'u' {
		b = append(b, `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`...)
		for i := range sitemapEntries {
			b = append(b, "<url><loc>http://"+r.Host+"/p/"+id[1:]+"."...)
			b = append(strconv.AppendInt(b, int64(i), 10), "</loc></url>\n"...)
			if len(b) > 60<<10 {
				flush()
			}
		}
		b = append(b, "</urlset>"...)
		flush()
		return
	}
	b = append(b, `<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`...)
	for i := range sitemapEntries {
		kind := "i"
		if i%2 == 1 {
			kind = "u"
		}
		b = append(b, "<sitemap><loc>http://"+r.Host+"/smap/"+kind+id[1:]+"."...)
		b = append(strconv.AppendInt(b, int64(i), 10), ".xml</loc></sitemap>\n"...)
		if len(b) > 60<<10 {
			flush()
		}
	}
	b = append(b, "</sitemapindex>"...)
	flush()
}

// checkSitemapBomb: the sitemap documents fetched and the URLs taken from them stay within the
// host's sitemap budgets, and what was cut is recorded once per sitemap, not once per URL.
func checkSitemapBomb(t *testing.T, r *hostileResult) {
	lim := hostileSitemapLimits.orDefaults()
	docs := r.site.hit("/sitemap.xml") + r.site.hitPrefix("/smap/")
	if docs > lim.Docs {
		t.Errorf("%d sitemap documents fetched, want at most %d", docs, lim.Docs)
	}
	h := r.hostCount(t)
	if n := h.Queued + h.Fetched + h.Failed + h.Excluded; n > lim.URLs+2*lim.Docs+frontier.OverBudgetRecords {
		t.Errorf("%d URLs recorded for the host, want at most %d", n, lim.URLs+2*lim.Docs+frontier.OverBudgetRecords)
	}
	if r.sum.ExcludedBy[ReasonSitemapBudget] == 0 {
		t.Errorf("excluded by %v, want the cut parts of the sitemaps recorded as %s", r.sum.ExcludedBy, ReasonSitemapBudget)
	}
}

// cssChain serves /css/N.css, which imports /css/N+1.css and loads /img/N.png.
func cssChain(_ <-chan struct{}, w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/css/"), ".css"))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/css")
	fmt.Fprintf(w, "@import \"/css/%d.css\";\nbody { background: url(/img/%d.png) }\n", n+1, n)
}

// cssChainWant is what the store must say of an endless @import chain: the stylesheets up to
// MaxRequisiteHops hops from the page fetched, the next one excluded as limit.
func cssChainWant(more ...expect) []expect {
	want := append([]expect{}, more...)
	for n := range maxRequisiteHops {
		want = append(want, expect{url: fmt.Sprintf("/css/%d.css", n), state: "fetched", status: 200})
	}
	return append(want, expect{url: fmt.Sprintf("/css/%d.css", maxRequisiteHops), state: "excluded", reason: "limit"})
}

func checkCSSChain(t *testing.T, r *hostileResult) {
	if n := r.site.hitPrefix("/css/"); n != maxRequisiteHops {
		t.Errorf("%d stylesheets of the chain fetched, want %d", n, maxRequisiteHops)
	}
}

// cssFan serves /fan/X.css, which imports 200 new stylesheets /fan/X-i.css.
func cssFan(_ <-chan struct{}, w http.ResponseWriter, r *http.Request) {
	id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/fan/"), ".css")
	w.Header().Set("Content-Type", "text/css")
	for i := range 200 {
		fmt.Fprintf(w, "@import \"/fan/%s-%d.css\";\n", id, i)
	}
}

// growing links every page to a URL 300 bytes longer.
func growing(_ <-chan struct{}, w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html")
	fmt.Fprintf(w, `<a href="%s%s/">deeper</a>`, r.URL.Path, strings.Repeat("x", 300))
}

func millionLinks() []byte {
	var b bytes.Buffer
	b.WriteString("<html><body>")
	for i := 0; i < 1_000_000; i++ {
		b.WriteString("<a href=/l/")
		b.WriteString(strconv.Itoa(i))
		b.WriteString(">")
	}
	b.WriteString("</body></html>")
	return b.Bytes()
}

const malformedHTML = `<html><body><a href="/mal-target">ok</a><a href='/mal-2'<<<>><></a>` +
	`<table><tr><td><a href=/mal-3 </div></table></p></p></html></html><a href="` +
	"\x00\x01\x02" + `"><script><a href="/in-script"></script><!-- <a href="/in-comment"> never closed`

func utf16LE(s string) string {
	var b bytes.Buffer
	b.Write([]byte{0xff, 0xfe})
	for _, u := range utf16.Encode([]rune(s)) {
		b.WriteByte(byte(u))
		b.WriteByte(byte(u >> 8))
	}
	return b.String()
}

// headers answers with n extra headers of size bytes each.
func headers(n, size int) handler {
	return func(_ <-chan struct{}, w http.ResponseWriter, r *http.Request) {
		v := strings.Repeat("v", size)
		for i := 0; i < n; i++ {
			w.Header().Set(fmt.Sprintf("X-Junk-%d", i), v)
		}
		leaf(nil, w, r)
	}
}

// bigRobots is a 10 MB robots.txt whose first group disallows /blocked.
func bigRobots() []byte {
	var b bytes.Buffer
	b.WriteString("User-agent: *\nDisallow: /blocked\n")
	for i := 0; b.Len() < 10<<20; i++ {
		fmt.Fprintf(&b, "Disallow: /junk/%d/%s\n", i, strings.Repeat("j", 40))
	}
	return b.Bytes()
}

// garbage is 256 KiB of random bytes.
func garbage() []byte {
	b := make([]byte, 256<<10)
	rand.New(rand.NewSource(1)).Read(b)
	return b
}

// heapSampler records the largest HeapInuse seen until stopped.
type heapSampler struct {
	quit chan struct{}
	done chan struct{}
	peak uint64
}

func startHeapSampler() *heapSampler {
	s := &heapSampler{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			s.peak = max(s.peak, ms.HeapInuse)
			select {
			case <-s.quit:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// resetPeakRSS resets the process's peak resident set (VmHWM) and reports whether it could.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// peakRSS returns the process's peak resident set (VmHWM) in bytes, if /proc tells it.
func peakRSS() (uint64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(v)
			if n, err := strconv.ParseUint(f[0], 10, 64); err == nil && len(f) == 2 && f[1] == "kB" {
				return n << 10, true
			}
		}
	}
	return 0, false
}

func (s *heapSampler) stop() uint64 {
	close(s.quit)
	<-s.done
	return s.peak
}
