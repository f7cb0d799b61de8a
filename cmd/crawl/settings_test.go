package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/simweb"
)

// treeSite serves a binary tree of pages: "/" links to /d1/0 and /d1/1, and /dN/i links to
// /dN+1/2i and /dN+1/2i+1, down to depth 4, so a page's depth is in its path.
func treeSite(t *testing.T) string {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		depth, i := 0, 0
		if r.URL.Path != "/" {
			if _, err := fmt.Sscanf(r.URL.Path, "/d%d/%d", &depth, &i); err != nil {
				http.NotFound(w, r)
				return
			}
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<title>%s</title>", r.URL.Path)
		if depth < 4 {
			fmt.Fprintf(w, `<a href="/d%d/%d">l</a> <a href="/d%d/%d">r</a>`, depth+1, 2*i, depth+1, 2*i+1)
		}
	}))
	t.Cleanup(s.Close)
	return s.URL
}

// depthOf is the depth of a treeSite page from its URL.
func depthOf(u string) int {
	i := strings.Index(u, "/d")
	if i < 0 {
		return 0
	}
	d, _ := strconv.Atoi(strings.SplitN(u[i+2:], "/", 2)[0])
	return d
}

// pagesByDepth counts the 2xx pages stored in dir by their treeSite depth.
func pagesByDepth(t *testing.T, dir string) map[int]int {
	t.Helper()
	pages, _ := inspectStore(t, dir, "after the run")
	out := map[int]int{}
	for u := range pages {
		out[depthOf(u)]++
	}
	return out
}

func runOK(t *testing.T, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := runCmd(append([]string{"--quiet", "--initial-rate", "500", "--max-rate", "1000"}, args...), &out, &errb); code != exitOK {
		t.Fatalf("crawl run %q: exit %d\n%s%s", args, code, out.String(), errb.String())
	}
	return out.String() + errb.String()
}

