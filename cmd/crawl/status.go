package main

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/crawl-project/crawl/internal/crawler"
)

func init() {
	commands["status"] = command{summary: "show a crawl's counts and per-host figures (works while it runs)", run: statusCmd}
}

func statusCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("crawl status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("data", "", "data directory of the crawl")
	asJSON := fs.Bool("json", false, "print the stable JSON form (see README)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *dir == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: crawl status --data DIR [--json]")
		return exitUsage
	}
	st, err := crawler.ReadStatus(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "crawl status: %v\n", err)
		return exitRuntime
	}
	if *asJSON {
		if st.Hosts == nil {
			st.Hosts = []crawler.HostStatus{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(st); err != nil {
			fmt.Fprintf(stderr, "crawl status: %v\n", err)
			return exitRuntime
		}
		return exitOK
	}
	state := "stopped"
	if st.Running {
		state = fmt.Sprintf("running (snapshot %s old)", time.Since(st.UpdatedAt).Round(100*time.Millisecond))
	}
	fmt.Fprintf(stdout, "crawl in %s: %s\n", *dir, state)
	fmt.Fprintf(stdout, "fetched %d  failed %d  excluded %d  queued %d  in flight %d\n", st.Fetched, st.Failed, st.Excluded, st.Queued, st.InFlight)
	printReasons(stdout, "failed", st.FailedBy)
	printReasons(stdout, "excluded", st.ExcludedBy)
	if len(st.Hosts) == 0 {
		return exitOK
	}
	fmt.Fprintf(stdout, "\n%-28s %7s %6s %6s %8s %6s %-11s %8s %8s %6s %-20s %s\n",
		"host", "pages", "queued", "failed", "rate/s", "window", "phase", "p95 ms", "base ms", "429s", "paused until", "last error")
	for _, h := range st.Hosts {
		paused := "-"
		if h.PausedUntil != nil {
			paused = h.PausedUntil.Local().Format("15:04:05.000")
		}
		fmt.Fprintf(stdout, "%-28s %7d %6d %6d %8.2f %6d %-11s %8.1f %8.1f %6d %-20s %s\n",
			h.Host, h.Pages, h.Queued, h.Failed, h.Rate, h.Window, cmp.Or(h.Phase, "-"), h.P95Ms, h.BaselineMs, h.OverLimit, paused, h.LastError)
	}
	return exitOK
}
