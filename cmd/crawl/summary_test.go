package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestSummariesSayWhatTheRunDid: a resumed run says it resumes and from what, then its own
// figures apart from all runs'; a recrawl says how many pages were unchanged, changed, gone
// and new.
func TestSummariesSayWhatTheRunDid(t *testing.T) {
	t.Parallel()
	var second atomic.Bool // the site as a recrawl finds it: /b changed, /c gone
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch {
		case r.URL.Path == "/":
			w.Write([]byte(`<a href="/b">b</a> <a href="/c">c</a>`))
		case r.URL.Path == "/b" && second.Load():
			w.Write([]byte(`<p>b, changed</p>`))
		case r.URL.Path == "/b":
			w.Write([]byte(`<p>b</p>`))
		case r.URL.Path == "/c" && !second.Load():
			w.Write([]byte(`<p>c</p>`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	if code, out, errOut := crawlCmd(t, "", "run", "--data", dir, "--quiet", "--max-pages", "1", srv.URL+"/"); code != exitOK || !strings.Contains(out, ": 1 fetched, 0 failed, 0 excluded, 2 queued") {
		t.Fatalf("first run: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := crawlCmd(t, "", "run", "--data", dir, "--quiet", "--max-pages", "0")
	if code != exitOK || !strings.Contains(errOut, "resuming: 1 fetched, 2 queued") ||
		!strings.Contains(out, "this run 2 fetched, 0 failed, 0 excluded; all runs 3 fetched, 0 failed, 0 excluded, 0 queued") {
		t.Errorf("resumed run: exit %d; want it to say it resumes, and its 2 pages apart from all runs' 3:\n%s%s", code, out, errOut)
	}
	second.Store(true)
	code, out, errOut = crawlCmd(t, "", "run", "--data", dir, "--quiet", "--recrawl")
	if code != exitOK || !strings.Contains(out, "revisited 3: 1 unchanged, 1 changed, 1 gone; 0 new pages") {
		t.Errorf("recrawl: exit %d; want 1 unchanged, 1 changed, 1 gone:\n%s%s", code, out, errOut)
	}
}
