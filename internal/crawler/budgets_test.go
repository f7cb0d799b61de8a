package crawler

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// sitemapSite serves robots.txt (allow all), and docs: path → ("index" or "urlset", entries).
type sitemapSite struct {
	srv  *httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

func startSitemapSite(t *testing.T, docs map[string][]string) *sitemapSite {
	s := &sitemapSite{hits: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		switch entries, ok := docs[r.URL.Path]; {
		case r.URL.Path == "/robots.txt":
			w.Write([]byte("User-agent: *\nAllow: /\n"))
		case r.URL.Path == "/":
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<p>home</p>"))
		case !ok:
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<p>page</p>"))
		default:
			w.Header().Set("Content-Type", "application/xml")
			root, item := "urlset", "url"
			if strings.HasPrefix(r.URL.Path, "/i") || r.URL.Path == "/sitemap.xml" {
				root, item = "sitemapindex", "sitemap"
			}
			fmt.Fprintf(w, `<%s xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`, root)
			for _, e := range entries {
				fmt.Fprintf(w, "<%s><loc>http://%s%s</loc></%s>", item, r.Host, e, item)
			}
			fmt.Fprintf(w, "</%s>", root)
		}
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sitemapSite) hit(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

// TestSitemapBudgets: an index's sitemaps are read two index levels below /sitemap.xml, not
// three; a host's sitemap documents and URLs from sitemaps stop at their budgets; and each cut
// is recorded once, under the sitemap, with what was cut and why.
func TestSitemapBudgets(t *testing.T) {
	t.Parallel()
	// /sitemap.xml (index, level 0) → /i1.xml (level 1) → /i2.xml (level 2) → /i3.xml: not read.
	docs := map[string][]string{
		"/sitemap.xml": {"/i1.xml", "/u0.xml"},
		"/i1.xml":      {"/i2.xml", "/u1.xml"},
		"/i2.xml":      {"/i3.xml", "/u2.xml"},
		"/i3.xml":      {"/p3"},
		"/u0.xml":      {"/p0a", "/p0b", "/p0c", "/p0d", "/p0e"},
		"/u1.xml":      {"/p1"},
		"/u2.xml":      {"/p2"},
	}
	for _, tc := range []struct {
		name    string
		lim     SitemapLimits
		fetched []string
		never   []string
		cut     map[string]string // sitemap → what its budget record's detail says
	}{
		{
			name:    "nesting",
			fetched: []string{"/sitemap.xml", "/i1.xml", "/i2.xml", "/u0.xml", "/u1.xml", "/p0e", "/p1"},
			never:   []string{"/i3.xml", "/u2.xml", "/p3", "/p2"},
			cut:     map[string]string{"/i2.xml": "not read: an index nested 2 deep lists no sitemap that is read (at most 2)"},
		},
		{
			name:    "documents and URLs",
			lim:     SitemapLimits{Docs: 3, URLs: 4},
			fetched: []string{"/sitemap.xml", "/i1.xml", "/u0.xml", "/p0d"},
			never:   []string{"/i2.xml", "/u1.xml", "/p0e", "/p1"},
			cut: map[string]string{
				"/i1.xml": "not read: the host's budget of 3 sitemap documents was spent",
				"/u0.xml": "the entries after the first 4 not read: the host's budget of 4 URLs from sitemaps was spent",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			site := startSitemapSite(t, docs)
			cfg := hostileConfig(t)
			cfg.Seeds = []string{site.srv.URL + "/"}
			cfg.Sitemaps, cfg.Sitemap = true, tc.lim
			sum := runCrawl(t, cfg)
			for _, p := range tc.fetched {
				if site.hit(p) != 1 {
					t.Errorf("%s fetched %d times, want once", p, site.hit(p))
				}
			}
			for _, p := range tc.never {
				if site.hit(p) != 0 {
					t.Errorf("%s fetched, want never", p)
				}
			}
			if sum.ExcludedBy[ReasonSitemapBudget] != len(tc.cut) {
				t.Errorf("excluded by %v, want %d %s", sum.ExcludedBy, len(tc.cut), ReasonSitemapBudget)
			}
			fr := readFrontier(t, cfg.Dir)
			for sm, detail := range tc.cut {
				u := site.srv.URL + sm
				st, seen, err := fr.State(u + " (over the sitemap budget)")
				if err != nil || !seen || st.Reason != ReasonSitemapBudget || st.Detail != "sitemap "+u+": "+detail {
					t.Errorf("%s: %+v (seen %v, %v); want %s %q", sm, st, seen, err, ReasonSitemapBudget, detail)
				}
			}
		})
	}
}
