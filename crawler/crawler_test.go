package crawler_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawl-project/crawl/crawler"
	"github.com/crawl-project/crawl/internal/redistest"
	"github.com/crawl-project/crawl/internal/simweb"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCrawlPoliteAndResumed crawls a web of three hosts (one rate-limited) through the public
// API, stopping it by its context after a few pages and running it again on the same DataDir:
// every page is handed to OnPage exactly once over both runs, the crawl is complete, and the
// limited host refused no more than learning its limit costs. (Over-limit as a share of a
// bigger web is TestProgramKilledResumes'.)
func TestCrawlPoliteAndResumed(t *testing.T) {
	t.Parallel()
	web, err := simweb.Start(simweb.Small(), &simweb.Options{Seed: 7, Grace: 50 * time.Millisecond, KernelArrival: true})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	dir := t.TempDir()
	opts := crawler.Options{Seeds: web.Seeds(), DataDir: dir, InitialRate: 20}

	var mu sync.Mutex
	seen := map[string]int{}
	run := func(stopAfter int) error {
		c, err := crawler.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c.OnPage(func(p *crawler.Page) {
			if p.Status != 200 {
				return
			}
			doc, err := p.Doc()
			if err != nil {
				t.Errorf("%s: Doc: %v", p.URL, err)
				return
			}
			if again, _ := p.Doc(); again != doc {
				t.Errorf("%s: Doc parsed twice", p.URL)
			}
			mu.Lock()
			seen[p.URL]++
			if stopAfter > 0 && len(seen) >= stopAfter {
				cancel()
			}
			mu.Unlock()
		})
		return c.Run(ctx)
	}
	if err := run(15); !errors.Is(err, crawler.ErrInterrupted) {
		t.Fatalf("first run: %v, want ErrInterrupted", err)
	}
	first := len(seen)
	opts.Seeds = nil // resumed from DataDir alone
	if err := run(0); err != nil {
		t.Fatalf("second run: %v", err)
	}
	t.Logf("pages: %d in the first run, %d in all", first, len(seen))
	checkEachOnce(t, web, seen)
	for name, s := range web.Stats() {
		if s.Banned || s.RobotsViolations > 0 || s.InRetryAfter > 0 {
			t.Errorf("host %s: banned %v, %d robots violations, %d requests inside Retry-After", name, s.Banned, s.RobotsViolations, s.InRetryAfter)
		}
		if s.OverLimit > 4 { // two runs, each learning the limit afresh at worst
			t.Errorf("host %s: %d of %d requests refused", name, s.OverLimit, s.Requests)
		}
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, tt := range []struct {
		name string
		o    crawler.Options
		want string
	}{
		{"no data dir", crawler.Options{Seeds: []string{"http://example.com/"}}, "DataDir"},
		{"bad seed", crawler.Options{DataDir: "d", Seeds: []string{"ftp://example.com/"}}, "Seeds"},
		{"bad scope", crawler.Options{DataDir: "d", Scope: 9}, "Scope"},
		{"negative", crawler.Options{DataDir: "d", MaxPages: -1}, "MaxPages"},
		{"bad host", crawler.Options{DataDir: "d", Hosts: map[string]crawler.HostOptions{"a/b": {}}}, "a/b"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := crawler.New(tt.o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, want an error naming %s", err, tt.want)
			}
		})
	}
}

// TestSharedThroughRedis runs two Crawlers as workers of one crawl shared through a real
// redis-server, each with its own DataDir: together they fetch every page once, and each page
// reaches the OnPage of the worker that fetched it.
func TestSharedThroughRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	web, err := simweb.Start(simweb.Small(), &simweb.Options{Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	var mu sync.Mutex
	seen := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs := make(chan error, 2)
	started := make(chan struct{}) // the first worker fetched a page: its seeds are in Redis
	var once sync.Once
	for i := range 2 {
		o := crawler.Options{DataDir: t.TempDir(), InitialRate: 20, Redis: srv.URL(), Crawl: "lib"}
		if i == 0 {
			o.Seeds = web.Seeds()
		}
		c, err := crawler.New(o)
		if err != nil {
			t.Fatal(err)
		}
		c.OnPage(func(p *crawler.Page) {
			once.Do(func() { close(started) })
			if p.Status == 200 {
				mu.Lock()
				seen[p.URL]++
				mu.Unlock()
			}
		})
		go func() { errs <- c.Run(ctx) }()
		if i == 0 {
			select {
			case <-started:
			case err := <-errs:
				t.Fatalf("the first worker ended before fetching a page: %v", err)
			}
		}
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	checkEachOnce(t, web, seen)
}

// checkEachOnce fails t unless seen (OnPage's count per URL) holds every page of web once and
// nothing else.
func checkEachOnce(t *testing.T, web *simweb.Web, seen map[string]int) {
	t.Helper()
	want := 0
	for host, urls := range web.Expected() {
		want += len(urls)
		for _, u := range urls {
			if seen[u] != 1 {
				t.Errorf("host %s: %s handed to OnPage %d times, want 1", host, u, seen[u])
			}
		}
	}
	if len(seen) != want {
		t.Errorf("OnPage saw %d pages, want %d", len(seen), want)
	}
}
