package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/crawl-project/crawl/internal/report"
	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/internal/urlnorm"
	"github.com/crawl-project/crawl/storage"
)

func init() {
	commands["demo"] = command{summary: "crawl a built-in simulated web on loopback (no network needed)", run: demoCmd}
}

// demoCmd starts the simulated web, crawls it like `crawl run` would, and then shows what the
// simulated servers saw: how complete the crawl was and how polite.
func demoCmd(args []string, stdout, stderr io.Writer) int {
	flags := newFlags("demo", "usage: crawl demo [--data DIR] [run flags]\n\nCrawls a simulated web of rate-limited hosts on loopback, then prints what its servers saw\nand writes a report.")
	fs := flags.FlagSet
	dir := fs.String("data", "", "data directory for the demo crawl (default: a new temporary directory)")
	out := outputFlags(fs)
	cfg := crawlFlags(fs)
	recrawl := fs.Bool("recrawl", false, "after the crawl, change some pages of the simulated web and recrawl it with conditional GETs")
	if pos, code, ok := flags.parse(args, stdout, stderr); !ok {
		return code
	} else if len(pos) > 0 {
		fmt.Fprintf(stderr, "crawl demo: unexpected argument %q\n", pos[0])
		return exitUsage
	}
	if err := out.validate(); err != nil {
		fmt.Fprintf(stderr, "crawl demo: %v\n", err)
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
	specs := simweb.DemoWeb()
	for i := range specs {
		specs[i].Revisions = *recrawl
	}
	web, err := simweb.Start(specs, nil)
	if err != nil {
		fmt.Fprintf(stderr, "crawl demo: starting the simulated web: %v\n", err)
		return exitRuntime
	}
	defer web.Close()
	cfg.Dir = *dir
	cfg.Seeds = web.Seeds()
	fmt.Fprintf(stdout, "simulated web: %d hosts on loopback, each with a rate limit the crawler is not told\n", len(cfg.Seeds))
	fmt.Fprintf(stdout, "crawling into %s\n\n", *dir)
	// The demo is short: sample four times a second so the report's charts show the sawtooth.
	cfg.StatusEvery = 250 * time.Millisecond
	if err := labelHosts(*dir, web, specs); err != nil {
		fmt.Fprintf(stderr, "crawl demo: %v\n", err)
	}
	code := crawl(*cfg, out, stdout, stderr)
	printWebStats(stdout, web)
	if *recrawl && code == exitOK {
		code = demoRecrawl(*cfg, out, web, stdout, stderr)
	}
	if path, err := writeReport(*dir, filepath.Join(*dir, "report.html")); err != nil {
		fmt.Fprintf(stderr, "crawl demo: report: %v\n", err)
	} else {
		fmt.Fprintf(stdout, "\nreport with per-host charts (opens offline in any browser):\n  %s\n", (&url.URL{Scheme: "file", Path: filepath.ToSlash(path)}).String())
	}
	me := invokedAs(os.Args[0])
	fmt.Fprintf(stdout, "\nnext: %s status --data %s    %s report --data %s --out report.html\n      %s export --data %s --format jsonl --out pages.jsonl\n", me, *dir, me, *dir, me, *dir)
	return code
}

// invokedAs is the command that runs this binary again, from arg0 (os.Args[0]): "go run
// ./cmd/crawl" for a binary go run built in its temporary directory (there is no crawl binary
// yet), else arg0 as typed ("crawl" found on the PATH, "./crawl").
func invokedAs(arg0 string) string {
	if strings.Contains(filepath.ToSlash(arg0), "/go-build") {
		return "go run ./cmd/crawl"
	}
	if arg0 == "" {
		return "crawl"
	}
	return arg0
}

// labelHosts records the simulated hosts' names and hidden limits in the store, so the report
// shows "news (limit 20/s)" rather than 127.0.0.1:PORT.
func labelHosts(dir string, web *simweb.Web, specs []simweb.HostSpec) error {
	db, err := storage.Open(dir, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	labels := map[string]string{}
	if b, ok, err := db.Meta(report.LabelsMeta); err == nil && ok {
		_ = json.Unmarshal(b, &labels) // a bad record is replaced
	}
	for _, spec := range specs {
		u, err := url.Parse(web.URL(spec.Name))
		if err != nil {
			continue
		}
		label := spec.Name + " (no limit"
		if spec.Limit > 0 {
			label = fmt.Sprintf("%s (limit %g/s", spec.Name, spec.Limit)
		}
		if spec.Workers > 0 {
			label += fmt.Sprintf(", %d workers", spec.Workers)
		}
		labels[urlnorm.HostKey(u)] = label + ")"
	}
	b, _ := json.Marshal(labels)
	return db.PutMeta(report.LabelsMeta, b)
}

// printWebStats shows the simulated servers' own counters: the ground truth on politeness.
func printWebStats(w io.Writer, web *simweb.Web) {
	stats := web.Stats()
	expected := web.Expected()
	names := slices.Sorted(maps.Keys(stats))
	fmt.Fprintf(w, "\nwhat the simulated servers saw:\n%-8s %-22s %9s %9s %10s %14s %12s %10s %9s\n",
		"host", "address", "expected", "served", "over-limit", "in Retry-After", "robots-viol", "duplicates", "peak in-flight")
	for _, n := range names {
		s := stats[n]
		addr := strings.TrimSuffix(strings.TrimPrefix(web.URL(n), "http://"), "/")
		fmt.Fprintf(w, "%-8s %-22s %9d %9d %10d %14d %12d %10d %9d\n",
			n, addr, len(expected[n]), s.OK, s.OverLimit, s.InRetryAfter, s.RobotsViolations, s.Duplicates, s.PeakInFlight)
	}
}
