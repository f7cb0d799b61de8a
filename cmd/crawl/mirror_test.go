package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
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
