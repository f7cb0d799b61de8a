package crawler

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawl-project/crawl/storage"
)

// TestRenderEarlyLinks renders a page A whose script puts a link to B in its DOM from an API's
// answer while A's image, on another host, is held by its server until B is requested (or
// for imageHold): B is fetched while A still loads, so the image is answered because B was
// asked for, not because the hold ran out. A's DOM is still stored whole, its image answered.
func TestRenderEarlyLinks(t *testing.T) {
	browser := needBrowser(t)
	const imageHold = 10 * time.Second
	var (
		mu        sync.Mutex
		asked     = map[string]int{}
		bAsked    = make(chan struct{})
		bOnce     sync.Once
		released  bool // the image was answered because B was asked for
		imageSent bool
	)
	note := func(p string) {
		mu.Lock()
		asked[p]++
		mu.Unlock()
	}
	cdn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		note("cdn" + r.URL.Path)
		if r.URL.Path != "/held.png" {
			http.NotFound(w, r)
			return
		}
		byB := false
		select {
		case <-bAsked:
			byB = true
		case <-time.After(imageHold):
		case <-r.Context().Done():
			return
		}
		mu.Lock()
		released, imageSent = byB, true
		mu.Unlock()
		w.Header().Set("Content-Type", "image/png")
		fmt.Fprint(w, "PNG")
	}))
	defer cdn.Close()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		note(r.URL.Path)
		switch r.URL.Path {
		case "/":
			fmt.Fprintf(w, `<html><body><p>A</p><img src="%s/held.png"><script>
fetch('/links.json').then((r) => r.json()).then((ls) => {
  for (const h of ls) { const a = document.createElement('a'); a.href = h; a.textContent = h; document.body.appendChild(a); }
});
</script></body></html>`, cdn.URL)
		case "/links.json":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `["/b"]`)
		case "/b":
			bOnce.Do(func() { close(bAsked) })
			fmt.Fprint(w, `<html><body><p>B</p></body></html>`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer site.Close()

	cfg := Defaults()
	cfg.Dir, cfg.Seeds, cfg.InitialRate = t.TempDir(), []string{site.URL + "/"}, 50
	cfg.Render = Render{Mode: RenderAlways, Browser: browser, Tabs: 2, Timeout: 30 * time.Second}
	start := time.Now()
	runCrawl(t, cfg)
	took := time.Since(start)

	mu.Lock()
	defer mu.Unlock()
	if asked["/b"] != 1 || asked["cdn/held.png"] != 1 {
		t.Fatalf("requests %v: want /b and the CDN's /held.png once each", asked)
	}
	if !imageSent || !released {
		t.Errorf("A's image was answered after its %v hold ran out, not because B was asked for: "+
			"B was fetched only once A's render ended (took %v)", imageHold, took)
	}
	got, _ := renderedPages(t, cfg.Dir)
	a, b := got[site.URL+"/"], got[site.URL+"/b"]
	switch {
	case a == nil || a.Render == nil:
		t.Errorf("A not stored rendered")
	case !strings.Contains(string(a.Rendered), `href="/b"`):
		t.Errorf("A's rendered DOM lacks its link to B: %.300s", a.Rendered)
	case a.Render.Cut != storage.RenderComplete:
		t.Errorf("A's render cut (%v), want it complete", a.Render.Cut)
	}
	if b == nil {
		t.Errorf("B not stored")
	}
	t.Logf("crawl took %v; requests %v", took, asked)
}
