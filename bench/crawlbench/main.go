// Command crawlbench crawls the simulated web with the real crawler and prints what the simulated
// servers measured: politeness (over-limit replies, requests inside Retry-After windows, bans),
// completeness, makespan against the ideal at each host's hidden limit, and throughput on
// unlimited hosts. Figures are ratios measured within one run, so a noisy machine moves them
// less than absolute times.
//
//	go run -C bench ./crawlbench -scenario politeness
//	go run -C bench ./crawlbench -scenario politeness -scale 4   # 4× the pages per host
//	go run -C bench ./crawlbench -scenario politeness -learned   # then again from a new directory, --learned-from the first
//	go run -C bench ./crawlbench -scenario stated      # hosts that state their limits in rate-limit headers
//	go run -C bench ./crawlbench -scenario stated-nowindow   # hosts that state a limit but no window, beside the same stating nothing
//	go run -C bench ./crawlbench -scenario stated-nowindow -only bucket10-delta,bucket10-none
//	go run -C bench ./crawlbench -scenario learned     # a second crawl with --learned-from the first's data directory
//	go run -C bench ./crawlbench -scenario throughput
//	go run -C bench ./crawlbench -scenario flaky      # hosts failing a share of requests at random
//	go run -C bench ./crawlbench -scenario broad -hosts 1000 -host-pages 30 -host-limit 5
//	go run -C bench ./crawlbench -scenario broad -hosts 100000 -host-pages 1 -hub 2   # one page linking 100,000 new hosts: the stall the other hosts feel
//	go run -C bench ./crawlbench -scenario broad -hosts 10 -host-pages 1   # mostly the two-host crawl: CPU per 12 KB page
//	go run -C bench ./crawlbench -scenario links -links 6,40,150 -max-pages 30000   # CPU per discovered link
//	go run -C bench ./crawlbench -scenario recrawl -pages 10000   # a recrawl of an unchanged site against the first crawl
//	go run -C bench ./crawlbench -scenario fleet -workers 1,2,3   # shared crawls through redis-server against bbolt, and handover times
//	go run -C bench ./crawlbench -scenario fleet -workers 2 -fleet-hosts 2 -fleet-pages 10000 -fleet-links 40 -handover=false   # Redis CPU and commands per page
//	go run -C bench ./crawlbench -scenario fleet -workers 2 -fleet-hosts 2 -fleet-pages 1000000 -fleet-links 40 -fleet-max-pages 5000 -handover=false -commandstats   # Redis CPU per new URL
//	go run -C bench ./crawlbench -scenario render -render-pages 60   # --render always on shells fed by a limited API, beside the same site rendered on the server
//
// The broad, links and fleet scenarios run the crawl binary (built from the checkout's ./cmd/crawl,
// the one bench/go.mod's replace names) as a separate process, so that its peak RSS and CPU time
// are its own.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/simweb"
)

// tune adjusts the crawler's defaults for every scenario (set from flags).
var tune func(*crawler.Config)

