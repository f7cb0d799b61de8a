package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/crawl-project/crawl/internal/simweb"
)

func init() {
	commands["demo"] = command{summary: "crawl a built-in simulated web on loopback (no network needed)", run: demoCmd}
}

// demoCmd starts the simulated web, crawls it like `crawl run` would, and then shows what the
// simulated servers saw: how complete the crawl was and how polite.
func demoCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("crawl demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("data", "", "data directory for the demo crawl (default: a new temporary directory)")
	quiet := fs.Bool("quiet", false, "no progress line")
	cfg := crawlFlags(fs)
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "crawl-demo-")
		if err != nil {
			fmt.Fprintf(stderr, "crawl demo: %v\n", err)
			return exitRuntime
		}
		*dir = d
	}
	web, err := simweb.Start(simweb.DemoWeb(), nil)
	if err != nil {
		fmt.Fprintf(stderr, "crawl demo: starting the simulated web: %v\n", err)
		return exitRuntime
	}
	defer web.Close()
	cfg.Dir = *dir
	cfg.Seeds = web.Seeds()
	fmt.Fprintf(stdout, "simulated web: %d hosts on loopback, each with a rate limit the crawler is not told\n", len(cfg.Seeds))
	fmt.Fprintf(stdout, "crawling into %s\n\n", *dir)
	code := crawl(*cfg, *quiet, stdout, stderr)
	printWebStats(stdout, web)
	fmt.Fprintf(stdout, "\nnext: crawl status --data %s    crawl export --data %s --format jsonl --out pages.jsonl\n", *dir, *dir)
	return code
}

// printWebStats shows the simulated servers' own counters: the ground truth on politeness.
func printWebStats(w io.Writer, web *simweb.Web) {
	stats := web.Stats()
	expected := web.Expected()
	names := make([]string, 0, len(stats))
	for n := range stats {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "\nwhat the simulated servers saw:\n%-8s %9s %9s %10s %14s %12s %10s %9s\n",
		"host", "expected", "served", "over-limit", "in Retry-After", "robots-viol", "duplicates", "peak in-flight")
	for _, n := range names {
		s := stats[n]
		fmt.Fprintf(w, "%-8s %9d %9d %10d %14d %12d %10d %9d\n",
			n, len(expected[n]), s.OK, s.OverLimit, s.InRetryAfter, s.RobotsViolations, s.Duplicates, s.PeakInFlight)
	}
}
