package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/crawl-project/crawl/internal/simweb"
)

// TestRecrawl: crawl run --recrawl revisits a finished crawl's pages with conditional GETs and
// fetches in full only the page that changed and those without validators; --older-than
// leaves recent pages alone and needs --recrawl.
func TestRecrawl(t *testing.T) {
	web, err := simweb.Start([]simweb.HostSpec{{Name: "a", Pages: 12, Revisions: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	dir := crawlSite(t, web)
	pages := len(web.Expected()["a"])
	if err := web.Change("a", "/p1"); err != nil {
		t.Fatal(err)
	}
	recrawl := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := runCmd(append([]string{"--data", dir, "--quiet", "--initial-rate", "1000"}, args...), &out, &errb)
		return code, errb.String()
	}

	web.Reset()
	code, stderr := recrawl("--recrawl", "--older-than", "1h")
	if st := web.Stats()["a"]; code != exitOK || st.PageRequests != 0 || strings.Contains(stderr, "revisiting") {
		t.Errorf("--older-than 1h right after the crawl: exit %d, %d page requests\n%s", code, st.PageRequests, stderr)
	}

	code, stderr = recrawl("--recrawl")
	if code != exitOK || !strings.Contains(stderr, "revisiting 12 fetched pages") {
		t.Fatalf("--recrawl: exit %d\n%s", code, stderr)
	}
	plain := pages / 4 // pages 3, 7, 11 send no validators
	st := web.Stats()["a"]
	t.Logf("recrawl of %d pages: %d requests, %d conditional, %d answered 304", pages, st.PageRequests, st.Conditional, st.NotModified)
	if st.PageRequests != pages || st.Conditional != pages-plain || st.NotModified != pages-plain-1 {
		t.Errorf("--recrawl: %d page requests, %d conditional, %d 304s; want %d, %d, %d", st.PageRequests, st.Conditional,
			st.NotModified, pages, pages-plain, pages-plain-1)
	}

	if code, stderr := recrawl("--older-than", "1h"); code != exitUsage || !strings.Contains(stderr, "--older-than needs --recrawl") {
		t.Errorf("--older-than without --recrawl: exit %d\n%s", code, stderr)
	}
}
