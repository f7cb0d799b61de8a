package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/crawl-project/crawl/internal/mirrorcheck"
	"github.com/crawl-project/crawl/internal/simweb"
)

// crawlSite crawls a simulated web with args added to `crawl run` and returns the data dir.
func crawlSite(t *testing.T, web *simweb.Web, args ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	var out, errb bytes.Buffer
	args = append([]string{"--seeds", writeSeeds(t, web.Seeds()), "--data", dir, "--quiet", "--initial-rate", "1000"}, args...)
	if code := runCmd(args, &out, &errb); code != exitOK {
		t.Fatalf("crawl run: exit %d\n%s", code, errb.String())
	}
	return dir
}

// TestMirrorBrowsesOffline crawls a site with a stylesheet, images, a redirect and a 404,
// exports a mirror and checks it as a browser reading it from disk would.
func TestMirrorBrowsesOffline(t *testing.T) {
	web, err := simweb.Start([]simweb.HostSpec{{Name: "a", Pages: 30, Assets: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	dir := crawlSite(t, web)
	out, rep, stderr := exportMirror(t, dir)
	if !strings.Contains(stderr, "without a file") {
		t.Errorf("the 404 is not reported as left out: %s", stderr)
	}
	// Every page link is a relative path; only what was not fetched stays absolute.
	for _, a := range rep.Absolute {
		if !strings.Contains(a, simweb.AssetMissing) && !strings.Contains(a, "/static/") &&
			!strings.Contains(a, "/img/") && !strings.Contains(a, simweb.AssetIcon) {
			t.Errorf("a link to a mirrored page left absolute: %s", a)
		}
	}
	if rep.Files != 31 || rep.Links < 30*3 {
		t.Errorf("%d files (want 30 pages + 1 redirect), %d relative links", rep.Files, rep.Links)
	}
	host := strings.ReplaceAll(strings.TrimPrefix(web.URL("a"), "http://"), ":", "+")
	moved, err := os.ReadFile(filepath.Join(out, host, "moved.html"))
	if err != nil || !bytes.Contains(moved, []byte(`url=index.html"`)) {
		t.Errorf("moved.html = %q, %v; want a refresh page to index.html", moved, err)
	}
	if _, err := os.Stat(filepath.Join(out, host, "missing.html")); err == nil {
		t.Error("the 404 body was written as a page")
	}
}

// exportMirror exports the store in dir as a mirror and checks it offline: it fails the test
// on broken links, and returns the mirror's path, the check's report and export's stderr.
func exportMirror(t *testing.T, dir string) (string, mirrorcheck.Report, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "mirror")
	code, _, stderr := runExport(t, "--data", dir, "--format", "mirror", "--out", out)
	if code != exitOK {
		t.Fatalf("export: exit %d: %s", code, stderr)
	}
	rep, err := mirrorcheck.Check(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Broken) > 0 {
		t.Errorf("broken links offline: %q", rep.Broken)
	}
	return out, rep, stderr
}

// TestMirrorRequisiteDocumentsOffline crawls a page laid out as Sphinx lays one out: a
// <link rel=search> to search.html, whose scripts are its own, and an HTML document embedded as
// an <object> (a requisite) with its own stylesheet and image. In the mirror, under the
// directory 127.0.0.1+PORT, every script, stylesheet and image of both is a relative path to
// a mirrored file: search.html is a page (a hyperlink rel), the embedded document's
// requisites are requisites too; the embedded document's links are not followed.
func TestMirrorRequisiteDocumentsOffline(t *testing.T) {
	var mu sync.Mutex
	asked := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked[r.URL.Path]++
		mu.Unlock()
		switch p := r.URL.Path; {
		case p == "/":
			fmt.Fprint(w, `<html><head><link rel="stylesheet" href="_static/basic.css"><link rel="search" title="Search" href="search.html">
<script src="_static/doctools.js"></script></head><body><object data="figure.html" type="text/html"></object></body></html>`)
		case p == "/search.html":
			fmt.Fprint(w, `<html><head><link rel="stylesheet" href="_static/basic.css"><script src="_static/searchtools.js"></script>
<script src="searchindex.js" defer></script></head><body><form action="search.html"><input name="q"></form></body></html>`)
		case p == "/figure.html":
			fmt.Fprint(w, `<html><head><link rel=stylesheet href="_static/figure.css"></head><body><img src="_static/figure.png">
<a href="elsewhere.html">not followed</a></body></html>`)
		case strings.HasSuffix(p, ".js"):
			w.Header().Set("Content-Type", "text/javascript")
			fmt.Fprint(w, "var x;")
		case strings.HasSuffix(p, ".css"):
			w.Header().Set("Content-Type", "text/css")
			fmt.Fprint(w, "body { color: black }")
		case strings.HasSuffix(p, ".png"):
			w.Header().Set("Content-Type", "image/png")
			fmt.Fprint(w, "PNG")
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	runOK(t, srv.URL+"/", "--data", dir, "--requisites")
	out, rep, _ := exportMirror(t, dir)

	host := strings.ReplaceAll(strings.TrimPrefix(srv.URL, "http://"), ":", "+")
	if !strings.HasPrefix(host, "127.0.0.1+") {
		t.Fatalf("host directory %q, want 127.0.0.1+PORT", host)
	}
	for _, f := range []string{"index.html", "search.html", "figure.html", "_static/basic.css", "_static/doctools.js",
		"_static/searchtools.js", "searchindex.js", "_static/figure.css", "_static/figure.png"} {
		if _, err := os.Stat(filepath.Join(out, host, filepath.FromSlash(f))); err != nil {
			t.Errorf("not in the mirror: %v", err)
		}
	}
	for _, a := range rep.Absolute {
		if !strings.HasSuffix(a, "/elsewhere.html") {
			t.Errorf("left pointing at the live site: %s", a)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if asked["/elsewhere.html"] != 0 {
		t.Errorf("a link of a document fetched as a requisite was followed: requests %v", asked)
	}
}
