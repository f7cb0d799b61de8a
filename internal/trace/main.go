package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/simweb"
)

func main() {
	specs := []simweb.HostSpec{{Name: "sec429", Pages: 150, Limit: 10, Burst: 2, Reply: simweb.Reply429Seconds}}
	if len(os.Args) > 1 && os.Args[1] == "drop" {
		specs = []simweb.HostSpec{{Name: "drop", Pages: 200, Limit: 20, Burst: 2, LimitDrop: &simweb.LimitChange{After: 5 * time.Second, Factor: 0.25}}}
	}
	web, _ := simweb.Start(specs, &simweb.Options{Seed: 1, Grace: 50 * time.Millisecond})
	defer web.Close()
	dir, _ := os.MkdirTemp("", "tr")
	cfg := crawler.Defaults()
	cfg.Dir, cfg.Seeds = dir, web.Seeds()
	cfg.StatusEvery = 250 * time.Millisecond
	start := time.Now()
	cfg.Progress = func(st crawler.Status) {
		for _, h := range st.Hosts {
			p := ""
			if h.PausedUntil != nil {
				p = "PAUSED"
			}
			fmt.Printf("%6.2fs fetched %3d rate %6.2f win %d acc %5.2f over %d %s\n", time.Since(start).Seconds(), h.Pages, h.Rate, h.Window, h.AcceptedRate, h.OverLimit, p)
		}
	}
	c, err := crawler.Open(cfg)
	if err != nil {
		panic(err)
	}
	c.Run(context.Background())
	c.Close()
	st := web.Stats()
	for _, s := range st {
		for _, t := range s.OverLimitAt {
			fmt.Printf("429 at %.2fs\n", t.Sub(s.FirstRequest).Seconds())
		}
	}
}
