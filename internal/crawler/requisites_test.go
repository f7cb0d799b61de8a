package crawler

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/simweb"
)

// TestRequisites: with Requisites, a page's stylesheet, icon and images (srcset too) are
// fetched, and the stylesheet's own @import and url() image; they are requisites at the
// page's depth, so --max-depth 0 still gets them, while links one hop away are excluded by
// depth. Without Requisites none is fetched.
func TestRequisites(t *testing.T) {
	web, err := simweb.Start([]simweb.HostSpec{{Name: "a", Pages: 6, Assets: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	assets := []string{simweb.AssetCSS + "?" + simweb.AssetCSSQuery, simweb.AssetCSS2, simweb.AssetIcon, simweb.AssetLogo,
		simweb.AssetLogo2x, simweb.AssetBg}
	base := strings.TrimSuffix(web.URL("a"), "/")

	for _, on := range []bool{true, false} {
		cfg := testConfig(t, web)
		cfg.MaxDepth, cfg.Requisites = 0, on
		runCrawl(t, cfg)
		stored := storedByURL(t, cfg.Dir)
		for _, a := range assets {
			pages := stored[base+a]
			if on && (len(pages) != 1 || pages[0].Status != 200 || pages[0].Depth != 0 || pages[0].Parent == "") {
				t.Errorf("--requisites: %s stored %d times (%+v), want once, at depth 0, with its parent", a, len(pages), pages)
			}
			if !on && len(pages) != 0 {
				t.Errorf("without --requisites, %s was fetched", a)
			}
		}
		if on && len(stored) != 1+len(assets) {
			t.Errorf("--requisites --max-depth 0 stored %d URLs, want the seed and its %d requisites", len(stored), len(assets))
		}
		if on {
			checkRoles(t, cfg.Dir, base, assets)
		}
	}
}

// checkRoles verifies that the frontier knows the assets as requisites and the seed as a page.
func checkRoles(t *testing.T, dir, base string, assets []string) {
	t.Helper()
	fr := readFrontier(t, dir)
	if st, _, err := fr.State(base + "/"); err != nil || st.Role != frontier.RolePage {
		t.Errorf("seed: %+v, %v", st, err)
	}
	for _, a := range assets {
		if st, _, err := fr.State(base + a); err != nil || st.Role != frontier.RoleRequisite || st.State != "fetched" {
			t.Errorf("%s: %+v, %v", a, st, err)
		}
	}
}

// TestAdmitRequisite: a requisite is admitted on any host unless --requisites-scope host,
// --exclude applies to it and --include does not, and none is admitted without --requisites.
func TestAdmitRequisite(t *testing.T) {
	c := &Crawler{cfg: Defaults()}
	c.scope.Mode = "host"
	c.scope.AddSeed(mustParse(t, "http://a.example/"))
	c.scope.Include = []*regexp.Regexp{regexp.MustCompile(`/docs/`)}
	c.scope.Exclude = []*regexp.Regexp{regexp.MustCompile(`\.mp4$`)}
	for _, tt := range []struct {
		url   string
		on    bool
		scope string
		role  frontier.Role
		want  string
	}{
		{"http://cdn.example/s.css", true, RequisitesScopeAny, frontier.RoleRequisite, ""},
		{"http://cdn.example/s.css", true, RequisitesScopeHost, frontier.RoleRequisite, "scope"},
		{"http://a.example/s.css", true, RequisitesScopeHost, frontier.RoleRequisite, ""},
		{"http://a.example/v.mp4", true, RequisitesScopeAny, frontier.RoleRequisite, "filter"},
		{"http://cdn.example/s.css", false, RequisitesScopeAny, frontier.RoleRequisite, "scope"},
		{"http://a.example/s.css", true, RequisitesScopeAny, frontier.RolePage, "filter"},
		{"http://a.example/docs/", true, RequisitesScopeAny, frontier.RolePage, ""},
	} {
		c.cfg.Requisites, c.cfg.RequisitesScope = tt.on, tt.scope
		if got, _ := c.admit(mustParse(t, tt.url), 0, tt.role); got != tt.want {
			t.Errorf("admit(%s, requisites %v, scope %s, %v) = %q, want %q", tt.url, tt.on, tt.scope, tt.role, got, tt.want)
		}
	}
}

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestRequisiteLinksNotFollowed: a requisite that turns out to be an HTML page is stored and
// its own requisites are fetched (as requisites, one hop further), but its links are not
// queued; a redirect of a requisite stays a requisite.
func TestRequisiteLinksNotFollowed(t *testing.T) {
	var mu sync.Mutex
	asked := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked[r.URL.Path]++
		mu.Unlock()
		switch r.URL.Path {
		case "/":
			fmt.Fprint(w, `<html><img src="/pic"><img src="/moved"></html>`)
		case "/pic":
			fmt.Fprint(w, `<html><a href="/secret">s</a><img src="/deeper.png"></html>`)
		case "/moved":
			http.Redirect(w, r, "/img.png", http.StatusFound)
		case "/img.png":
			w.Header().Set("Content-Type", "image/png")
			fmt.Fprint(w, "PNG")
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	cfg := Defaults()
	cfg.Dir, cfg.Seeds, cfg.Requisites, cfg.InitialRate = t.TempDir(), []string{srv.URL + "/"}, true, 50
	runCrawl(t, cfg)
	mu.Lock()
	defer mu.Unlock()
	if asked["/pic"] != 1 || asked["/moved"] != 1 || asked["/img.png"] != 1 || asked["/deeper.png"] != 1 || asked["/secret"] != 0 {
		t.Errorf("requests %v: want /pic, /moved, /img.png and /deeper.png once, never /secret", asked)
	}
	fr := readFrontier(t, cfg.Dir)
	for _, p := range []string{"/img.png", "/deeper.png"} {
		if st, _, err := fr.State(srv.URL + p); err != nil || st.Role != frontier.RoleRequisite || st.Parent == "" {
			t.Errorf("%s (a requisite's redirect target; a requisite's requisite): %+v, %v", p, st, err)
		}
	}
}

// TestRequisitesPageBudget: with Requisites, MaxPages counts pages only: a chain of pages, each
// with an image of its own and a shared stylesheet loading a font, crawled with a budget of 3
// fetches 3 pages and exactly their images, the stylesheet and its font; the pages left are
// excluded "limit" and nothing of theirs is fetched. A second run with a budget of 5 queues
// them again and fetches 2 more pages and their images. Without Requisites every fetch counts.
func TestRequisitesPageBudget(t *testing.T) {
	var mu sync.Mutex
	asked := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked[r.URL.Path]++
		mu.Unlock()
		var i int
		switch {
		case r.URL.Path == "/site.css":
			w.Header().Set("Content-Type", "text/css")
			fmt.Fprint(w, `@font-face { src: url("/font.woff2") }`)
		case r.URL.Path == "/font.woff2" || strings.HasPrefix(r.URL.Path, "/img/"):
			w.Header().Set("Content-Type", "image/png")
			fmt.Fprint(w, "PNG")
		case r.URL.Path == "/":
			fmt.Fprint(w, `<html><link rel=stylesheet href="/site.css"><img src="/img/0.png"><a href="/p1">1</a><a href="/p2">2</a></html>`)
		default:
			if _, err := fmt.Sscanf(r.URL.Path, "/p%d", &i); err != nil || i > 9 {
				http.NotFound(w, r)
				return
			}
			fmt.Fprintf(w, `<html><link rel=stylesheet href="/site.css"><img src="/img/%d.png"><a href="/p%d">next</a><a href="/p%d">next</a></html>`,
				i, 2*i+1, 2*i+2)
		}
	}))
	defer srv.Close()
	fetched := func(dir string) (pages, images, other []string) {
		for u, versions := range storedByURL(t, dir) {
			if len(versions) != 1 {
				t.Errorf("%s stored %d times", u, len(versions))
			}
			p := strings.TrimPrefix(u, srv.URL)
			switch {
			case strings.HasPrefix(p, "/img/"):
				images = append(images, p)
			case p == "/site.css" || p == "/font.woff2":
				other = append(other, p)
			default:
				pages = append(pages, p)
			}
		}
		return pages, images, other
	}
	imagesOf := func(pages []string) map[string]bool {
		out := map[string]bool{}
		for _, p := range pages {
			if p == "/" {
				out["/img/0.png"] = true
			} else {
				out["/img/"+strings.TrimPrefix(p, "/p")+".png"] = true
			}
		}
		return out
	}

	cfg := Defaults()
	cfg.Dir, cfg.Seeds, cfg.Requisites, cfg.InitialRate, cfg.MaxPages = t.TempDir(), []string{srv.URL + "/"}, true, 50, 3
	for _, budget := range []int{3, 5} {
		cfg.MaxPages = budget
		if budget == 5 {
			cfg.URLLog = io.Discard // --log-urls leaves the frontier as it is: pages alone still count
		}
		if sum := runCrawl(t, cfg); sum.StopReason != "max-pages" || sum.Queued != 0 || sum.ExcludedBy[frontier.ReasonLimit] == 0 {
			t.Errorf("budget %d: stop %q, %d queued, excluded %v; want max-pages, none queued, the rest excluded limit",
				budget, sum.StopReason, sum.Queued, sum.ExcludedBy)
		}
		pages, images, other := fetched(cfg.Dir)
		want := imagesOf(pages)
		if len(pages) != budget || len(images) != len(want) || len(other) != 2 {
			t.Errorf("budget %d: fetched pages %q, images %q, others %q; want %d pages, their images, the stylesheet and its font",
				budget, pages, images, other, budget)
		}
		for _, im := range images {
			if !want[im] {
				t.Errorf("budget %d: %s fetched, the image of a page not fetched", budget, im)
			}
		}
	}

	cfg.Dir, cfg.Requisites, cfg.MaxPages, cfg.URLLog = t.TempDir(), false, 3, nil
	if sum := runCrawl(t, cfg); sum.StopReason != "max-pages" || sum.Fetched != 3 || sum.Queued == 0 {
		t.Errorf("without requisites: stop %q, %d fetched, %d queued; want max-pages, 3, the rest queued", sum.StopReason, sum.Fetched, sum.Queued)
	}
}

// countsThenStored is a frontier whose Counts sees fetched URLs, after which a requisite's job
// commits and is noted (stored) before the caller goes on: the moment between the two reads
// of pagesFetched.
type countsThenStored struct {
	Frontier
	fetched int
	after   func()
}

func (f *countsThenStored) Counts() frontier.Counts {
	c := frontier.Counts{Fetched: f.fetched}
	f.after()
	return c
}

// TestPagesFetchedNeverUndercounts: a requisite stored while pagesFetched reads does not make
// the pages fetched look fewer (which let the dispatcher start a page past --max-pages).
func TestPagesFetchedNeverUndercounts(t *testing.T) {
	fr := &countsThenStored{fetched: 3} // 2 pages and 1 requisite
	c := &Crawler{fr: fr}
	c.pages.mode = budgetPages
	c.pages.requisites.Store(1)
	fr.after = func() {
		fr.fetched++
		c.pages.requisites.Add(1)
	}
	if got := c.pagesFetched(); got < 2 {
		t.Errorf("pagesFetched = %d with 2 pages committed", got)
	}
}
