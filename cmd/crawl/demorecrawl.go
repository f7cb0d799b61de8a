package main

import (
	"fmt"
	"io"
	"net/url"
	"slices"

	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/storage"
)

// demoChangeEvery is how many pages of each simulated host share one changed page when
// `crawl demo --recrawl` refreshes its crawl.
const demoChangeEvery = 10

// demoRecrawl changes one page in demoChangeEvery of every host of web, then runs cfg's crawl
// again with Recrawl, as `crawl run --recrawl` would, and shows how the servers answered.
func demoRecrawl(cfg crawler.Config, out *outputOptions, web *simweb.Web, stdout, stderr io.Writer) int {
	changed := 0
	for name, urls := range web.Expected() {
		slices.Sort(urls)
		var paths []string
		for i, raw := range urls {
			if u, err := url.Parse(raw); err == nil && i%demoChangeEvery == 0 {
				paths = append(paths, u.Path)
			}
		}
		if err := web.Change(name, paths...); err != nil {
			fmt.Fprintf(stderr, "crawl demo: %v\n", err)
			return exitRuntime
		}
		changed += len(paths)
	}
	web.Reset()
	before := storedBodies(cfg.Dir)
	fmt.Fprintf(stdout, "\nrecrawl: %d pages changed on the simulated web; revisiting every page with conditional GETs\n\n", changed)
	cfg.Seeds, cfg.Recrawl = nil, true
	code := crawl(cfg, out, stdout, stderr)
	var cond, notModified, ok int
	for _, s := range web.Stats() {
		cond, notModified, ok = cond+s.Conditional, notModified+s.NotModified, ok+s.OK
	}
	fmt.Fprintf(stdout, "\nwhat the simulated servers saw on the recrawl: %d conditional requests, %d answered 304 Not Modified, %d answered 200 (changed pages, pages without validators, robots.txt)\n",
		cond, notModified, ok)
	if before >= 0 {
		if after := storedBodies(cfg.Dir); after >= 0 {
			fmt.Fprintf(stdout, "what the store kept: %d new bodies (the changed pages'; unchanged ones are recorded as visits naming the version they repeat)\n", after-before)
		}
	}
	return code
}

// storedBodies returns how many page bodies the store in dir holds, or -1 if it cannot say.
func storedBodies(dir string) int {
	db, err := storage.Open(dir, &storage.Options{ReadOnly: true})
	if err != nil {
		return -1
	}
	defer db.Close()
	n, _, err := db.StoredBodies()
	if err != nil {
		return -1
	}
	return n
}