func statusJSON(t *testing.T, dir string) crawler.Status {
	t.Helper()
	var out, errb bytes.Buffer
	if code := statusCmd([]string{"--data", dir, "--json"}, &out, &errb); code != exitOK {
		t.Fatalf("crawl status: exit %d\n%s", code, errb.String())
	}
	var st crawler.Status
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestResumeKeepsSettings: a resume without flags keeps the first run's depth; one that widens
// the depth says so and fetches the URLs excluded only by the old depth; one that adds an
// --exclude excludes the queued URLs it matches; crawl status shows the settings in force.
func TestResumeKeepsSettings(t *testing.T) {
	site := treeSite(t)
	seeds := writeFile(t, "seeds.txt", []byte(site+"/\n"))
	dir := t.TempDir()

	runOK(t, "--seeds", seeds, "--data", dir, "--max-depth", "1")
	if got := pagesByDepth(t, dir); got[0] != 1 || got[1] != 2 || got[2] != 0 {
		t.Fatalf("first run (--max-depth 1) fetched %v by depth", got)
	}
	if st := statusJSON(t, dir); st.ExcludedBy["depth"] != 4 {
		t.Fatalf("excluded by depth after the first run: %v, want 4", st.ExcludedBy)
	}

	out := runOK(t, "--data", dir)
	if strings.Contains(out, "instead of") {
		t.Errorf("a resume without flags reported a change:\n%s", out)
	}
	if got := pagesByDepth(t, dir); got[2] != 0 {
		t.Fatalf("a resume without flags fetched depth 2 (%v): it forgot --max-depth 1", got)
	}

	out = runOK(t, "--data", dir, "--max-depth", "2")
	for _, want := range []string{"--max-depth 2 instead of --max-depth 1 as stored", "re-queued 4 excluded URLs (depth 4)"} {
		if !strings.Contains(out, want) {
			t.Errorf("widening run's output lacks %q:\n%s", want, out)
		}
	}
	if got := pagesByDepth(t, dir); got[2] != 4 || got[3] != 0 {
		t.Fatalf("after --max-depth 2: %v by depth, want 4 at depth 2 and none deeper", got)
	}
	st := statusJSON(t, dir)
	if st.ExcludedBy["depth"] != 8 || st.Settings == nil || st.Settings.MaxDepth != 2 {
		t.Fatalf("after --max-depth 2: excluded %v, settings %+v", st.ExcludedBy, st.Settings)
	}

	// Widen the depth but stop after 3 more pages, so URLs stay queued; then exclude them with
	// a filter: they leave the queue as excluded "filter" and nothing more is fetched.
	out = runOK(t, "--data", dir, "--max-depth", "3", "--max-pages", "10")
	queued := statusJSON(t, dir).Queued
	if queued != 5 {
		t.Fatalf("--max-depth 3 --max-pages 10 left %d URLs queued, want 5:\n%s", queued, out)
	}
	out = runOK(t, "--data", dir, "--exclude", "/d3/", "--max-pages", "0")
	for _, want := range []string{"--exclude /d3/ instead of no --exclude as stored", "--max-pages 0 instead of --max-pages 10", "excluded 5 queued URLs (filter 5)"} {
		if !strings.Contains(out, want) {
			t.Errorf("narrowing run's output lacks %q:\n%s", want, out)
		}
	}
	if got := pagesByDepth(t, dir); got[3] != 3 {
		t.Errorf("after --exclude: %v by depth, want the 3 depth-3 pages fetched before", got)
	}
	st = statusJSON(t, dir)
	if st.ExcludedBy["filter"] != 5 || st.Queued != 0 {
		t.Errorf("after --exclude: excluded %v, queued %d", st.ExcludedBy, st.Queued)
	}
	var text, errb bytes.Buffer
	statusCmd([]string{"--data", dir}, &text, &errb)
	if !strings.Contains(text.String(), "settings: --scope host --max-depth 3 --exclude /d3/ --max-pages 0") {
		t.Errorf("crawl status does not show the settings in force:\n%s", text.String())
	}
}

// TestResumeWidensHostBudgetAndScope: a raised --max-host-pages re-queues the URLs excluded
// "limit" as far as the new budget goes; a changed --scope is taken (from the seeds' hosts) and
// reported, not refused.
func TestResumeWidensHostBudgetAndScope(t *testing.T) {
	site := treeSite(t)
	seeds := writeFile(t, "seeds.txt", []byte(site+"/\n"))
	dir := t.TempDir()
	runOK(t, "--seeds", seeds, "--data", dir, "--max-host-pages", "3")
	if st := statusJSON(t, dir); st.Fetched != 3 || st.ExcludedBy["limit"] != 4 {
		t.Fatalf("--max-host-pages 3: fetched %d, excluded %v", st.Fetched, st.ExcludedBy)
	}
	out := runOK(t, "--data", dir, "--max-host-pages", "7", "--scope", "domain")
	for _, want := range []string{"--max-host-pages 7 instead of --max-host-pages 3", "--scope domain instead of --scope host", "re-queued 4 excluded URLs (limit 4)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if st := statusJSON(t, dir); st.Fetched != 7 || st.ExcludedBy["limit"] != 8 || st.Settings.Scope != crawler.ScopeDomain {
		t.Errorf("--max-host-pages 7: fetched %d, excluded %v, settings %+v", st.Fetched, st.ExcludedBy, st.Settings)
	}
}

// TestResumeKeepsRequisitesAndSitemaps: --requisites, --requisites-scope and --sitemaps are
// stored like the other settings: a resume without them still reads sitemaps and fetches
// requisites (the mirror browses offline), and one that names another value changes the
// setting and says so.
func TestResumeKeepsRequisitesAndSitemaps(t *testing.T) {
	web, err := simweb.Start([]simweb.HostSpec{{Name: "a", Pages: 20, Assets: true, Sitemaps: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	dir := crawlSite(t, web, "--requisites", "--requisites-scope", "host", "--sitemaps", "--max-pages", "3")
	if st := statusJSON(t, dir); st.ExcludedBy["limit"] == 0 || st.Settings == nil || !st.Settings.Requisites ||
		st.Settings.RequisitesScope != crawler.RequisitesScopeHost || !st.Settings.Sitemaps {
		t.Fatalf("after the first run: excluded %v, settings %+v", st.ExcludedBy, st.Settings)
	}
	out := runOK(t, "--data", dir, "--max-pages", "0")
	for line := range strings.SplitSeq(out, "\n") {
		if strings.Contains(line, "instead of") && (strings.Contains(line, "requisites") || strings.Contains(line, "sitemaps")) {
			t.Errorf("a resume without the flags reported a change: %s", line)
		}
	}
	_, rep, _ := exportMirror(t, dir)
	for _, a := range rep.Absolute {
		if !strings.Contains(a, simweb.AssetMissing) {
			t.Errorf("left absolute after a resume without --requisites: %s", a)
		}
	}
	code, jsonl, stderr := runExport(t, "--data", dir, "--format", "jsonl", "--out", "-", "--no-body")
	if code != exitOK {
		t.Fatalf("export: %s", stderr)
	}
	for _, p := range []string{simweb.OrphanNews, simweb.OrphanPages} {
		if !strings.Contains(jsonl, `"url":"`+web.URL("a")+strings.TrimPrefix(p, "/")+`"`) {
			t.Errorf("%s, listed only in a sitemap, was not fetched after a resume without --sitemaps", p)
		}
	}

	out = runOK(t, "--data", dir, "--requisites=false", "--requisites-scope", "any", "--sitemaps=false")
	for _, want := range []string{"--requisites=false instead of --requisites as stored",
		"--requisites-scope any instead of --requisites-scope host as stored", "--sitemaps=false instead of --sitemaps as stored"} {
		if !strings.Contains(out, want) {
			t.Errorf("changing run's output lacks %q:\n%s", want, out)
		}
	}
	if st := statusJSON(t, dir); st.Settings.Requisites || st.Settings.RequisitesScope != crawler.RequisitesScopeAny || st.Settings.Sitemaps {
		t.Errorf("after the change: settings %+v", st.Settings)
	}
}
