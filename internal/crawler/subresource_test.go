package crawler

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crawl-project/crawl/fetch"
	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/dnstest"
	"github.com/crawl-project/crawl/internal/netguard"
	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/storage"
)

// appWeb is an App web (simweb) on one loopback listener, a DNS server resolving its names to
// 127.0.0.1 and outsideName to [::1], where a server counts every request it gets: an address
// outside the crawl's network scope (the seeds put 127.0.0.0/8 in scope, not ::1).
type appWeb struct {
	web     *simweb.Web
	app     *simweb.App
	dns     *dnstest.Server
	outside atomic.Int64 // requests that reached the outside server
	outURL  string       // the URL every page's script calls there
	port    string       // the web's port
}

const outsideName = "outside.app.test"

func startAppWeb(t *testing.T, o simweb.AppOptions) *appWeb {
	t.Helper()
	a := &appWeb{}
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback to stand for an out-of-scope address: %v", err)
	}
	out := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.outside.Add(1)
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Write([]byte("reached"))
	}))
	out.Listener = ln
	out.Start()
	t.Cleanup(out.Close)
	_, outPort, _ := net.SplitHostPort(ln.Addr().String())
	a.outURL = "http://" + outsideName + ":" + outPort + "/steal"
	o.Outside = a.outURL
	a.app = simweb.NewApp(o)
	// Arrivals are the kernel's receive times: a handler run late on a loaded machine (these
	// tests run in parallel) does not bunch the crawl's paced requests into refusals.
	a.web, err = simweb.Start(a.app.Specs, &simweb.Options{VirtualHosts: true, KernelArrival: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.web.Close)
	_, a.port, _ = net.SplitHostPort(a.web.Addr())
	a.dns, err = dnstest.Start(&dnstest.Options{Resolve: func(name string) []netip.Addr {
		switch {
		case name == outsideName:
			return []netip.Addr{netip.MustParseAddr("::1")}
		case strings.HasSuffix(name, ".app.test"): // the site hosts (simweb.AppSiteOf), API and CDN
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.dns.Close)
	return a
}

// url is the URL of path on host of the App web.
func (a *appWeb) url(host, path string) string { return "http://" + host + ":" + a.port + path }

func (a *appWeb) config(t *testing.T) Config {
	cfg := Defaults()
	cfg.Dir = t.TempDir()
	cfg.Seeds = []string{a.url(simweb.AppSite, simweb.AppPagePath(0))}
	cfg.DNSServer = a.dns.Addr()
	cfg.StatusEvery = 100 * time.Millisecond
	return cfg
}

// openForSubresources opens a crawler on cfg ready to answer sub-requests, without running it.
func openForSubresources(t *testing.T, cfg Config) *Crawler {
	t.Helper()
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.initSubresources(); err != nil {
		t.Fatal(err)
	}
	return c
}

func stateOf(t *testing.T, c *Crawler, u string) frontier.URLState {
	t.Helper()
	st, ok, err := c.fr.(*frontier.Frontier).State(u)
	if err != nil || !ok {
		t.Fatalf("%s: not recorded (%v)", u, err)
	}
	return st
}

// TestSubresourceThroughTheCrawl sends a rendered page's sub-requests through the crawl without
// a browser: a disallowed path and an address out of scope never reach a server and are
// recorded as excluded; each CDN file is fetched once, however many ask at once; a stored one
// is answered from the store by the next crawler on the store; TRACE is refused.
func TestSubresourceThroughTheCrawl(t *testing.T) {
	t.Parallel()
	a := startAppWeb(t, simweb.AppOptions{Pages: 4})
	cfg := a.config(t)
	c := openForSubresources(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	from := renderingPage{url: cfg.Seeds[0], depth: 0}

	private := a.url(simweb.AppAPI, "/private/track?page=0")
	if _, err := c.subresource(ctx, from, "GET", private); !errors.Is(err, errSubRobots) {
		t.Errorf("disallowed path: err %v, want errSubRobots", err)
	}
	if st := stateOf(t, c, private); st.State != "excluded" || st.Reason != frontier.ReasonRobots {
		t.Errorf("disallowed path recorded as %s %s, want excluded robots", st.State, st.Reason)
	}
	for _, u := range []string{a.url(simweb.AppCDN, "/app.js")} {
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() {
				p, err := c.subresource(ctx, from, "GET", u)
				if err != nil || p.Status != 200 || !p.Subresource || p.Parent != from.url {
					t.Errorf("GET %s: %v %+v", u, err, p)
				}
			})
		}
		wg.Wait()
	}
	if n := a.app.CDNFetches()["/app.js"]; n != 1 {
		t.Errorf("app.js served %d times to 5 asks, want 1", n)
	}
	if _, err := c.subresource(ctx, from, "TRACE", a.url(simweb.AppAPI, "/content/0")); !errors.Is(err, errSubMethod) {
		t.Errorf("TRACE: err %v, want errSubMethod", err)
	}
	if s := a.web.Stats()[simweb.AppAPI]; s.RobotsViolations != 0 || s.RobotsRequests != 1 {
		t.Errorf("API host: %d requests to disallowed paths, %d robots.txt requests; want 0 and 1", s.RobotsViolations, s.RobotsRequests)
	}
	c.Close()

	c = openForSubresources(t, cfg)
	p, err := c.subresource(ctx, from, "GET", a.url(simweb.AppCDN, "/app.js"))
	if err != nil || p.Status != 200 || len(p.Body) == 0 {
		t.Fatalf("app.js from the store: %v %+v", err, p)
	}
	if n := a.app.CDNFetches()["/app.js"]; n != 1 {
		t.Errorf("app.js served %d times after a second crawler asked, want 1 (answered from the store)", n)
	}
}

// TestSubresourceOutOfScopeAddress: a script's call to a name that resolves outside the
// crawl's network scope is refused at dial time, never reaching the server there, and recorded
// as excluded private-address.
func TestSubresourceOutOfScopeAddress(t *testing.T) {
	t.Parallel()
	a := startAppWeb(t, simweb.AppOptions{Pages: 1})
	cfg := a.config(t)
	c := openForSubresources(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u := a.outURL
	_, err := c.subresource(ctx, renderingPage{url: cfg.Seeds[0]}, "GET", u)
	if !errors.Is(err, netguard.ErrPrivateAddress) {
		t.Errorf("GET %s: err %v, want netguard.ErrPrivateAddress", u, err)
	}
	if n := a.outside.Load(); n != 0 {
		t.Errorf("the out-of-scope server got %d requests, want 0", n)
	}
	if st := stateOf(t, c, u); st.State != "excluded" || st.Reason != frontier.ReasonPrivateAddress {
		t.Errorf("%s recorded as %s %s, want excluded private-address", u, st.State, st.Reason)
	}
}

// TestSubresourceRetriesUnderTheLimit: sub-requests to an API host limited to 4 req/s, many at
// once, are paced by the host's gate and the 429s it still meets are retried under their
// Retry-After before the browser sees an answer: every ask gets the content.
func TestSubresourceRetriesUnderTheLimit(t *testing.T) {
	const pages = 12
	a := startAppWeb(t, simweb.AppOptions{Pages: pages, APILimit: 4})
	cfg := a.config(t)
	cfg.InitialRate = 20 // far above the limit: 429s come at once
	c := openForSubresources(t, cfg)
	askContents(t, a, c, cfg.Seeds[0], pages)
	s := a.web.Stats()[simweb.AppAPI]
	t.Logf("API host: %d requests, %d refused", s.Requests, s.OverLimit)
	if s.OverLimit == 0 {
		t.Errorf("no 429 met: the test does not test retries")
	}
	if s.InRetryAfter != 0 {
		t.Errorf("%d requests arrived inside a Retry-After the host had announced", s.InRetryAfter)
	}
}

// askContents asks c, all at once, for the API's contents of pages 0 … pages-1 of a, as
// sub-requests of the page from, and checks that each gets its content.
func askContents(t *testing.T, a *appWeb, c *Crawler, from string, pages int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for i := range pages {
		wg.Go(func() {
			u := a.url(simweb.AppAPI, "/content/"+strconv.Itoa(i))
			p, err := c.subresource(ctx, renderingPage{url: from}, "GET", u)
			if err != nil || p.Status != 200 || !strings.Contains(string(p.Body), simweb.AppText(i)) {
				t.Errorf("GET %s: %v %+v", u, err, p)
			}
		})
	}
	wg.Wait()
}

// TestSubresourceFromFetchedPage: a sub-request for a URL the crawl fetched as a page is
// answered from the store, not fetched again.
func TestSubresourceFromFetchedPage(t *testing.T) {
	t.Parallel()
	a := startAppWeb(t, simweb.AppOptions{Pages: 1})
	cfg := a.config(t)
	cfg.Seeds = append(cfg.Seeds, a.url(simweb.AppCDN, "/app.js"))
	cfg.MaxDepth = 0
	runCrawl(t, cfg)
	if n := a.app.CDNFetches()["/app.js"]; n != 1 {
		t.Fatalf("app.js fetched %d times by the crawl, want 1", n)
	}
	c := openForSubresources(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := c.subresource(ctx, renderingPage{url: cfg.Seeds[0]}, "GET", a.url(simweb.AppCDN, "/app.js"))
	if err != nil || p.Status != 200 || len(p.Body) == 0 {
		t.Fatalf("app.js: %v %+v", err, p)
	}
	if n := a.app.CDNFetches()["/app.js"]; n != 1 {
		t.Errorf("app.js fetched %d times, want 1: answered from the store", n)
	}
}

// TestSubresourcePost: a POST is sent with its body and shared or answered again only for the
// same body; a GET of the same URL is not answered with a POST's answer.
func TestSubresourcePost(t *testing.T) {
	t.Parallel()
	a := startAppWeb(t, simweb.AppOptions{Pages: 2, Post: true})
	cfg := a.config(t)
	c := openForSubresources(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	from := renderingPage{url: cfg.Seeds[0]}
	search := a.url(simweb.AppAPI, "/search")
	post := func(body string) *storage.Page {
		p, err := c.subresourceReq(ctx, from, subRequest{method: "POST", url: search, body: []byte(body), bodyType: "application/json"})
		if err != nil {
			t.Fatalf("POST %s: %v", body, err)
		}
		return p
	}
	p0, again, p1 := post(`{"page":0}`), post(`{"page":0}`), post(`{"page":1}`)
	if !strings.Contains(string(p0.Body), simweb.AppText(0)) || !strings.Contains(string(p1.Body), simweb.AppText(1)) || p0.ReqMethod != "POST" {
		t.Errorf("answers %q %q (method %s)", p0.Body, p1.Body, p0.ReqMethod)
	}
	if again.Seq != p0.Seq {
		t.Errorf("the same POST again was sent again (seq %d, first %d)", again.Seq, p0.Seq)
	}
	if n := a.app.SearchRequests()["POST"]; n != 2 {
		t.Errorf("%d POSTs reached the API for 2 bodies, want 2", n)
	}
	g, err := c.subresource(ctx, from, "GET", search)
	if err != nil || g.Status != http.StatusMethodNotAllowed || g.ReqMethod != "GET" {
		t.Errorf("GET after the POSTs: %v status %d method %s, want the API's own 405", err, g.Status, g.ReqMethod)
	}
}

// TestUnprocessed: only a 429 or 503 that says when to come back lets a POST be sent again.
func TestUnprocessed(t *testing.T) {
	for _, tc := range []struct {
		status int
		after  string
		want   bool
	}{{429, "1", true}, {503, "2", true}, {429, "", false}, {503, "", false}, {500, "1", false}, {200, "1", false}} {
		r := &fetch.Response{Status: tc.status, Header: http.Header{}}
		if tc.after != "" {
			r.Header.Set("Retry-After", tc.after)
		}
		if got := unprocessed(r); got != tc.want {
			t.Errorf("%d Retry-After %q: %v, want %v", tc.status, tc.after, got, tc.want)
		}
	}
}

// TestSubresourcePostRetried: a POST refused with a 429 that says when to come back is sent
// again after the wait and answered; one refused with a bare 429 is not sent again, and the
// browser gets the 429.
func TestSubresourcePostRetried(t *testing.T) {
	const bodies = 8
	for _, tc := range []struct {
		name  string
		reply simweb.ReplyStyle
		again bool
	}{
		{"retry-after", simweb.Reply429Seconds, true},
		{"bare", simweb.Reply429Bare, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := startAppWeb(t, simweb.AppOptions{Pages: bodies, Post: true, APILimit: 2, APIReply: tc.reply})
			cfg := a.config(t)
			cfg.InitialRate = 20 // far above the limit: 429s come at once
			c := openForSubresources(t, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			search := a.url(simweb.AppAPI, "/search")
			var refused atomic.Int64
			var wg sync.WaitGroup
			for i := range bodies {
				wg.Go(func() {
					body := `{"page":` + strconv.Itoa(i) + `}`
					p, err := c.subresourceReq(ctx, renderingPage{url: cfg.Seeds[0]}, subRequest{method: "POST", url: search, body: []byte(body), bodyType: "application/json"})
					switch {
					case err != nil:
						t.Errorf("POST %s: %v", body, err)
					case p.Status == http.StatusTooManyRequests:
						refused.Add(1)
					case p.Status != 200 || !strings.Contains(string(p.Body), simweb.AppText(i)):
						t.Errorf("POST %s: status %d body %q", body, p.Status, p.Body)
					}
				})
			}
			wg.Wait()
			s := a.web.Stats()[simweb.AppAPI]
			n := a.app.SearchRequests()["POST"]
			t.Logf("API host: %d requests, %d refused; %d POSTs answered, %d refused to the browser", s.Requests, s.OverLimit, n, refused.Load())
			if s.OverLimit == 0 {
				t.Fatalf("no 429 met: the test does not test retries")
			}
			if n+int(refused.Load()) != bodies {
				t.Errorf("%d POSTs answered and %d refused for %d bodies: each body is acted on at most once and answered", n, refused.Load(), bodies)
			}
			if tc.again && refused.Load() != 0 {
				t.Errorf("%d POSTs refused with a Retry-After reached the browser: not sent again", refused.Load())
			}
			if !tc.again && int64(s.PageRequests) != int64(n)+refused.Load() {
				t.Errorf("%d requests reached the API for %d answered and %d refused POSTs: a bare 429 was sent again", s.PageRequests, n, refused.Load())
			}
			if s.InRetryAfter != 0 {
				t.Errorf("%d requests arrived inside a Retry-After the host had announced", s.InRetryAfter)
			}
		})
	}
}

// TestSubresourceVary: a page's headers reach the server; an answer that varies by Origin
// serves only asks from the same origin, each origin's answer is fetched once and then
// answered from the store.
func TestSubresourceVary(t *testing.T) {
	t.Parallel()
	a := startAppWeb(t, simweb.AppOptions{Pages: 1, ReflectOrigin: true})
	c := openForSubresources(t, a.config(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u := a.url(simweb.AppAPI, "/content/0")
	ask := func(origin string) string {
		t.Helper()
		h := http.Header{}
		if origin != "" {
			h.Set("Origin", origin)
		}
		p, err := c.subresourceReq(ctx, renderingPage{url: a.url(simweb.AppSite, "/")}, subRequest{method: "GET", url: u, header: h})
		if err != nil || p.Status != 200 {
			t.Fatalf("GET %s from %q: %v %+v", u, origin, err, p)
		}
		return p.Header.Get("Access-Control-Allow-Origin")
	}
	siteA, siteB := "http://a.app.test", "http://b.app.test"
	for i, tc := range []struct{ origin, want string }{{siteA, siteA}, {siteB, siteB}, {siteA, siteA}, {siteB, siteB}, {"", ""}, {"", ""}} {
		if got := ask(tc.origin); got != tc.want {
			t.Errorf("ask %d from %q: Access-Control-Allow-Origin %q, want %q", i, tc.origin, got, tc.want)
		}
	}
	if n := a.web.Stats()[simweb.AppAPI].PageRequests; n != 3 {
		t.Errorf("the API got %d requests for three origins' asks, want 3", n)
	}
}

// TestSubresourcePostResumed: a POST stored by an earlier run on the store is answered from it
// for the same body, not sent again; another body is sent.
func TestSubresourcePostResumed(t *testing.T) {
	t.Parallel()
	a := startAppWeb(t, simweb.AppOptions{Pages: 2, Post: true})
	cfg := a.config(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	search := a.url(simweb.AppAPI, "/search")
	post := func(c *Crawler, body string) {
		t.Helper()
		p, err := c.subresourceReq(ctx, renderingPage{url: cfg.Seeds[0]}, subRequest{method: "POST", url: search, body: []byte(body), bodyType: "application/json"})
		if err != nil || p.Status != 200 {
			t.Fatalf("POST %s: %v %+v", body, err, p)
		}
	}
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.initSubresources(); err != nil {
		t.Fatal(err)
	}
	post(c, `{"page":0}`)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = openForSubresources(t, cfg)
	post(c, `{"page":0}`)
	if n := a.app.SearchRequests()["POST"]; n != 1 {
		t.Errorf("%d POSTs reached the API for one body asked in two runs, want 1", n)
	}
	post(c, `{"page":1}`)
	if n := a.app.SearchRequests()["POST"]; n != 2 {
		t.Errorf("%d POSTs reached the API after a second body, want 2", n)
	}
}
