package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/crawl-project/crawl/internal/simweb"
)

// stated crawls hosts that state their limits on every answer (simweb.StatedBench) and prints,
// per host, the pages, the time from its first request to its last, the share of the ideal
// (IdealMakespan over that time) and the share of requests refused.
func stated(w io.Writer, seed int64, grace time.Duration, scale int) error {
	specs := simweb.StatedBench()
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
	fmt.Fprintf(w, "stated: %d hosts stating their limits, crawl took %s%s\n\n", len(specs), elapsed.Round(time.Millisecond), stopped)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "host\theaders\tlimit\tpages\tcomplete\ttime\tideal\tof ideal\trequests\trefused\tin Retry-After\t")
	var reqs, refused int
	least := 1.0
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
		least = min(least, of)
		limit := fmt.Sprintf("%g/s burst %d", sp.Limit, max(sp.Burst, 1))
		if sp.FixedWindow > 0 {
			limit = fmt.Sprintf("%d per %s window", int(sp.Limit*sp.FixedWindow.Seconds()), sp.FixedWindow)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.3f\t%s\t%s\t%.2f\t%d\t%.2f%%\t%d\t\n", sp.Name, sp.Headers, limit,
			len(expected[sp.Name]), frac(got, len(expected[sp.Name])), span.Round(10*time.Millisecond),
			ideal.Round(10*time.Millisecond), of, st.Requests, 100*frac(st.OverLimit, st.Requests), st.InRetryAfter)
		reqs += st.Requests
		refused += st.OverLimit
	}
	tw.Flush()
	fmt.Fprintf(w, "\noverall: least share of the ideal %.2f (target ≥ 0.95), refused %d of %d requests = %.2f%% (target ≤ 1%%)\n",
		least, refused, reqs, 100*frac(refused, reqs))
	return nil
}
