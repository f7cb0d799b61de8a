package crawler

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/storage"
)

// pageIndex returns the simweb page number of an ordinary page URL ("/" is 0, "/p7" is 7).
func pageIndex(t *testing.T, raw string) int {
	t.Helper()
	u := mustParse(t, raw)
	if u.Path == "/" {
		return 0
	}
	i, err := strconv.Atoi(strings.TrimPrefix(u.Path, "/p"))
	if err != nil {
		t.Fatalf("%s is not an ordinary page", raw)
	}
	return i
}

// storedByURL returns the stored pages of each URL in fetch order.
func storedByURL(t *testing.T, dir string) map[string][]*storage.Page {
	t.Helper()
	db, err := storage.Open(dir, &storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string][]*storage.Page{}
	if err := db.PagesMeta(func(p *storage.Page) error { out[p.URL] = append(out[p.URL], p); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRecrawl: a second run with Recrawl revisits every fetched page once, with conditional
// GETs where the page gave validators: the servers answer 304 to the unchanged ones, which
// are stored as 304s naming the page they confirm, and 200 to the changed ones and those
// without validators, which are stored anew. A third run revalidates from the newest 200 or
// through the 304s; --older-than skips pages visited since.
func TestRecrawl(t *testing.T) {
	t.Parallel()
	started := time.Now()
	web, err := simweb.Start([]simweb.HostSpec{{Name: "a", Pages: 24, Revisions: true}}, &simweb.Options{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	cfg := testConfig(t, web)
	runCrawl(t, cfg)
	checkComplete(t, web, cfg.Dir, 0)
	expected := web.Expected()["a"]
	plain := 0 // pages without validators
	for _, u := range expected {
		if simweb.ValidatorsOf(pageIndex(t, u)) == simweb.NoValidators {
			plain++
		}
	}
	changed := []string{"/p4", "/p5", "/p6", "/p7"} // one of each validator style
	if err := web.Change("a", changed...); err != nil {
		t.Fatal(err)
	}
	isChanged := func(u string) bool {
		for _, p := range changed {
			if strings.HasSuffix(u, p) {
				return true
			}
		}
		return false
	}
	first := storedByURL(t, cfg.Dir)
	bodies := storedBodies(t, cfg.Dir)

	web.Reset()
	cfg.Seeds, cfg.Recrawl = nil, true
	sum := runCrawl(t, cfg)
	st := web.Stats()["a"]
	conditional := len(expected) - plain
	t.Logf("recrawl of %d pages: %d conditional, %d answered 304, %d answered 200", len(expected), st.Conditional, st.NotModified, st.OK)
	if sum.StopReason != "done" || st.PageRequests != len(expected) || st.Duplicates != 0 {
		t.Errorf("recrawl: stop %q, %d page requests (%d duplicates), want done, %d, 0", sum.StopReason, st.PageRequests, st.Duplicates, len(expected))
	}
	if st.Conditional != conditional || st.NotModified != conditional-3 || st.OK != plain+3+st.RobotsRequests {
		t.Errorf("recrawl: %d conditional, %d 304s, %d 200s; want %d, %d, %d (+ robots.txt)", st.Conditional, st.NotModified, st.OK,
			conditional, conditional-3, plain+3)
	}
	if got := storedBodies(t, cfg.Dir); got != bodies+len(changed) {
		t.Errorf("the recrawl stored %d bodies, want %d (the changed pages' only)", got-bodies, len(changed))
	}
	second := storedByURL(t, cfg.Dir)
	checkBodies(t, cfg.Dir, second)
	for _, u := range expected {
		pages := second[u]
		if len(pages) != 2 {
			t.Errorf("%s: %d pages stored after the recrawl, want 2", u, len(pages))
			continue
		}
		again := pages[1]
		switch {
		case isChanged(u):
			if again.Status != 200 || again.RevisitOf != 0 || again.SameAs != 0 {
				t.Errorf("%s (changed): revisit stored %d RevisitOf %d SameAs %d, want a new 200", u, again.Status, again.RevisitOf, again.SameAs)
			}
		case simweb.ValidatorsOf(pageIndex(t, u)) == simweb.NoValidators:
			if again.Status != 200 || again.RevisitOf != 0 || again.SameAs != first[u][0].Seq {
				t.Errorf("%s (unchanged, without validators): revisit stored %d RevisitOf %d SameAs %d, want a 200 the same as %d",
					u, again.Status, again.RevisitOf, again.SameAs, first[u][0].Seq)
			}
		default:
			if again.Status != 304 || again.RevisitOf != first[u][0].Seq {
				t.Errorf("%s (unchanged): revisit stored status %d RevisitOf %d, want 304 confirming %d", u, again.Status, again.RevisitOf, first[u][0].Seq)
			}
		}
	}

	// Again: every page with validators is unchanged now, whether its last visit was a 200 or
	// a 304, and every page without is the same as at its last visit.
	web.Reset()
	bodies = storedBodies(t, cfg.Dir)
	runCrawl(t, cfg)
	st = web.Stats()["a"]
	if st.PageRequests != len(expected) || st.Conditional != conditional || st.NotModified != conditional {
		t.Errorf("third run: %d page requests, %d conditional, %d 304s; want %d, %d, %d", st.PageRequests, st.Conditional,
			st.NotModified, len(expected), conditional, conditional)
	}
	if got := storedBodies(t, cfg.Dir); got != bodies {
		t.Errorf("a recrawl of an unchanged site stored %d bodies", got-bodies)
	}
	third := storedByURL(t, cfg.Dir)
	checkBodies(t, cfg.Dir, third)
	for _, u := range expected {
		if v := third[u]; simweb.ValidatorsOf(pageIndex(t, u)) == simweb.NoValidators && isChanged(u) && v[2].SameAs != v[1].Seq {
			t.Errorf("%s: third visit SameAs %d, want the changed version %d", u, v[2].SameAs, v[1].Seq)
		}
	}

	// Every page was visited within the hour: --older-than 1h revisits none.
	web.Reset()
	cfg.RecrawlOlderThan = time.Hour
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, rev := c.Changes(); rev.Revisited != 0 {
		t.Errorf("--older-than 1h revisited %d URLs", rev.Revisited)
	}
	if a := c.RecrawlAges(); a.Old != 0 || a.Recent != len(expected) || !a.NextAt.After(started.Add(time.Hour)) || a.NextAt.After(time.Now().Add(time.Hour)) {
		t.Errorf("--older-than 1h: %+v; want %d recent URLs, the first 1h old within the hour after %v", a, len(expected), started)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// ... and --older-than 1ns revisits all of them.
	cfg.RecrawlOlderThan = time.Nanosecond
	runCrawl(t, cfg)
	if st := web.Stats()["a"]; st.PageRequests != len(expected) {
		t.Errorf("--older-than 1ns: %d page requests, want %d", st.PageRequests, len(expected))
	}
	checkFetched(t, cfg.Dir, len(expected))
}

// storedBodies returns how many bodies the store in dir holds.
func storedBodies(t *testing.T, dir string) int {
	t.Helper()
	db, err := storage.Open(dir, &storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n, _, err := db.StoredBodies()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkBodies verifies that every page of byURL stored the same as an earlier one reads with
// that one's body, and that every 304 confirming one reads with none.
func checkBodies(t *testing.T, dir string, byURL map[string][]*storage.Page) {
	t.Helper()
	db, err := storage.Open(dir, &storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for u, pages := range byURL {
		for _, p := range pages {
			if p.SameAs == 0 && p.RevisitOf == 0 {
				continue
			}
			got, err := db.Page(p.Seq)
			if err != nil {
				t.Fatal(err)
			}
			var want []byte
			if p.SameAs != 0 {
				orig, err := db.Page(p.SameAs)
				if err != nil {
					t.Fatal(err)
				}
				if want = orig.Body; len(want) == 0 || orig.URL != u {
					t.Errorf("%s: page %d is the same as page %d of %s, %d bytes", u, p.Seq, p.SameAs, orig.URL, len(want))
				}
			}
			if !bytes.Equal(got.Body, want) {
				t.Errorf("%s: page %d (SameAs %d, RevisitOf %d) reads with %d bytes, want %d", u, p.Seq, p.SameAs, p.RevisitOf, len(got.Body), len(want))
			}
		}
	}
}

// checkFetched verifies that the store's frontier counts n URLs fetched and none queued.
func checkFetched(t *testing.T, dir string, n int) {
	t.Helper()
	if cn := readFrontier(t, dir).Counts(); cn.Fetched != n || cn.Queued != 0 {
		t.Errorf("frontier counts %+v, want %d fetched and nothing queued", cn, n)
	}
}

// readFrontier opens the frontier of the store in dir read-only, closed at cleanup.
func readFrontier(t *testing.T, dir string) *frontier.Frontier {
	t.Helper()
	db, err := storage.Open(dir, &storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	fr, err := frontier.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fr
}

// TestRecrawlOrder: a recrawl revisits first the pages that changed at their last revisits
// (not those that answered 304, nor those without validators whose body came back the same),
// so a recrawl cut short by --max-pages spends its budget on them.
func TestRecrawlOrder(t *testing.T) {
	t.Parallel()
	web, err := simweb.Start([]simweb.HostSpec{{Name: "a", Pages: 24, Revisions: true}}, &simweb.Options{Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	cfg := testConfig(t, web)
	runCrawl(t, cfg)
	if err := web.Change("a", "/p4", "/p5", "/p6"); err != nil {
		t.Fatal(err)
	}
	cfg.Seeds, cfg.Recrawl = nil, true
	runCrawl(t, cfg)
	want := map[string]bool{}
	for _, u := range web.Expected()["a"] {
		i := pageIndex(t, u)
		if i == 4 || i == 5 || i == 6 {
			want[u] = true
		}
	}
	before := storedByURL(t, cfg.Dir)
	cfg.MaxPages = len(want)
	sum := runCrawl(t, cfg)
	if sum.StopReason != "max-pages" {
		t.Errorf("stop %q, want max-pages", sum.StopReason)
	}
	var got []string
	for u, pages := range storedByURL(t, cfg.Dir) {
		if len(pages) > len(before[u]) {
			got = append(got, u)
			if !want[u] {
				t.Errorf("%s was revisited within the budget; it never changed", u)
			}
		}
	}
	if len(got) != len(want) {
		t.Errorf("revisited %d pages within a budget of %d: %q", len(got), len(want), got)
	}
}

// TestRecrawlSitemapLastMod: a stored sitemap's <lastmod> orders revisits: a page it says
// changed after the last visit goes first, one it says has not changed goes last.
func TestRecrawlSitemapLastMod(t *testing.T) {
	t.Parallel()
	var base string
	sm := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<url><loc>%[1]sp8</loc><lastmod>2100-01-01</lastmod></url>
<url><loc>%[1]sp3</loc><lastmod>2000-01-01</lastmod></url>
</urlset>`, base)
	})
	web, err := simweb.Start([]simweb.HostSpec{{Name: "a", Pages: 12, Revisions: true,
		Extra: map[string]http.Handler{"/sitemap.xml": sm}}}, &simweb.Options{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	base = web.URL("a")
	cfg := testConfig(t, web)
	cfg.Sitemaps = true
	runCrawl(t, cfg)
	total := 0
	for _, pages := range storedByURL(t, cfg.Dir) {
		total += len(pages)
	}
	revisited := func(n int) []string {
		before := storedByURL(t, cfg.Dir)
		cfg.Seeds, cfg.Recrawl, cfg.MaxPages = nil, true, n
		runCrawl(t, cfg)
		var got []string
		for u, pages := range storedByURL(t, cfg.Dir) {
			if len(pages) > len(before[u]) {
				got = append(got, u)
			}
		}
		return got
	}
	if got := revisited(1); len(got) != 1 || got[0] != base+"p8" {
		t.Errorf("with a budget of one page the recrawl revisited %q, want the page the sitemap says changed", got)
	}
	// The rest are still queued from that recrawl: change p3 and p5 and finish it. Now every
	// page has one revisit: p3 and p5 changed at it, the others did not; but the sitemap
	// vouches that p3 did not change since, and that p8 did.
	if err := web.Change("a", "/p3", "/p5"); err != nil {
		t.Fatal(err)
	}
	cfg.Recrawl, cfg.MaxPages = false, 0
	runCrawl(t, cfg)
	got := revisited(2)
	slices.Sort(got)
	if want := []string{base + "p5", base + "p8"}; !slices.Equal(got, want) {
		t.Errorf("with a budget of two pages the recrawl revisited %q, want %q", got, want)
	}
}
