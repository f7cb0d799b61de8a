package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/storage"
)

// recrawl crawls one unlimited host of pages pages whose pages send validators (simweb
// Revisions: a quarter send none), then recrawls it unchanged with Recrawl, and prints what
// each run cost: wall time, requests, 304s, body bytes received and the store's growth.
func recrawl(w io.Writer, seed int64, pages int) error {
	web, err := simweb.Start([]simweb.HostSpec{{Name: "site", Pages: pages, Revisions: true}}, &simweb.Options{Seed: seed})
	if err != nil {
		return err
	}
	defer web.Close()
	dir, err := os.MkdirTemp("", "crawl-bench-recrawl-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintf(w, "recrawl: one unlimited host of %d pages (1 in 4 without ETag or Last-Modified), unchanged between runs\n", pages)
	fmt.Fprintf(w, "%-8s %9s %9s %7s %7s %14s %14s\n", "run", "seconds", "requests", "304s", "200s", "body bytes", "store growth")
	var lastSeq uint64
	var size int64
	for i, recrawl := range []bool{false, true} {
		web.Reset()
		start := time.Now()
		if _, err := crawlWeb(web, dir, func(c *crawler.Config) {
			c.Recrawl, c.MaxRate, c.InitialRate = recrawl, 1e6, 1000
			if recrawl {
				c.Seeds = nil
			}
		}); err != nil {
			return err
		}
		elapsed := time.Since(start)
		body, last, err := bodyBytesAfter(dir, lastSeq)
		if err != nil {
			return err
		}
		fi, err := os.Stat(filepath.Join(dir, "crawl.db"))
		if err != nil {
			return err
		}
		st := web.Stats()["site"]
		fmt.Fprintf(w, "%-8s %9.2f %9d %7d %7d %14d %14d\n", []string{"first", "recrawl"}[i], elapsed.Seconds(), st.PageRequests,
			st.NotModified, st.OK-st.RobotsRequests, body, fi.Size()-size)
		lastSeq, size = last, fi.Size()
	}
	return nil
}

// bodyBytesAfter sums the body bytes of the pages stored after sequence number after, and
// returns the last sequence number.
func bodyBytesAfter(dir string, after uint64) (bytes int64, last uint64, err error) {
	db, err := storage.Open(dir, &storage.Options{ReadOnly: true})
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	last = after
	err = db.Pages(func(p *storage.Page) error {
		if p.Seq > after {
			bytes += int64(len(p.Body))
			last = p.Seq
		}
		return nil
	})
	return bytes, last, err
}