func main() {
	scenario := flag.String("scenario", "politeness", "politeness, stated, stated-nowindow, learned, throughput, flaky, broad, links, recrawl, fleet, render or all (all but broad, links, recrawl and fleet)")
	seed := flag.Int64("seed", 1, "seed of the simulated web")
	initial := flag.Float64("initial-rate", 0, "per-host starting rate, req/s (0: the crawler's default)")
	pages := flag.Int("pages", 1500, "throughput: pages per host (4 unlimited hosts); recrawl: pages of its one host")
	data := flag.String("data", "", "throughput: keep the crawl store in this directory (default: a temporary one, removed)")
	scale := flag.Int("scale", 1, "politeness: multiply every host's page count by this (longer crawls: start-up costs weigh less, steady-state riding more)")
	learnedPass := flag.Bool("learned", false, "politeness: crawl the web a second time from a new data directory with --learned-from the first's")
	only := flag.String("only", "", "stated, stated-nowindow: comma-separated host names to crawl (default: all)")
	grace := flag.Duration("grace", 50*time.Millisecond, "simweb grace: requests arriving this soon after the refusal that opened a Retry-After window are not counted as inside it (they were sent before the reply could be read)")
	var bc broadConfig
	flag.IntVar(&bc.hosts, "hosts", 1000, "broad: hosts in the web")
	flag.IntVar(&bc.pages, "host-pages", 30, "broad: pages per host")
	flag.Float64Var(&bc.limit, "host-limit", 5, "broad: each host's hidden limit, req/s (token bucket, burst 1, 429 + Retry-After; 0: unlimited)")
	flag.IntVar(&bc.seedHosts, "seed-hosts", 0, "broad: hosts in the seed file, spread evenly over the web (0: all); the others are found by links")
	flag.DurationVar(&bc.dnsDelay, "dns-delay", 0, "broad: the loopback DNS server holds each answer this long")
	flag.IntVar(&bc.thrPages, "throughput-pages", 4000, "broad: pages per host of the two-host unlimited crawl that measures the crawler's pages/s")
	flag.IntVar(&bc.pageKB, "page-kb", 12, "broad: about how big the two-host crawl's pages are, in KB (0: simweb's own, 1–4 KB of text, ~3 KB)")
	flag.StringVar(&bc.crawlBin, "crawl", "", "broad, links, fleet, render: the crawl binary to run (default: go build ./cmd/crawl)")
	crawlFlags := flag.String("crawl-flags", "", "broad, fleet: more flags for every `crawl run`, space-separated (e.g. \"--workers 64\")")
	thrFlags := flag.String("throughput-flags", "", "broad: more flags for the two-host `crawl run` only (e.g. \"--cpuprofile /tmp/cpu.prof\")")
	flag.IntVar(&bc.hub, "hub", 0, "broad: seed one page linking every host of the broad web beside this many unlimited hosts of -other-pages pages, and print the longest gap between those hosts' requests once the page is fetched (0: the seeds are the broad web's hosts)")
	flag.IntVar(&bc.otherPages, "other-pages", 20000, "broad: pages of each unlimited host beside the hub page (-hub)")
	flag.BoolVar(&bc.keep, "keep", false, "broad: keep the crawls' directories, stores included, and print where")
	flag.DurationVar(&bc.timeout, "timeout", 30*time.Minute, "broad, links: each crawl is killed after this")
	var lc linksConfig
	linksList := flag.String("links", "6,40,150", "links: links per page, one crawl each")
	flag.IntVar(&lc.pages, "link-host-pages", 200_000, "links: pages per host of the two hosts")
	flag.IntVar(&lc.maxPages, "max-pages", 30_000, "links: --max-pages of each crawl")
	flag.IntVar(&lc.rounds, "rounds", 1, "links: crawls of each figure, interleaved")
	var rc renderConfig
	flag.IntVar(&rc.pages, "render-pages", 60, "render: pages of the App web")
	flag.Float64Var(&rc.apiLimit, "render-api-limit", 8, "render: the API host's limit, req/s")
	flag.Float64Var(&rc.cdnLimit, "render-cdn-limit", 15, "render: the CDN host's limit, req/s")
	flag.BoolVar(&rc.stated, "render-stated", false, "render: the API states its limit in rate-limit headers (IETF draft)")
	flag.IntVar(&rc.tabs, "render-tabs", 0, "render: --render-tabs (0: the crawl's default)")
	flag.IntVar(&rc.rounds, "render-rounds", 1, "render: crawls of each kind, alternated")
	var fc fleetConfig
	workersList := flag.String("workers", "1,2,3", "fleet: worker processes of each shared crawl")
	flag.IntVar(&fc.hosts, "fleet-hosts", 8, "fleet: unlimited hosts in the web")
	flag.IntVar(&fc.pages, "fleet-pages", 1500, "fleet: pages per host")
	flag.IntVar(&fc.links, "fleet-links", 0, "fleet: links per page (0: the web's own few), on pages of -page-kb")
	flag.IntVar(&fc.maxPages, "fleet-max-pages", 0, "fleet: --max-pages of each worker (0: none); with many -fleet-pages, most links of each page are new")
	flag.BoolVar(&fc.handover, "handover", true, "fleet: also measure handovers")
	flag.BoolVar(&fc.cmdStats, "commandstats", false, "fleet: print Redis' commands per page by name (INFO commandstats) after each shared crawl")
	flag.DurationVar(&fc.leaseTTL, "lease-ttl", 2*time.Second, "fleet: the workers' --lease-ttl (a killed worker's hosts move after it)")
	flag.Parse()
	for _, f := range strings.Split(*workersList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bench: -workers: %q is not a number of workers\n", f)
			os.Exit(2)
		}
		fc.workers = append(fc.workers, n)
	}
	bc.crawlFlags = strings.Fields(*crawlFlags)
	lc.pageKB = max(bc.pageKB, 1)
	for _, f := range strings.Split(*linksList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			fmt.Fprintf(os.Stderr, "bench: -links: %q is not a number of links\n", f)
			os.Exit(2)
		}
		lc.links = append(lc.links, n)
	}
	bc.thrFlags = strings.Fields(*thrFlags)
	bc.grace, bc.seed = *grace, *seed
	if *initial > 0 {
		tune = func(c *crawler.Config) { c.InitialRate = *initial }
	}
	var err error
	switch *scenario {
	case "politeness":
		err = politeness(os.Stdout, *seed, *grace, *scale, *learnedPass)
	case "stated":
		err = stated(os.Stdout, *seed, *grace, *scale, *only)
	case "stated-nowindow":
		err = statedNoWindow(os.Stdout, *seed, *grace, *scale, *only)
	case "learned":
		err = learned(os.Stdout, *seed, *grace)
	case "throughput":
		err = throughput(os.Stdout, *seed, *pages, *data)
	case "flaky":
		err = flaky(os.Stdout, *seed)
	case "broad":
		err = broad(os.Stdout, bc)
	case "recrawl":
		err = recrawl(os.Stdout, *seed, *pages)
	case "links":
		err = linkCosts(os.Stdout, bc.crawlBin, lc, bc.crawlFlags, bc.timeout, *seed)
	case "render":
		err = renderCosts(os.Stdout, bc.crawlBin, rc, bc.crawlFlags, bc.timeout)
	case "fleet":
		fc.crawlBin, fc.flags, fc.timeout, fc.seed, fc.pageKB = bc.crawlBin, bc.crawlFlags, bc.timeout, *seed, max(bc.pageKB, 1)
		err = fleetBench(os.Stdout, fc)
	case "all":
		if err = politeness(os.Stdout, *seed, *grace, *scale, false); err == nil {
			err = throughput(os.Stdout, *seed, *pages, *data)
		}
	default:
		err = fmt.Errorf("unknown scenario %q", *scenario)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// crawlWeb runs one crawl of web to the end in dir, or in a fresh temporary directory removed
// afterwards when dir is "".
func crawlWeb(web *simweb.Web, dir string, adjust func(*crawler.Config)) (*crawler.Summary, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "crawl-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	cfg := crawler.Defaults()
	cfg.Dir = dir
	cfg.Seeds = web.Seeds()
	if adjust != nil {
		adjust(&cfg)
	}
	c, err := crawler.Open(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sum, err := c.Run(ctx)
	if cerr := c.Close(); err == nil {
		err = cerr
	}
	return sum, err
}

// politeness crawls the politeness web and prints what its servers counted. With learned, it
// then crawls the web again from a new data directory with --learned-from the first's, and
// prints the same for that crawl.
func politeness(w io.Writer, seed int64, grace time.Duration, scale int, learned bool) error {
	specs := simweb.PolitenessBench()
	for i := range specs {
		specs[i].Pages *= max(scale, 1)
	}
	web, err := simweb.Start(specs, &simweb.Options{Seed: seed, Grace: grace})
	if err != nil {
		return err
	}
	defer web.Close()
	first, err := os.MkdirTemp("", "crawl-bench-politeness-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(first)
	sum, err := crawlWeb(web, first, tune)
	if err != nil {
		return err
	}
	printPoliteness(w, web, specs, sum, grace, "")
	if !learned {
		return nil
	}
	web.Reset()
	sum, err = crawlWeb(web, "", tunedLearnedFrom(first))
	if err != nil {
		return err
	}
	fmt.Fprintln(w)
	printPoliteness(w, web, specs, sum, grace, ", again from a new directory with --learned-from the first's")
	return nil
}

// printPoliteness prints the politeness table of the crawl that just ended on web.
func printPoliteness(w io.Writer, web *simweb.Web, specs []simweb.HostSpec, sum *crawler.Summary, grace time.Duration, which string) {
	stats, expected := web.Stats(), web.Expected()
	fmt.Fprintf(w, "politeness%s: %d hosts, crawl took %s (simweb grace %s)\n\n", which, len(specs), sum.Elapsed.Round(time.Millisecond), grace)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "host\tstyle\tlimit\tpages\tcomplete\tover-limit\tper page\tin Retry-After\tmakespan\tideal\tratio\tof ideal\tpeak in-flight\tp95\tbanned\t")
	var tot struct {
		pages, got, over, inRA, bans int
		ideal, makespan              time.Duration // over the hosts with an ideal: the web's share of it
	}
	worst := 0.0
	for _, sp := range specs {
		st := stats[sp.Name]
		want := expected[sp.Name]
		got := 0
		for _, u := range want {
			if st.Fetched[u] > 0 {
				got++
			}
		}
		makespan := st.LastRequest.Sub(st.FirstRequest)
		ideal := simweb.IdealMakespan(sp)
		ratio, of := "-", "-"
		if ideal > 0 {
			r := makespan.Seconds() / ideal.Seconds()
			ratio, of = fmt.Sprintf("%.2fx", r), fmt.Sprintf("%.2f", 1/r)
			worst = max(worst, r)
			tot.ideal += ideal
			tot.makespan += makespan
		}
		limit := "none"
		switch {
		case sp.Limit > 0 && sp.LimitDrop != nil:
			limit = fmt.Sprintf("%g→%g/s", sp.Limit, sp.Limit*sp.LimitDrop.Factor)
		case sp.Limit > 0:
			limit = fmt.Sprintf("%g/s", sp.Limit)
		case sp.Workers > 0:
			limit = fmt.Sprintf("%dw×%s", sp.Workers, sp.Service)
		}
		style := sp.Reply.String()
		if sp.Limit == 0 {
			style = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.3f\t%d\t%.4f\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%v\t\n",
			sp.Name, style, limit, len(want), frac(got, len(want)), st.OverLimit, frac(st.OverLimit, max(got, 1)),
			st.InRetryAfter, makespan.Round(10*time.Millisecond), ideal.Round(10*time.Millisecond), ratio, of,
			st.PeakInFlight, st.LatencyP95.Round(100*time.Microsecond), st.Banned)
		tot.pages += len(want)
		tot.got += got
		tot.over += st.OverLimit
		tot.inRA += st.InRetryAfter
		if st.Banned {
			tot.bans++
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "\noverall: completeness %.3f (%d/%d), over-limit replies %d = %.2f%% of pages, requests inside Retry-After %d, bans %d, worst makespan ratio %.2fx\n",
		frac(tot.got, tot.pages), tot.got, tot.pages, tot.over, 100*frac(tot.over, tot.pages), tot.inRA, tot.bans, worst)
	if tot.makespan > 0 {
		// A host's share of its ideal is ideal ÷ makespan; the web's is the sum of the ideals over
		// the sum of the makespans of the hosts that have one (the limited hosts and the worker
		// host), each host weighing by its ideal.
		fmt.Fprintf(w, "of the ideal: the web %.3f (Σ ideal %s ÷ Σ makespan %s over the hosts with an ideal)\n",
			tot.ideal.Seconds()/tot.makespan.Seconds(), tot.ideal.Round(10*time.Millisecond), tot.makespan.Round(10*time.Millisecond))
	}

	for _, sp := range specs {
		st := stats[sp.Name]
		if sp.LimitDrop != nil && !st.DroppedAt.IsZero() {
			// Recovery ends with the last refusal of the run of refusals the drop set off (each
			// within 3 s of the one before); later refusals are the controller probing upward.
			var offsets []string
			var recovered time.Duration
			prev := st.DroppedAt
			inRun := true
			for _, t := range st.OverLimitAt {
				if !t.After(st.DroppedAt) {
					continue
				}
				offsets = append(offsets, "+"+t.Sub(st.DroppedAt).Round(10*time.Millisecond).String())
				if inRun && t.Sub(prev) <= 3*time.Second {
					recovered, prev = t.Sub(st.DroppedAt), t
				} else {
					inRun = false
				}
			}
			fmt.Fprintf(w, "%s: limit dropped %gx at +%s; back under the new limit %s after it (last refusal of the run the drop set off; target ≤ 5s); all refusals after the drop: %v (later ones are probes for a higher limit)\n",
				sp.Name, 1/sp.LimitDrop.Factor, st.DroppedAt.Sub(st.FirstRequest).Round(time.Millisecond), recovered.Round(10*time.Millisecond), offsets)
		}
		if sp.Workers > 0 && sp.Limit == 0 {
			makespan := st.LastRequest.Sub(st.FirstRequest).Seconds()
			capacity := float64(sp.Workers) / sp.Service.Seconds()
			thr := float64(len(expected[sp.Name])) / makespan
			fmt.Fprintf(w, "%s: throughput %.1f/s = %.0f%% of capacity %.0f/s; p95 %s = %.2fx service time %s (targets: ≥80%%, ≤1.5x)\n",
				sp.Name, thr, 100*thr/capacity, capacity, st.LatencyP95.Round(100*time.Microsecond),
				st.LatencyP95.Seconds()/sp.Service.Seconds(), sp.Service)
		}
	}
}

func throughput(w io.Writer, seed int64, pages int, dir string) error {
	var specs []simweb.HostSpec
	for i := 0; i < 4; i++ {
		specs = append(specs, simweb.HostSpec{Name: fmt.Sprintf("free%d", i), Pages: pages})
	}
	web, err := simweb.Start(specs, &simweb.Options{Seed: seed})
	if err != nil {
		return err
	}
	defer web.Close()
	sum, err := crawlWeb(web, dir, tune)
	if err != nil {
		return err
	}
	stats := web.Stats()
	names := slices.Sorted(maps.Keys(stats))
	fmt.Fprintf(w, "\nthroughput: %d unlimited hosts, %d pages fetched in %s = %.0f pages/s overall (defaults: --workers 32, --host-concurrency 8)\n",
		len(specs), sum.Fetched, sum.Elapsed.Round(time.Millisecond), float64(sum.Fetched)/sum.Elapsed.Seconds())
	for _, n := range names {
		st := stats[n]
		fmt.Fprintf(w, "  %s: %d pages in %s, peak in-flight %d\n", n, st.OK, st.LastRequest.Sub(st.FirstRequest).Round(time.Millisecond), st.PeakInFlight)
	}
	return nil
}

// flaky crawls hosts that answer a share of page requests 502 (or 503) at random, whatever the
// load (a flaky backend, one bad node behind a balancer): slowing down cannot cure those failures, and
// retries (which mostly work) should neither throttle the host nor run out of budget.
// crawlTimed crawls web with the bench's tuning and returns how long the crawl took, and a
// note when crawlWeb's limit interrupted it (the tables then show how far it got).
func crawlTimed(web *simweb.Web) (time.Duration, string, error) {
	start := time.Now()
	sum, err := crawlWeb(web, "", tune)
	stopped := ""
	switch {
	case errors.Is(err, crawler.ErrInterrupted):
		stopped = " (interrupted at crawlWeb's limit: the table shows how far it got)"
	case err != nil:
		return 0, "", err
	}
	elapsed := time.Since(start)
	if sum != nil {
		elapsed = sum.Elapsed
	}
	return elapsed, stopped, nil
}

func flaky(w io.Writer, seed int64) error {
	specs := []simweb.HostSpec{
		{Name: "flaky5", Pages: 600, Flaky: 0.05},
		{Name: "flaky10", Pages: 600, Flaky: 0.10},
		{Name: "flaky20", Pages: 600, Flaky: 0.20},
		{Name: "flaky10-20/s", Pages: 600, Flaky: 0.10, Limit: 20, Burst: 2, Reply: simweb.Reply429Seconds},
		{Name: "flaky503-5", Pages: 600, Flaky: 0.05, FlakyStatus: http.StatusServiceUnavailable},
		{Name: "flaky503-10", Pages: 600, Flaky: 0.10, FlakyStatus: http.StatusServiceUnavailable},
		{Name: "steady", Pages: 600},
	}
	web, err := simweb.Start(specs, &simweb.Options{Seed: seed})
	if err != nil {
		return err
	}
	defer web.Close()
	elapsed, stopped, err := crawlTimed(web)
	if err != nil {
		return err
	}
	stats, expected := web.Stats(), web.Expected()
	fmt.Fprintf(w, "flaky: %d hosts, crawl took %s%s\n\n", len(specs), elapsed.Round(time.Millisecond), stopped)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "host\tfails\tstatus\tlimit\tpages\tcomplete\trequests\tfailed\tover-limit\tmakespan\tideal\t")
	for _, sp := range specs {
		st := stats[sp.Name]
		got := 0
		for _, u := range expected[sp.Name] {
			if st.Fetched[u] > 0 {
				got++
			}
		}
		limit, ideal := "none", "-"
		if sp.Limit > 0 {
			limit = fmt.Sprintf("%g/s", sp.Limit)
			ideal = simweb.IdealMakespan(sp).Round(10 * time.Millisecond).String()
		}
		status := "-"
		if sp.Flaky > 0 {
			status = strconv.Itoa(cmp.Or(sp.FlakyStatus, http.StatusBadGateway))
		}
		fmt.Fprintf(tw, "%s\t%.0f%%\t%s\t%s\t%d\t%.3f\t%d\t%d\t%d\t%s\t%s\t\n", sp.Name, 100*sp.Flaky, status, limit, len(expected[sp.Name]),
			frac(got, len(expected[sp.Name])), st.Requests, st.Flaky, st.OverLimit,
			st.LastRequest.Sub(st.FirstRequest).Round(10*time.Millisecond), ideal)
	}
	return tw.Flush()
}

func frac(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
