package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// refreshedStore crawls a site of two HTML pages and a text file without validators, changes
// /a, recrawls (/ answers 304, /a a new 200, /t.txt the same 200) and recrawls again (the pages
// answer 304): nine visits of three URLs, each page's newest a 304. Each of
// others, if any, gets a crawl of the site right after the first one.
func refreshedStore(t *testing.T, others ...string) (dir, root string) {
	t.Helper()
	var version atomic.Int32
	version.Store(1)
	serve := func(w http.ResponseWriter, r *http.Request, etag, body string) {
		w.Header().Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(body))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		serve(w, r, `"home"`, `<title>Home</title><a href=/a>a</a> <a href=/t.txt>t</a>`)
	})
	mux.HandleFunc("/a", func(w http.ResponseWriter, r *http.Request) {
		v := version.Load()
		serve(w, r, fmt.Sprintf(`"a%d"`, v), fmt.Sprintf(`<title>A v%d</title><p>version %d`, v, v))
	})
	mux.HandleFunc("/t.txt", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("plain text"))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	root = srv.URL + "/"
	dir = t.TempDir() + "/data"
	crawl := func(args ...string) {
		t.Helper()
		var errb strings.Builder
		args = append([]string{"--data", dir, "--quiet", "--initial-rate", "1000"}, args...)
		if code := runCmd(args, &errb, &errb); code != exitOK {
			t.Fatalf("crawl run %q: exit %d\n%s", args, code, errb.String())
		}
	}
	crawl("--seeds", writeSeeds(t, []string{root}))
	for _, o := range others {
		crawlInto(t, o, []string{root})
	}
	version.Store(2)
	crawl("--recrawl")
	crawl("--recrawl")
	return dir, root
}

// TestExportLatest: after a page is fetched, then revisited with a changed 200 and an
// unchanged 304, JSON Lines --latest has one line per URL with its newest content (the 304
// standing for the version it confirms, dated by the 304), the CSV one row per URL, and the
// summaries say what was left out and why, never "not HTML" for a revisit.
func TestExportLatest(t *testing.T) {
	dir, root := refreshedStore(t)
	a := root + "a"

	code, all, stderr := runExport(t, "--data", dir, "--format", "jsonl", "--out", "-")
	if code != exitOK {
		t.Fatalf("export jsonl: exit %d: %s", code, stderr)
	}
	type line struct {
		URL         string
		Status      int
		FetchedAt   string `json:"fetched_at"`
		Body        *string
		Title       *string
		NotModified bool `json:"not_modified"`
	}
	parse := func(out string) []line {
		var ls []line
		for s := range strings.Lines(out) {
			var l line
			if err := json.Unmarshal([]byte(s), &l); err != nil {
				t.Fatalf("%v: %s", err, s)
			}
			ls = append(ls, l)
		}
		return ls
	}
	visits := parse(all)
	lastVisit := map[string]string{}
	var statuses []int
	for _, l := range visits {
		lastVisit[l.URL] = l.FetchedAt
		if l.URL == a {
			statuses = append(statuses, l.Status)
		}
	}
	if len(visits) != 9 || !slices.Equal(statuses, []int{200, 200, 304}) {
		t.Fatalf("the store holds %d visits, /a answered %v; want 9 and [200 200 304]", len(visits), statuses)
	}

	code, out, stderr := runExport(t, "--data", dir, "--format", "csv", "--out", "-", "--field", "title=title")
	if code != exitOK {
		t.Fatalf("export csv: exit %d: %s", code, stderr)
	}
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) > 1 { // in fetch order of the newest visits, which the recrawl's order sets
		slices.SortFunc(rows[1:], func(x, y []string) int { return strings.Compare(x[0], y[0]) })
	}
	if wantRows := [][]string{{"url", "title"}, {root, "Home"}, {a, "A v2"}}; !slices.EqualFunc(rows, wantRows, slices.Equal) {
		t.Errorf("csv rows %q, want %q", rows, wantRows)
	}
	if w := "2 pages written (0 filtered out, 6 earlier visits of the same URLs, 2 304 Not Modified written as the versions they confirm, 1 without a row (not HTML))"; !strings.Contains(stderr, w) {
		t.Errorf("csv summary %q, want %q", stderr, w)
	}

	code, out, stderr = runExport(t, "--data", dir, "--format", "jsonl", "--out", "-", "--latest")
	if code != exitOK {
		t.Fatalf("export jsonl --latest: exit %d: %s", code, stderr)
	}
	latest := parse(out)
	want := map[string]string{root: "Home", a: "A v2", root + "t.txt": "plain text"}
	if len(latest) != len(want) {
		t.Fatalf("--latest: %d lines, want %d:\n%s", len(latest), len(want), out)
	}
	for _, l := range latest {
		page := !strings.HasSuffix(l.URL, ".txt") // a 304 stands for the page; the text file's newest is its own 200
		if l.Status != 200 || l.Body == nil || !strings.Contains(*l.Body, want[l.URL]) || page && (l.Title == nil || *l.Title != want[l.URL]) ||
			l.NotModified != page || l.FetchedAt != lastVisit[l.URL] {
			t.Errorf("--latest: %s: status %d, title %v, body %v, not_modified %v, fetched_at %s; want 200, %q, not_modified %v, %s (its last visit)",
				l.URL, l.Status, l.Title, l.Body, l.NotModified, l.FetchedAt, want[l.URL], page, lastVisit[l.URL])
		}
	}
	if w := "3 pages written (0 filtered out, 6 earlier visits of the same URLs, 2 304 Not Modified written as the versions they confirm)"; !strings.Contains(stderr, w) {
		t.Errorf("--latest summary %q, want %q", stderr, w)
	}

	// --latest with filters: they apply to each URL's newest version as written.
	code, out, stderr = runExport(t, "--data", dir, "--format", "jsonl", "--out", "-", "--latest", "--no-body", "--status", "304")
	if code != exitOK || out != "" || !strings.Contains(stderr, "0 pages written (3 filtered out, 6 earlier visits") {
		t.Errorf("--latest --status 304: exit %d, %q\n%s", code, out, stderr)
	}
}

