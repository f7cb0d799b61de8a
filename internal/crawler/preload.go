package crawler

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync"

	"github.com/crawl-project/crawl/fetch"
	"github.com/crawl-project/crawl/storage"
)

// preload asks, on a's behalf, for the stylesheets and scripts the raw HTML body of the page
// at base names (fetch.ExtractBlocking), as a browser's preload scanner would, all at once,
// before the page has a tab, through subresourceReq like any ask of the page. The robots.txt
// of a new host and the gate's interval after it then pass while the browser starts and opens
// the tab, and the files the page's scripts wait for are in their gates' queues before its
// images; the browser's own asks share these fetches or find them stored. A store failure is
// a's, as for the browser's asks. The returned stop cancels what is still under way and waits
// for it; later calls do nothing.
func (c *Crawler) preload(ctx context.Context, a *answerer, base *url.URL, body []byte) (stop func()) {
	refs := fetch.ExtractBlocking(base, body)
	if len(refs) == 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, r := range refs {
		wg.Go(func() {
			a.ask(ctx, subRequest{method: http.MethodGet, url: r.URL.String(), header: preloadHeader(base, r)})
		})
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			wg.Wait()
		})
	}
}

// ask answers r through the crawl (subresourceReq), keeping the first store failure.
func (a *answerer) ask(ctx context.Context, r subRequest) (*storage.Page, error) {
	p, err := a.c.subresourceReq(ctx, a.from, r)
	var sf *storeFault
	if errors.As(err, &sf) {
		a.mu.Lock()
		if a.fault == nil {
			a.fault = sf
		}
		a.mu.Unlock()
	}
	return p, err
}

// preloadHeader is what a browser sends with its request for r, a reference of the page at
// page, beyond what the fetch client sets: Chromium's Accept for the kind, and the Referer
// of the default referrer policy (strict-origin-when-cross-origin: the page's URL to its own
// origin, its origin to another, nothing from https to http).
func preloadHeader(page *url.URL, r fetch.Blocking) http.Header {
	h := http.Header{}
	switch r.Kind {
	case fetch.BlockingStylesheet:
		h.Set("Accept", "text/css,*/*;q=0.1")
	default:
		h.Set("Accept", "*/*")
	}
	ref := *page
	ref.Fragment, ref.RawFragment, ref.User = "", "", nil
	switch {
	case ref.Scheme == r.URL.Scheme && ref.Host == r.URL.Host:
		h.Set("Referer", ref.String())
	case ref.Scheme == "https" && r.URL.Scheme == "http":
	default:
		h.Set("Referer", ref.Scheme+"://"+ref.Host+"/")
	}
	return h
}
