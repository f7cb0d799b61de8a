package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crawl-project/crawl/internal/simweb"
)

// TestRequisitesMirror crawls a site with --requisites and exports a mirror: every link and
// requisite of every mirrored HTML and CSS file resolves to a file of the mirror, only the
// 404 stays absolute, and the stylesheet's url() and @import point at the mirrored files.
func TestRequisitesMirror(t *testing.T) {
	web, err := simweb.Start([]simweb.HostSpec{{Name: "a", Pages: 20, Assets: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	dir := crawlSite(t, web, "--requisites")
	out, rep, _ := exportMirror(t, dir)
	for _, a := range rep.Absolute {
		if !strings.Contains(a, simweb.AssetMissing) {
			t.Errorf("left absolute: %s", a)
		}
	}
	// 20 pages, the redirect, and the six requisites (two stylesheets, icon, three images).
	if rep.Files != 20+1+6 {
		t.Errorf("%d files in the mirror, want 27", rep.Files)
	}
	host := strings.ReplaceAll(strings.TrimPrefix(web.URL("a"), "http://"), ":", "+")
	sheets, _ := filepath.Glob(filepath.Join(out, host, "static", "site~*.css"))
	if len(sheets) != 1 {
		t.Fatalf("stylesheet files %q", sheets)
	}
	css, err := os.ReadFile(sheets[0])
	if err != nil || !strings.Contains(string(css), `@import "print.css"`) || !strings.Contains(string(css), `url("../img/bg.png")`) {
		t.Errorf("mirrored stylesheet %q, %v", css, err)
	}
}