// TestExportLatestRefused: --latest is a usage error where it has no meaning, saying why.
func TestExportLatestRefused(t *testing.T) {
	dir := newExportStore(t)
	for format, why := range map[string]string{
		"warc":    "a WARC keeps every visit",
		"mirror":  "the mirror holds each URL's newest version already",
		"learned": "--latest applies to pages",
	} {
		code, _, stderr := runExport(t, "--data", dir, "--format", format, "--out", t.TempDir()+"/x", "--latest")
		if code != exitUsage || !strings.Contains(stderr, why) {
			t.Errorf("--format %s --latest: exit %d, %q; want %d and %q", format, code, stderr, exitUsage, why)
		}
	}
}

// TestExportLatestSeveralStores: with the stores of several workers, --latest takes each URL
// from the store that fetched it last and folds its 304s into the versions they confirm,
// found under the merged numbering.
func TestExportLatestSeveralStores(t *testing.T) {
	other := t.TempDir() + "/other"
	dir, root := refreshedStore(t, other)
	code, out, stderr := runExport(t, "--data", other, "--data", dir, "--format", "csv", "--out", "-", "--field", "title=title")
	if code != exitOK {
		t.Fatalf("export csv: exit %d: %s", code, stderr)
	}
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) > 1 {
		slices.SortFunc(rows[1:], func(x, y []string) int { return strings.Compare(x[0], y[0]) })
	}
	if want := [][]string{{"url", "title"}, {root, "Home"}, {root + "a", "A v2"}}; !slices.EqualFunc(rows, want, slices.Equal) {
		t.Errorf("csv rows %q, want %q", rows, want)
	}
	if w := "(0 filtered out, 6 earlier visits of the same URLs, 2 304 Not Modified written as the versions they confirm, 1 without a row (not HTML), 3 fetches of URLs another store fetched later)"; !strings.Contains(stderr, w) {
		t.Errorf("summary %q, want %q", stderr, w)
	}
}
