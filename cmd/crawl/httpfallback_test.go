package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSeedWithoutSchemeFallsBackToHTTP: a seed written without a scheme is tried over https
// first; a host that answers only over http is crawled over http, said once, and never called
// failed.
func TestSeedWithoutSchemeFallsBackToHTTP(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/faq/index.html":
			w.Write([]byte(`<a href="/faq/b.html">b</a>`))
		case "/faq/b.html":
			w.Write([]byte(`<p>b</p>`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	code, out, errOut := crawlCmd(t, "", "run", "--data", dir, addr+"/faq/index.html")
	if code != exitOK || !strings.Contains(out, "2 fetched") {
		t.Fatalf("exit %d, want 0 and both pages fetched over http:\n%s%s", code, out, errOut)
	}
	if n := strings.Count(errOut, "trying http"); n != 1 {
		t.Errorf("stderr says %d times that http is tried, want once:\n%s", n, errOut)
	}
	if strings.Contains(errOut, "host failed") || strings.Contains(errOut, "unreachable") {
		t.Errorf("a host that serves over http is called failed:\n%s", errOut)
	}
	_, urls, _ := crawlCmd(t, "", "urls", "--data", dir, "--state", "fetched")
	for _, u := range []string{srv.URL + "/faq/index.html", srv.URL + "/faq/b.html"} {
		if !strings.Contains(urls, u) {
			t.Errorf("%s not fetched:\n%s", u, urls)
		}
	}
	if code, st, _ := crawlCmd(t, "", "status", "--data", dir); code != exitOK || strings.Contains(st, "tls") {
		t.Errorf("crawl status keeps the https error of a host that served over http:\n%s", st)
	}
	// An https:// seed given as such is not tried over http.
	dir2 := t.TempDir()
	code, out, errOut = crawlCmd(t, "", "run", "--data", dir2, "https://"+addr+"/faq/index.html")
	if code != exitRuntime || strings.Contains(errOut, "trying http") {
		t.Errorf("an explicit https seed: exit %d, want %d and no http:\n%s%s", code, exitRuntime, out, errOut)
	}
}

// TestSeedWithoutSchemeBesideHTTPSeed: a seed without a scheme whose host:port another seed
// gives with http:// is crawled over http, the scheme already known for it; nothing fails and
// no host is called failed. The https error of a lone scheme-less seed is named once, without
// its kind twice ("tls: tls: …").
func TestSeedWithoutSchemeBesideHTTPSeed(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/a.html", "/b.html":
			w.Write([]byte(`<p>page</p>`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	code, out, errOut := crawlCmd(t, "", "run", "--data", dir, srv.URL+"/a.html", addr+"/b.html")
	if code != exitOK || !strings.Contains(out, "2 fetched, 0 failed") {
		t.Fatalf("exit %d, want 0 and both pages fetched over http, none failed:\n%s%s", code, out, errOut)
	}
	if strings.Contains(errOut, "host failed") || strings.Contains(errOut, "tls") {
		t.Errorf("a host that serves over http is called failed, or tried over https:\n%s", errOut)
	}
	if !strings.Contains(errOut, "crawling "+srv.URL+"/b.html") {
		t.Errorf("stderr does not say the scheme-less seed is crawled as %s/b.html:\n%s", srv.URL, errOut)
	}
	code, _, errOut = crawlCmd(t, "", "run", "--data", t.TempDir(), addr+"/a.html")
	if code != exitOK || strings.Contains(errOut, "tls: tls:") {
		t.Errorf("a lone scheme-less seed: exit %d, want 0 and the https cause named once:\n%s", code, errOut)
	}
}
