// Command transportbench measures hostlimit.NewTransport under a scraper that is not this
// crawler: colly v2 (github.com/gocolly/colly/v2, Go's most used scraper) fetching the burst
// case of the simulated web, one loopback host with a hidden 50 req/s limit (token bucket of 5,
// 429 with Retry-After in seconds) and its 1,000 URLs queued at once, in one run:
//
//   - colly: a LimitRule (Parallelism 4, then 1: one request at a time) and retries that
//     honour Retry-After (sleep for it, then Request.Retry, at most 3 attempts), as a careful
//     colly user writes them;
//   - colly + transport: c.WithTransport(hostlimit.NewTransport(nil, nil)), nothing else.
//
// It prints what the simulated server counted: completeness, 429s, requests inside a
// Retry-After window, and the makespan against the ideal (pages / hidden limit).
//
//	go run -C bench ./transportbench
//	go run -C bench ./transportbench -pages 4000
//
// colly is a dependency of this program only.
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/gocolly/colly/v2"

	"github.com/crawl-project/crawl/hostlimit"
	"github.com/crawl-project/crawl/internal/simweb"
)

// attempts is each request's attempts in all, for both clients (the transport's default).
const attempts = hostlimit.DefaultMaxAttempts

func main() {
	pages := flag.Int("pages", 1000, "URLs queued at once (the host's pages)")
	limit := flag.Float64("limit", 50, "the host's hidden limit, req/s")
	seed := flag.Int64("seed", 1, "seed of the simulated web")
	flag.Parse()
	spec := simweb.HostSpec{Name: "burst", Pages: *pages, Limit: *limit, Burst: 5, Reply: simweb.Reply429Seconds}
	type run struct {
		name string
		make func() *colly.Collector
	}
	var runs []run
	for _, p := range []int{4, 1} {
		runs = append(runs, run{fmt.Sprintf("colly, LimitRule Parallelism %d, Retry-After retries", p), func() *colly.Collector {
			return limitedCollector(p)
		}})
	}
	runs = append(runs,
		run{"colly + hostlimit.NewTransport", func() *colly.Collector {
			c := newCollector()
			c.WithTransport(hostlimit.NewTransport(nil, nil))
			return c
		}})
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "client\tpages\tcomplete\t429s\tin Retry-After\tmakespan\tideal\tratio\t")
	for _, r := range runs {
		st, took, err := crawl(spec, *seed, r.make())
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		ideal := simweb.IdealMakespan(spec)
		ratio := "-" // a crawl that gave up on pages has no makespan to compare
		if len(st.Fetched) == spec.Pages {
			ratio = fmt.Sprintf("%.2fx", took.Seconds()/ideal.Seconds())
		}
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%d\t%d\t%v\t%v\t%s\t\n", r.name, spec.Pages,
			float64(len(st.Fetched))/float64(spec.Pages), st.OverLimit, st.InRetryAfter,
			took.Round(10*time.Millisecond), ideal, ratio)
	}
	tw.Flush()
}

// limitedCollector returns a collector with a LimitRule of parallelism p for every host, which
// retries a 429 after its Retry-After, within the attempts.
func limitedCollector(p int) *colly.Collector {
	c := newCollector()
	if err := c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: p}); err != nil {
		panic(err)
	}
	c.OnError(func(r *colly.Response, err error) {
		n, _ := r.Request.Ctx.GetAny("attempt").(int) // retries so far
		if r.StatusCode != http.StatusTooManyRequests || n+1 >= attempts {
			return
		}
		secs, _ := strconv.Atoi(r.Headers.Get("Retry-After"))
		time.Sleep(time.Duration(secs) * time.Second)
		r.Request.Ctx.Put("attempt", n+1)
		r.Request.Retry()
	})
	return c
}

// newCollector returns an async collector whose requests may wait for their host as long as
// the whole queue takes (colly's default timeout, 10 s, counts that wait).
func newCollector() *colly.Collector {
	c := colly.NewCollector(colly.Async(true))
	c.SetRequestTimeout(10 * time.Minute)
	return c
}

// crawl serves spec, queues every page of it on c at once and waits for c; it returns what the
// server counted and the time from the first request to the last.
func crawl(spec simweb.HostSpec, seed int64, c *colly.Collector) (simweb.HostStats, time.Duration, error) {
	web, err := simweb.Start([]simweb.HostSpec{spec}, &simweb.Options{Seed: seed, Grace: 50 * time.Millisecond})
	if err != nil {
		return simweb.HostStats{}, 0, err
	}
	defer web.Close()
	root := web.URL(spec.Name)
	for i := range spec.Pages {
		u := root
		if i > 0 {
			u += "p" + strconv.Itoa(i)
		}
		if err := c.Visit(u); err != nil {
			return simweb.HostStats{}, 0, fmt.Errorf("visit %s: %w", u, err)
		}
	}
	c.Wait()
	st := web.Stats()[spec.Name]
	return st, st.LastRequest.Sub(st.FirstRequest), nil
}
