package crawler

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/crawl-project/crawl/fetch"
	"github.com/crawl-project/crawl/internal/render"
	"go.uber.org/goleak"
)

// TestPreloadWhileBrowserStarts: the stylesheet and script a page's raw HTML names are asked
// through the crawl while the browser is still starting (the stand-in's
// start returns only once both were served, and fails after 3 s); the browser's own asks then
// find them stored, and each file is fetched once. The image is left to the browser.
func TestPreloadWhileBrowserStarts(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	var mu sync.Mutex
	var order []string
	both := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		order = append(order, r.URL.Path)
		if slices.Contains(order, "/s.css") && slices.Contains(order, "/a.js") && !slices.Contains(order, "both") {
			order = append(order, "both")
			close(both)
		}
		mu.Unlock()
		switch r.URL.Path {
		case "/robots.txt":
			http.NotFound(w, r)
		case "/":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<title>App</title><link rel=stylesheet href=/s.css><script src=/a.js defer></script><div id="app">Loading…</div><img src=/i.png>`)
		default:
			fmt.Fprint(w, "x")
		}
	}))
	defer srv.Close()
	c := openRenderingSeed(t, srv.URL+"/")
	fb := &fetchingBrowser{subs: func(string) []string { return []string{srv.URL + "/s.css", srv.URL + "/a.js", srv.URL + "/i.png"} }}
	c.renders.start = func(render.Options) (pageRenderer, error) {
		select {
		case <-both:
			return fb, nil
		case <-time.After(3 * time.Second):
			return nil, fmt.Errorf("the page's stylesheet and script were not asked while the browser started")
		}
	}
	if _, err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Close()
	mu.Lock()
	got := slices.Clone(order)
	mu.Unlock()
	if len(got) == 6 && got[2] == "/a.js" {
		got[2], got[3] = got[3], got[2] // asked at once: either first
	}
	if want := []string{"/robots.txt", "/", "/s.css", "/a.js", "both", "/i.png"}; !slices.Equal(got, want) {
		t.Errorf("requests %q, want %q (the stylesheet and script in either order)", got, want)
	}
	srv.Close()
	goleak.VerifyNone(t, ignore)
}

func TestPreloadHeader(t *testing.T) {
	for _, tc := range []struct {
		page, ref       string
		kind            fetch.BlockingKind
		accept, referer string
	}{
		{"http://a.test/p?q=1#f", "http://a.test/s.css", fetch.BlockingStylesheet, "text/css,*/*;q=0.1", "http://a.test/p?q=1"},
		{"http://u:pw@a.test/p", "http://cdn.test/a.js", fetch.BlockingScript, "*/*", "http://a.test/"},
		{"https://a.test/p", "https://cdn.test/a.js", fetch.BlockingScript, "*/*", "https://a.test/"},
		{"https://a.test/p", "http://cdn.test/a.js", fetch.BlockingScript, "*/*", ""},
		{"http://a.test/p", "https://a.test/a.js", fetch.BlockingScript, "*/*", "http://a.test/"},
	} {
		page, _ := url.Parse(tc.page)
		ref, _ := url.Parse(tc.ref)
		h := preloadHeader(page, fetch.Blocking{URL: ref, Kind: tc.kind})
		if h.Get("Accept") != tc.accept || h.Get("Referer") != tc.referer || len(h.Values("Referer")) > 1 {
			t.Errorf("%s from %s: Accept %q Referer %q, want %q %q", tc.ref, tc.page, h.Get("Accept"), h.Values("Referer"), tc.accept, tc.referer)
		}
	}
}
