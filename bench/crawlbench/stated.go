package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/crawl-project/crawl/internal/simweb"
)

// stated crawls hosts that state their limits on every answer (simweb.StatedBench) and prints,
// per host, the pages, the time from its first request to its last, the share of the ideal
// (IdealMakespan over that time) and the share of requests refused.
func stated(w io.Writer, seed int64, grace time.Duration, scale int, only string) error {
	return statedRun(w, "stated", "stating their limits", pickHosts(simweb.StatedBench(), only), seed, grace, scale, 0.95)
}

// statedNoWindow crawls limiters that state a limit without its window, beside the same
// limiters stating nothing (simweb.StatedNoWindowBench), and prints the same table as stated.
func statedNoWindow(w io.Writer, seed int64, grace time.Duration, scale int, only string) error {
	return statedRun(w, "stated-nowindow", "stating a limit but no window, or nothing", pickHosts(simweb.StatedNoWindowBench(), only), seed, grace, scale, 0.9)
}

// pickHosts returns the specs named in only (comma-separated; "" keeps all), without their
// cross-links to hosts left out.
func pickHosts(specs []simweb.HostSpec, only string) []simweb.HostSpec {
	if only == "" {
		return specs
	}
	keep := map[string]bool{}
	for _, n := range strings.Split(only, ",") {
		keep[strings.TrimSpace(n)] = true
	}
	var out []simweb.HostSpec
	for _, sp := range specs {
		if !keep[sp.Name] {
			continue
		}
		var links []string
		for _, l := range sp.CrossLinks {
			if keep[l] {
				links = append(links, l)
			}
		}
		sp.CrossLinks = links
		out = append(out, sp)
	}
	return out
}

// statedRun crawls specs (their pages × scale) in one run and prints the table; target is the
// share of the ideal each host that states something should reach.
func statedRun(w io.Writer, name, what string, specs []simweb.HostSpec, seed int64, grace time.Duration, scale int, target float64) error {
	if len(specs) == 0 {
		return fmt.Errorf("%s: -only names no host of the scenario", name)
	}
	for i := range specs {
		specs[i].Pages *= max(scale, 1)
	}
	web, err := simweb.Start(specs, &simweb.Options{Seed: seed, Grace: grace})
	if err != nil {
		return err
	}
	defer web.Close()
	elapsed, stopped, err := crawlTimed(web)
	if err != nil {
		return err
	}
	stats, expected := web.Stats(), web.Expected()
	fmt.Fprintf(w, "%s: %d hosts %s, crawl took %s%s\n\n", name, len(specs), what, elapsed.Round(time.Millisecond), stopped)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "host\theaders\tlimit\tpages\tcomplete\ttime\tideal\tof ideal\trequests\trefused\tin Retry-After\t")
	type total struct {
		reqs, refused int
		least, most   float64 // least share of the ideal, most share refused
	}
	stating, silent := total{least: 1}, total{least: 1}
	for _, sp := range specs {
		st := stats[sp.Name]
		got := 0
		for _, u := range expected[sp.Name] {
			if st.Fetched[u] > 0 {
				got++
			}
		}
		span, ideal := st.LastRequest.Sub(st.FirstRequest), simweb.IdealMakespan(sp)
		of := 0.0
		if span > 0 && got == len(expected[sp.Name]) {
			of = ideal.Seconds() / span.Seconds()
		}
		limit := fmt.Sprintf("%g/s burst %d", sp.Limit, max(sp.Burst, 1))
		if sp.FixedWindow > 0 {
			limit = fmt.Sprintf("%d per %s window", int(sp.Limit*sp.FixedWindow.Seconds()), sp.FixedWindow)
		}
		refused := frac(st.OverLimit, st.Requests)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.3f\t%s\t%s\t%.2f\t%d\t%.2f%%\t%d\t\n", sp.Name, sp.Headers, limit,
			len(expected[sp.Name]), frac(got, len(expected[sp.Name])), span.Round(10*time.Millisecond),
			ideal.Round(10*time.Millisecond), of, st.Requests, 100*refused, st.InRetryAfter)
		t := &stating
		if sp.Headers == simweb.HeadersNone {
			t = &silent
		}
		t.reqs += st.Requests
		t.refused += st.OverLimit
		t.least, t.most = min(t.least, of), max(t.most, refused)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nstating: least share of the ideal %.2f (target ≥ %.2f), most refused on a host %.2f%% (target ≤ 1%%), refused %d of %d requests = %.2f%%\n",
		stating.least, target, 100*stating.most, stating.refused, stating.reqs, 100*frac(stating.refused, stating.reqs))
	if silent.reqs > 0 {
		fmt.Fprintf(w, "stating nothing: least share of the ideal %.2f, most refused on a host %.2f%%, refused %d of %d requests = %.2f%%\n",
			silent.least, 100*silent.most, silent.refused, silent.reqs, 100*frac(silent.refused, silent.reqs))
	}
	return nil
}
