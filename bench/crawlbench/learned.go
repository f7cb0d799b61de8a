package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"text/tabwriter"
	"time"

	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/internal/urlnorm"
	"github.com/crawl-project/crawl/storage"
)

// learned crawls one host with a hidden limit (20 req/s, burst 2, 429 + Retry-After) twice from
// new data directories: first from nothing, then with --learned-from the first's, and prints
// the rate the host saw in each crawl's first 10 s against the rate the first one learned.
func learned(w io.Writer, seed int64, grace time.Duration) error {
	specs := []simweb.HostSpec{{Name: "learn20", Pages: 600, Limit: 20, Burst: 2, Reply: simweb.Reply429Seconds}}
	web, err := simweb.Start(specs, &simweb.Options{Seed: seed, Grace: grace})
	if err != nil {
		return err
	}
	defer web.Close()
	first, err := os.MkdirTemp("", "crawl-bench-learned-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(first)
	u, err := url.Parse(web.URL("learn20"))
	if err != nil {
		return err
	}
	key := urlnorm.HostKey(u)

	type row struct {
		name             string
		early, over, all int
		took             time.Duration
	}
	run := func(name, dir, from string) (row, error) {
		web.Reset()
		sum, err := crawlWeb(web, dir, tunedLearnedFrom(from))
		if err != nil {
			return row{}, err
		}
		_, per := web.Arrivals()
		r := row{name: name, took: sum.Elapsed}
		for i, n := range per {
			if i < 10 {
				r.early += n
			}
			r.all += n
		}
		r.over = web.Stats()["learn20"].OverLimit
		return r, nil
	}
	r1, err := run("first, from nothing", first, "")
	if err != nil {
		return err
	}
	db, err := storage.Open(first, &storage.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	b, _, err := db.LoadHostState(key)
	db.Close()
	if err != nil {
		return err
	}
	var st struct {
		AIMD struct {
			Rate float64 `json:"rate"`
		} `json:"aimd"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("the first crawl's state of %s: %w", key, err)
	}
	r2, err := run("second, --learned-from the first", "", first)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "learned: one host, 20 req/s burst 2 (429 + Retry-After), 600 pages; the first crawl learned %.2f req/s\n\n", st.AIMD.Rate)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "crawl\tfirst 10 s\tof learned\trequests\trefused\ttook\t")
	for _, r := range []row{r1, r2} {
		rate := float64(r.early) / 10
		fmt.Fprintf(tw, "%s\t%.2f req/s\t%.2f\t%d\t%d\t%s\t\n", r.name, rate, rate/st.AIMD.Rate, r.all, r.over, r.took.Round(10*time.Millisecond))
	}
	return tw.Flush()
}

// tunedLearnedFrom is the bench's tuning (tune) with --learned-from dir ("" for none).
func tunedLearnedFrom(dir string) func(*crawler.Config) {
	return func(c *crawler.Config) {
		if tune != nil {
			tune(c)
		}
		c.LearnedFrom = dir
	}
}
