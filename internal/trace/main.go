// Command trace crawls some hosts of the politeness benchmark (internal/simweb.PolitenessBench)
// alone with the real crawler and prints, every -every, each host's pages fetched, the rate and
// window its controller allows, the accepted rate it measures, its in-flight count, its
// over-limit replies and whether it is paused; then the times (since the host's first request)
// at which the simulated server answered over limit, and a one-line summary per host. It is a
// tuning aid for aimd and hostlimit, faster than the full benchmark (bench/crawlbench).
//
//	go run ./internal/trace -hosts sec429
//	go run ./internal/trace -hosts drop,workers -every 500ms
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/simweb"
)

func main() {
	hosts := flag.String("hosts", "sec429", "comma-separated names of politeness-benchmark hosts to crawl")
	every := flag.Duration("every", 250*time.Millisecond, "time between status lines")
	flag.Parse()
	specs, err := pick(simweb.PolitenessBench(), *hosts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "trace:", err)
		os.Exit(2)
	}
	if err := run(specs, *every); err != nil {
		fmt.Fprintln(os.Stderr, "trace:", err)
		os.Exit(1)
	}
}

// pick returns the named specs, with cross-links to hosts left out removed.
func pick(all []simweb.HostSpec, names string) ([]simweb.HostSpec, error) {
	want := map[string]bool{}
	for _, n := range strings.Split(names, ",") {
		if n = strings.TrimSpace(n); n != "" {
			want[n] = true
		}
	}
	var out []simweb.HostSpec
	for _, sp := range all {
		if !want[sp.Name] {
			continue
		}
		delete(want, sp.Name)
		var links []string
		for _, l := range sp.CrossLinks {
			if strings.Contains(","+names+",", ","+l+",") {
				links = append(links, l)
			}
		}
		sp.CrossLinks = links
		out = append(out, sp)
	}
	for n := range want {
		return nil, fmt.Errorf("no host %q in the politeness benchmark", n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no hosts named")
	}
	return out, nil
}

func run(specs []simweb.HostSpec, every time.Duration) error {
	web, err := simweb.Start(specs, &simweb.Options{Seed: 1, Grace: 50 * time.Millisecond})
	if err != nil {
		return err
	}
	defer web.Close()
	dir, err := os.MkdirTemp("", "crawl-trace-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := crawler.Defaults()
	cfg.Dir, cfg.Seeds = dir, web.Seeds()
	cfg.StatusEvery = every
	start := time.Now()
	cfg.Progress = func(st crawler.Status) {
		for _, h := range st.Hosts {
			p := ""
			if h.PausedUntil != nil {
				p = "PAUSED"
			}
			fmt.Printf("%6.2fs %-22s fetched %4d rate %7.2f win %d acc %6.2f infl %d p95 %5.1fms base %5.1fms over %2d %s\n",
				time.Since(start).Seconds(), h.Host, h.Pages, h.Rate, h.Window, h.AcceptedRate, h.InFlight, h.P95Ms, h.BaselineMs, h.OverLimit, p)
		}
	}
	c, err := crawler.Open(cfg)
	if err != nil {
		return err
	}
	sum, err := c.Run(context.Background())
	if cerr := c.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	stats := web.Stats()
	for _, sp := range specs {
		s := stats[sp.Name]
		var at []string
		for _, t := range s.OverLimitAt {
			at = append(at, fmt.Sprintf("%.2f", t.Sub(s.FirstRequest).Seconds()))
		}
		makespan := s.LastRequest.Sub(s.FirstRequest)
		ratio := 0.0
		if ideal := simweb.IdealMakespan(sp); ideal > 0 {
			ratio = makespan.Seconds() / ideal.Seconds()
		}
		fmt.Printf("%s: %d ok, makespan %s (%.2fx ideal), peak in-flight %d, p95 %s, over-limit %d at [%s]s\n",
			sp.Name, s.OK, makespan.Round(10*time.Millisecond), ratio, s.PeakInFlight,
			s.LatencyP95.Round(100*time.Microsecond), s.OverLimit, strings.Join(at, " "))
	}
	fmt.Printf("crawl took %s\n", sum.Elapsed.Round(time.Millisecond))
	return nil
}
