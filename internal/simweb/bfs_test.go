package simweb

import (
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/temoto/robotstxt"
	"golang.org/x/net/html"
)

// bfsResult is what a naive polite crawl over the served HTML saw.
type bfsResult struct {
	stored     map[string][]string // per host name: URLs answered 200, sorted
	disallowed map[string]int      // per host name: distinct linked URLs robots.txt forbids
	hrefs      []string            // every raw href seen
	sizes      []int               // body sizes of stored pages
	titles     int                 // pages with a non-empty <title>
}

// naiveBFS crawls from seeds, reading each host's robots.txt with temoto/robotstxt (an
// oracle independent of simweb's own matching) and following every <a href> on the Web's hosts.
func naiveBFS(t *testing.T, w *Web, c *http.Client, seeds []string) bfsResult {
	t.Helper()
	nameOf := make(map[string]string) // u.Host -> name
	for _, n := range w.Names() {
		u, _ := url.Parse(w.URL(n))
		nameOf[u.Host] = n
	}
	res := bfsResult{stored: map[string][]string{}, disallowed: map[string]int{}}
	robots := make(map[string]*robotstxt.RobotsData)
	rules := func(host string) *robotstxt.RobotsData {
		if g, ok := robots[host]; ok {
			return g
		}
		r := get(t, c, "http://"+host+"/robots.txt")
		data, err := robotstxt.FromStatusAndString(r.status, r.body)
		if err != nil {
			t.Fatalf("robots.txt of %s: %v", host, err)
		}
		robots[host] = data
		return data
	}
	seen := map[string]bool{}
	forbidden := map[string]bool{}
	var queue []*url.URL
	push := func(u *url.URL) {
		u.Fragment = ""
		u.RawFragment = ""
		name, ok := nameOf[u.Host]
		if !ok {
			t.Errorf("link leaves the simulated web: %s", u)
			return
		}
		if seen[u.String()] {
			return
		}
		if !rules(u.Host).TestAgent(u.Path, "naive-bfs") {
			if !forbidden[u.String()] {
				forbidden[u.String()] = true
				res.disallowed[name]++
			}
			return
		}
		seen[u.String()] = true
		queue = append(queue, u)
	}
	for _, s := range seeds {
		u, _ := url.Parse(s)
		push(u)
	}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		r := get(t, c, u.String())
		if r.status != http.StatusOK {
			t.Errorf("GET %s: status %d", u, r.status)
			continue
		}
		name := nameOf[u.Host]
		res.stored[name] = append(res.stored[name], u.String())
		res.sizes = append(res.sizes, len(r.body))
		doc, err := html.Parse(strings.NewReader(r.body))
		if err != nil {
			t.Fatalf("parse %s: %v", u, err)
		}
		for n := range doc.Descendants() {
			if n.Type != html.ElementNode {
				continue
			}
			if n.Data == "title" && n.FirstChild != nil && strings.TrimSpace(n.FirstChild.Data) != "" {
				res.titles++
			}
			if n.Data != "a" {
				continue
			}
			for _, a := range n.Attr {
				if a.Key != "href" {
					continue
				}
				res.hrefs = append(res.hrefs, a.Val)
				ref, err := url.Parse(a.Val)
				if err != nil {
					t.Errorf("bad href %q on %s", a.Val, u)
					continue
				}
				push(u.ResolveReference(ref))
			}
		}
	}
	for _, v := range res.stored {
		sort.Strings(v)
	}
	return res
}

