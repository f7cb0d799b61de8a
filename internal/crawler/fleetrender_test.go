package crawler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/fleet"
	"github.com/crawl-project/crawl/internal/redistest"
	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/storage"
	"github.com/redis/go-redis/v9"
)

// Three workers of one shared crawl, each on its own connection to a real redis-server and
// with its own Chromium, render the pages of an App web spread over six site hosts, so that
// each renders the pages of the sites it owns; every page calls one API host limited to 2
// req/s (burst 1, 429 + Retry-After, the limit stated in its headers). Each worker's gate
// learns that limit; without the fleet's pace each would send at it, together three times
// over. With it, at most 1% of the API's requests are refused (one at least: the share 100
// pages allowed), and every page is rendered once (docs/fleet.md "Rendered pages'
// sub-requests"). 30 pages keep the API busy for 15 s at its limit: enough, as the three
// workers' own gates unpaced draw several refusals (8 of 40 requests, one run).
func TestFleetRenderOneAPIHost(t *testing.T) {
	t.Parallel()
	browser := needBrowser(t)
	const (
		pages   = 30
		sites   = 6
		workers = 3
	)
	a := startAppWeb(t, simweb.AppOptions{Pages: pages, Sites: sites, APILimit: 2, APIHeaders: simweb.HeadersIETF})
	srv := redistest.Start(t)
	// a safety net against a hung crawl, not a bound
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	dirs := make([]string, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range workers {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
		t.Cleanup(func() { rdb.Close() })
		w, err := fleet.Join(ctx, rdb, "render", fmt.Sprintf("w%d-%s", i, fleet.NewWorkerID()),
			&fleet.Options{Partitions: 64, LeaseTTL: 5 * time.Second}, fleet.FrontierOptions{Crawl: "render"})
		if err != nil {
			t.Fatal(err)
		}
		cfg := a.config(t)
		cfg.Seeds = nil // a page of each site, so that all are in scope
		for s := range sites {
			cfg.Seeds = append(cfg.Seeds, a.url(simweb.AppSiteOf(s, sites), simweb.AppPagePath(s)))
		}
		cfg.Render = Render{Mode: RenderAlways, Browser: browser, Tabs: 2, Timeout: 30 * time.Second}
		dirs[i] = cfg.Dir
		c, err := OpenWith(cfg, w.Frontier)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = c.Run(ctx)
			errs[i] = errors.Join(errs[i], c.Close(), w.Leave(context.Background()))
		}()
	}
	wg.Wait()
	took := time.Since(start)
	for i, err := range errs {
		if err != nil {
			t.Errorf("worker %d: %v", i, err)
		}
	}

	rendered := map[string][]*storage.Page{}
	for _, dir := range dirs {
		got, _ := renderedPages(t, dir)
		for u, p := range got {
			if p.Render != nil {
				rendered[u] = append(rendered[u], p)
			}
		}
	}
	for i := range pages {
		u := a.url(simweb.AppSiteOf(i%sites, sites), simweb.AppPagePath(i))
		switch got := rendered[u]; {
		case len(got) != 1:
			t.Errorf("%s rendered %d times, want once", u, len(got))
		case !strings.Contains(string(got[0].Rendered), simweb.AppText(i)):
			t.Errorf("%s: rendered DOM lacks its content: %.300s", u, got[0].Rendered)
		}
	}
	api := a.web.Stats()[simweb.AppAPI]
	t.Logf("%d workers rendered %d pages in %v; API: %d requests, %d refused, at %v", workers, pages,
		took.Round(time.Millisecond), api.Requests, api.OverLimit, api.OverLimitAt)
	if api.OverLimit > max(1, api.Requests/100) {
		t.Errorf("API: %d of %d requests refused, want at most 1%% (or one)", api.OverLimit, api.Requests)
	}
	if api.RobotsViolations != 0 {
		t.Errorf("API: %d requests to paths robots.txt disallows, want 0", api.RobotsViolations)
	}
}
