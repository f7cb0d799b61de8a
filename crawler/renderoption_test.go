package crawler_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/crawl-project/crawl/crawler"
	"github.com/crawl-project/crawl/internal/render"
)

// TestRenderOption: with Options.Render, a page whose only link is written by its script is
// rendered and the link followed; the script came through the crawl (the server saw it asked
// for once).
func TestRenderOption(t *testing.T) {
	if render.FindBrowser() == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no Chromium or Chrome on PATH, and CI=true: install it (Debian: apt-get install chromium)")
		}
		t.Skip("no Chromium or Chrome on PATH")
	}
	var mu sync.Mutex
	asked := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked[r.URL.Path]++
		mu.Unlock()
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte(`<!doctype html><title>shell</title><div id="app">Loading…</div><script src="/app.js"></script>`))
		case "/app.js":
			w.Header().Set("Content-Type", "text/javascript")
			w.Write([]byte(`document.getElementById("app").innerHTML = '<h1>Rendered</h1><a href="/next">next</a>';`))
		case "/next":
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte(`<!doctype html><title>next</title><p>A page only the script links to.</p>`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c, err := crawler.New(crawler.Options{Seeds: []string{srv.URL + "/"}, DataDir: t.TempDir(), InitialRate: 20,
		Render: crawler.Render{Mode: crawler.RenderAlways, Tabs: 1}})
	if err != nil {
		t.Fatal(err)
	}
	var pages []string
	c.OnPage(func(p *crawler.Page) {
		mu.Lock()
		pages = append(pages, p.URL)
		mu.Unlock()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Run(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(pages) != 2 || asked["/next"] != 1 {
		t.Errorf("pages %v, /next asked %d times: want the seed and /next, the link only the script writes", pages, asked["/next"])
	}
	if asked["/app.js"] != 1 || asked["/"] != 1 {
		t.Errorf("the server was asked for / %d times and /app.js %d times, want once each", asked["/"], asked["/app.js"])
	}
}