func TestExpectedMatchesNaiveBFS(t *testing.T) {
	tests := []struct {
		name  string
		specs []HostSpec
	}{
		{"small", Small()},
		{"demo", DemoWeb()},
		{"bench", PolitenessBench()},
		{"robots-5xx-and-prefix", []HostSpec{
			{Name: "down", Pages: 10, RobotsStatus: 503, CrossLinks: []string{"up"}},
			{Name: "up", Pages: 30, Disallow: []string{"/p1", "/deep/er/"}, CrossLinks: []string{"down"}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "bench" && (testing.Short() || raceEnabled) {
				t.Skip("2,600 pages: run without -race and -short")
			}
			// The clock jumps an hour per request, so no bucket is ever empty; service times do
			// not shape the graph, so they are dropped to keep the serial walk fast.
			for i := range tc.specs {
				tc.specs[i].Service = 0
			}
			clk := newFakeClock(t0, time.Hour)
			w, c := startWeb(t, tc.specs, &Options{Seed: 7, Clock: clk.Now})
			res := naiveBFS(t, w, c, w.Seeds())
			exp := w.Expected()
			for _, name := range w.Names() {
				if got := res.stored[name]; !slices.Equal(got, exp[name]) && (len(got) > 0 || len(exp[name]) > 0) {
					t.Errorf("host %s: BFS stored %d URLs, Expected has %d\nBFS: %v\nExpected: %v",
						name, len(got), len(exp[name]), got, exp[name])
				}
			}
			stats := w.Stats()
			for i, spec := range tc.specs {
				st := stats[spec.Name]
				if st.Duplicates != 0 || st.RobotsViolations != 0 || st.BeforeRobots != 0 ||
					st.OverLimit != 0 || st.InRetryAfter != 0 {
					t.Errorf("host %s: a clean crawl should score zero: %+v", spec.Name, st)
				}
				if len(st.Fetched) != len(exp[spec.Name]) {
					t.Errorf("host %s: Fetched has %d URLs, want %d", spec.Name, len(st.Fetched), len(exp[spec.Name]))
				}
				for _, u := range exp[spec.Name] {
					if st.Fetched[u] != 1 {
						t.Errorf("host %s: Fetched[%s] = %d, want 1", spec.Name, u, st.Fetched[u])
					}
				}
				if !strings.HasPrefix(w.Seeds()[i], "http://127.0.0.1:") {
					t.Errorf("seed %s: want 127.0.0.1", w.Seeds()[i])
				}
				if len(spec.Disallow) > 0 && res.disallowed[spec.Name] == 0 {
					t.Errorf("host %s: no link to a disallowed path, violations undetectable", spec.Name)
				}
				if spec.robotsStatus() < 500 && len(exp[spec.Name]) == 0 {
					t.Errorf("host %s: nothing expected", spec.Name)
				}
			}
			if res.titles != len(res.sizes) {
				t.Errorf("%d of %d pages have a title", res.titles, len(res.sizes))
			}
			for _, n := range res.sizes {
				if n < 1000 || n > 8000 {
					t.Errorf("page size %d, want about 1-4 KB of text", n)
					break
				}
			}
			forms := map[string]func(string) bool{
				"absolute":      func(h string) bool { return strings.HasPrefix(h, "http://") },
				"root-relative": func(h string) bool { return strings.HasPrefix(h, "/") },
				"dot-relative":  func(h string) bool { return strings.HasPrefix(h, "./") },
				"bare-relative": func(h string) bool { return strings.HasPrefix(h, "p") },
				"fragment":      func(h string) bool { return strings.Contains(h, "#") },
			}
			for form, is := range forms {
				if !slices.ContainsFunc(res.hrefs, is) {
					t.Errorf("no %s link in %d hrefs", form, len(res.hrefs))
				}
			}
		})
	}
}

// TestDisallowedLinksAreCounted fetches what the BFS refused and checks each is a violation.
func TestDisallowedLinksAreCounted(t *testing.T) {
	w, c := startWeb(t, []HostSpec{{Name: "a", Pages: 12, Disallow: []string{"/private/", "/p1"}}}, nil)
	base := w.URL("a")
	for _, p := range []string{"private/x1", "private/x3", "p1", "p10", "private/nope", "robots.txt", "p2"} {
		get(t, c, base+p)
	}
	st := w.Stats()["a"]
	// private/x1, private/x3, p1, p10 and private/nope (a 404) are disallowed; p2 is not.
	if st.RobotsViolations != 5 || st.NotFound != 1 || st.OK != 6 || st.BeforeRobots != 5 {
		t.Errorf("stats = %+v, want 5 violations, 1 not found, 6 OK, 5 before robots", st)
	}
	if st.PageRequests != 6 || st.RobotsRequests != 1 || st.Requests != 7 {
		t.Errorf("request counts = %d/%d/%d, want 6/1/7", st.PageRequests, st.RobotsRequests, st.Requests)
	}
}
