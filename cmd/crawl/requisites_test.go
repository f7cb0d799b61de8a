package main

import (
	"bytes"
	"fmt"
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
	t.Parallel()
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

// TestRequisitesMaxPages: with --requisites, --max-pages counts pages only: a budget of 5
// gives 5 pages and every requisite they need, so the mirror browses offline; the pages left
// are set aside as excluded "limit", and a larger budget on a resume queues them again.
func TestRequisitesMaxPages(t *testing.T) {
	t.Parallel()
	web, err := simweb.Start([]simweb.HostSpec{{Name: "a", Pages: 20, Assets: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	const requisites = 6 // two stylesheets, the icon, three images
	dir := crawlSite(t, web, "--requisites", "--max-pages", "5")
	st := statusJSON(t, dir)
	if st.Fetched != 5+requisites || st.Queued != 0 || st.ExcludedBy["limit"] == 0 {
		var urls, errb bytes.Buffer
		urlsCmd([]string{"--data", dir}, &urls, &errb)
		t.Fatalf("--requisites --max-pages 5: %d fetched, %d queued, excluded %v; want 5 pages and %d requisites; the URLs:\n%s%s",
			st.Fetched, st.Queued, st.ExcludedBy, requisites, urls.String(), errb.String())
	}
	_, rep, _ := exportMirror(t, dir)
	for _, a := range rep.Absolute {
		for _, p := range []string{"/static/", "/img/", simweb.AssetIcon} {
			if strings.Contains(a, p) {
				t.Errorf("a requisite left absolute: %s", a)
			}
		}
	}
	setAside := st.ExcludedBy["limit"]

	out := runOK(t, "--data", dir, "--max-pages", "10")
	want := fmt.Sprintf("re-queued %d excluded URLs (limit %d)", setAside, setAside)
	if !strings.Contains(out, "--max-pages 10 instead of --max-pages 5") || !strings.Contains(out, want) {
		t.Errorf("raising the budget: output lacks the change or %q:\n%s", want, out)
	}
	if st := statusJSON(t, dir); st.Fetched != 10+requisites || st.Queued != 0 {
		t.Errorf("--max-pages 10: %d fetched, %d queued; want 10 pages and %d requisites", st.Fetched, st.Queued, requisites)
	}
	runOK(t, "--data", dir)
	if st := statusJSON(t, dir); st.Fetched != 10+requisites {
		t.Errorf("a resume with the budget spent fetched more: %d", st.Fetched)
	}
}
