package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nlnwa/gowarc"
)

// TestExportWARCRobots: the robots.txt a crawl fetched (a redirect and its target) is in the WARC
// export as request and response records after the pages, as received, without counting as a
// page; --host filters it like a page.
func TestExportWARCRobots(t *testing.T) {
	t.Parallel()
	const rules = "User-agent: *\nDisallow: /private\n"
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			http.Redirect(w, r, "/robots-real.txt", http.StatusMovedPermanently)
		case "/robots-real.txt":
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(w, rules)
		case "/":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<a href="/a">a</a> <a href="/private">p</a>`)
		default:
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(w, "page "+r.URL.Path)
		}
	}))
	defer site.Close()
	dir := t.TempDir()
	if code, _, errOut := crawlCmd(t, "", "run", site.URL+"/", "--data", dir, "--quiet"); code != exitOK {
		t.Fatalf("crawl run: exit %d\n%s", code, errOut)
	}

	out := filepath.Join(t.TempDir(), "all.warc.gz")
	code, _, errOut := crawlCmd(t, "", "export", "--data", dir, "--format", "warc", "--out", out)
	if code != exitOK || !strings.Contains(errOut, "2 pages and 2 robots.txt fetches written (0 filtered out) to "+out) {
		t.Fatalf("export: exit %d\n%s", code, errOut)
	}
	type record struct{ typ, target, id, concurrent, ip, block string }
	var recs []record
	eachWARCRecord(t, out, func(rec gowarc.WarcRecord) {
		h := rec.WarcHeader()
		x := record{typ: rec.Type().String(), target: h.Get(gowarc.WarcTargetURI), id: h.Get(gowarc.WarcRecordID),
			concurrent: h.Get(gowarc.WarcConcurrentTo), ip: h.Get(gowarc.WarcIPAddress)}
		if rc, err := rec.Block().RawBytes(); err == nil {
			b, _ := io.ReadAll(rc)
			x.block = string(b)
		}
		recs = append(recs, x)
	})
	var got []string
	for _, x := range recs[1:] { // after the warcinfo
		got = append(got, x.typ+" "+strings.TrimPrefix(x.target, site.URL))
	}
	want := []string{"request /", "response /", "request /a", "response /a",
		"request /robots.txt", "response /robots.txt", "request /robots-real.txt", "response /robots-real.txt"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i := 5; i < len(recs); i += 2 {
		req, resp := recs[i], recs[i+1]
		if req.concurrent != resp.id || resp.concurrent != req.id || resp.ip != "127.0.0.1" {
			t.Errorf("%s: request %+v and response %+v are not a pair from 127.0.0.1", resp.target, req, resp)
		}
		if !strings.HasPrefix(req.block, "GET "+strings.TrimPrefix(req.target, site.URL)+" HTTP/1.1\r\n") || !strings.Contains(req.block, "User-Agent: ") {
			t.Errorf("%s: request block %q", req.target, req.block)
		}
	}
	if b := recs[6].block; !strings.HasPrefix(b, "HTTP/1.1 301 ") || !strings.Contains(b, "Location: /robots-real.txt\r\n") {
		t.Errorf("robots.txt redirect response: %q", b)
	}
	if b := recs[8].block; !strings.HasPrefix(b, "HTTP/1.1 200 OK\r\n") || !strings.HasSuffix(b, "\r\n\r\n"+rules) {
		t.Errorf("robots.txt response: %q", b)
	}

	// Another host only: neither its pages nor its robots.txt.
	out = filepath.Join(t.TempDir(), "none.warc.gz")
	code, _, errOut = crawlCmd(t, "", "export", "--data", dir, "--format", "warc", "--out", out, "--host", "other.example")
	if code != exitOK || !strings.Contains(errOut, "0 pages written (2 filtered out)") {
		t.Errorf("export --host other.example: exit %d\n%s", code, errOut)
	}
}
