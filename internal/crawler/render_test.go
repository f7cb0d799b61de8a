package crawler

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/render"
	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/storage"
)

// needBrowser returns the browser to render with: skipped without one, except under CI=true,
// where a missing browser fails the test.
func needBrowser(t *testing.T) string {
	t.Helper()
	b := render.FindBrowser()
	if b == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no Chromium or Chrome on PATH, and CI=true: install it (Debian: apt-get install chromium)")
		}
		t.Skip("no Chromium or Chrome on PATH")
	}
	return b
}

// renderedPages reads the pages of the store in dir: the rendered ones by URL, and the
// sub-resources' URLs with how often each was stored.
func renderedPages(t *testing.T, dir string) (pages map[string]*storage.Page, subs map[string]int) {
	t.Helper()
	db, err := storage.Open(dir, &storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pages, subs = map[string]*storage.Page{}, map[string]int{}
	if err := db.Pages(func(p *storage.Page) error {
		if p.Subresource {
			subs[p.URL]++
		} else {
			pages[p.URL] = p
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return pages, subs
}

// TestRenderAppWeb crawls an App web with --render always and a real Chromium: the shells'
// content and links come from an API host limited to 8 req/s, their files from a CDN host
// limited to 15 req/s. Every page is found (its links exist only once rendered) and stored
// with its rendered DOM; no request reaches the path the API's robots.txt disallows or the
// address out of the crawl's network scope; each CDN file is fetched once; at most 1% of
// requests are refused, or two: the CDN's one refusal on its burst-1 limit and one more, as
// 120 pages' 1% allowed. 30 pages are enough: sub-requests let past their host's gate draw
// dozens of refusals (55 of 122 requests, one run).
func TestRenderAppWeb(t *testing.T) {
	browser := needBrowser(t)
	const pages = 30
	a := startAppWeb(t, simweb.AppOptions{Pages: pages, APILimit: 8, APIHeaders: simweb.HeadersIETF, CDNLimit: 15})
	cfg := a.config(t)
	cfg.Render = Render{Mode: RenderAlways, Browser: browser, Tabs: 4, Timeout: 30 * time.Second}
	start := time.Now()
	sum := runCrawl(t, cfg)
	took := time.Since(start)

	got, subs := renderedPages(t, cfg.Dir)
	for i := range pages {
		u := a.url(simweb.AppSite, simweb.AppPagePath(i))
		p := got[u]
		switch {
		case p == nil:
			t.Errorf("%s not stored", u)
		case p.Render == nil:
			t.Errorf("%s stored unrendered", u)
		case !strings.Contains(string(p.Rendered), simweb.AppText(i)):
			t.Errorf("%s: rendered DOM lacks its content: %.300s", u, p.Rendered)
		case !strings.Contains(string(p.Body), "Loading…"):
			t.Errorf("%s: raw body is not the shell", u)
		}
	}
	if r := sum.Render; r == nil || r.Rendered != pages || r.Of != pages {
		t.Errorf("summary's render figures %+v, want %d of %d", r, pages, pages)
	}
	for _, p := range simweb.CDNPaths {
		if n := a.app.CDNFetches()[p]; n != 1 {
			t.Errorf("CDN %s fetched %d times, want 1", p, n)
		}
		if n := subs[a.url(simweb.AppCDN, p)]; n != 1 {
			t.Errorf("CDN %s stored %d times as a sub-resource, want 1", p, n)
		}
	}
	if n := a.outside.Load(); n != 0 {
		t.Errorf("the out-of-scope address got %d requests, want 0", n)
	}
	requests, refused := 0, 0
	for name, s := range a.web.Stats() {
		if s.RobotsViolations != 0 {
			t.Errorf("%s: %d requests to paths robots.txt disallows, want 0", name, s.RobotsViolations)
		}
		requests += s.Requests
		refused += s.OverLimit
		if s.OverLimit > 0 {
			t.Logf("%s: %d of %d requests refused, at %v (first request %v)", name, s.OverLimit, s.Requests, s.OverLimitAt, s.FirstRequest)
		}
	}
	if refused > max(2, requests/100) {
		t.Errorf("%d of %d requests refused, want at most 1%% (or two)", refused, requests)
	}
	if n := sum.ExcludedBy["robots"]; n != pages {
		t.Errorf("%d URLs excluded robots, want %d (each page's call to /private/)", n, pages)
	}
	if n := sum.ExcludedBy["private-address"]; n != 1 {
		t.Errorf("%d URLs excluded private-address, want 1 (the out-of-scope URL)", n)
	}
	t.Logf("%d pages rendered in %v; %d requests, %d refused; API %+v", pages, took.Round(time.Millisecond), requests, refused, a.web.Stats()[simweb.AppAPI].Requests)
}

// TestRenderReflectedOrigin renders pages of two sites whose API lets a page read its answer
// only when the page's Origin reached it (Access-Control-Allow-Origin names it, Vary:
// Origin), by GET and by a POST after its preflight: every page's content is there.
func TestRenderReflectedOrigin(t *testing.T) {
	browser := needBrowser(t)
	const pages = 6
	for _, post := range []bool{false, true} {
		t.Run(map[bool]string{false: "get", true: "post"}[post], func(t *testing.T) {
			a := startAppWeb(t, simweb.AppOptions{Pages: pages, Sites: 2, ReflectOrigin: true, Post: post})
			cfg := a.config(t)
			cfg.Seeds = append(cfg.Seeds, a.url(simweb.AppSiteOf(1, 2), simweb.AppPagePath(1)))
			cfg.Render = Render{Mode: RenderAlways, Browser: browser, Tabs: 2, Timeout: 30 * time.Second}
			runCrawl(t, cfg)
			got, _ := renderedPages(t, cfg.Dir)
			for i := range pages {
				u := a.url(simweb.AppSiteOf(i%2, 2), simweb.AppPagePath(i))
				if p := got[u]; p == nil || !strings.Contains(string(p.Rendered), simweb.AppText(i)) {
					t.Errorf("%s: not rendered with its content", u)
				}
			}
		})
	}
}

// TestRenderPostApp renders pages whose script loads its content with a cross-origin JSON POST
// (and a preflight OPTIONS) to a limited API: each page's text is there, the API's limit holds,
// the POST to a path robots.txt disallows is refused and recorded excluded robots, and the
// POSTs are stored with their method.
func TestRenderPostApp(t *testing.T) {
	browser := needBrowser(t)
	const pages = 12
	a := startAppWeb(t, simweb.AppOptions{Pages: pages, APILimit: 8, APIHeaders: simweb.HeadersIETF, Post: true})
	cfg := a.config(t)
	cfg.Render = Render{Mode: RenderAlways, Browser: browser, Tabs: 2, Timeout: 30 * time.Second}
	sum := runCrawl(t, cfg)

	got, _ := renderedPages(t, cfg.Dir)
	for i := range pages {
		u := a.url(simweb.AppSite, simweb.AppPagePath(i))
		if p := got[u]; p == nil || !strings.Contains(string(p.Rendered), simweb.AppText(i)) {
			t.Errorf("%s: not rendered with its content", u)
		}
	}
	if n := a.app.SearchRequests()["POST"]; n != pages {
		t.Errorf("%d POSTs to /search answered, want %d (one per page: each has its own body)", n, pages)
	}
	s := a.web.Stats()[simweb.AppAPI]
	if s.RobotsViolations != 0 || s.OverLimit*100 > s.Requests {
		t.Errorf("API: %d requests to disallowed paths, %d of %d refused", s.RobotsViolations, s.OverLimit, s.Requests)
	}
	if n := sum.ExcludedBy["robots"]; n != pages {
		t.Errorf("%d URLs excluded robots, want %d (each page's POST to /private/)", n, pages)
	}
	db, err := storage.Open(cfg.Dir, &storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	posts := 0
	db.PagesMeta(func(p *storage.Page) error {
		if p.Subresource && p.ReqMethod == "POST" && strings.HasSuffix(p.URL, "/search") {
			posts++
		}
		return nil
	})
	if posts != pages {
		t.Errorf("%d POSTs to /search stored, want %d", posts, pages)
	}
	t.Logf("API /search by method %v; API %d requests, %d refused", a.app.SearchRequests(), s.Requests, s.OverLimit)
}
