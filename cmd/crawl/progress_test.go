package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/crawler"
)

// TestProgressSharedWorker: a worker of a shared crawl shows its own pages apart from the
// shared crawl's, on the live line and in the progress log record, as its summary does.
func TestProgressSharedWorker(t *testing.T) {
	st := crawler.Status{Running: true, Fetched: 8801, Queued: 920, Shared: &crawler.SharedCrawl{Redis: "redis://127.0.0.1:1/0", Crawl: "default"},
		Run: &crawler.RunCounters{Pages: 285, Retries: 3}}

	var tty bytes.Buffer
	wt := &watcher{w: &lineWriter{w: &tty, tty: true}, start: time.Now()}
	wt.progress(st)
	line := tty.String()
	if !strings.Contains(line, "this worker 285 pages (") || !strings.Contains(line, "shared crawl 8801 fetched, 920 queued") {
		t.Errorf("live line %q; want this worker's 285 pages apart from the shared crawl's 8801", line)
	}

	var log bytes.Buffer
	o := &outputOptions{logFormat: "text"}
	cfg := crawler.Defaults()
	w, err := o.watch(&cfg, &log)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	cfg.Progress(st)
	rec := log.String()
	for _, want := range []string{"worker_fetched=285", "shared_fetched=8801", "queued=920"} {
		if !strings.Contains(rec, want) {
			t.Errorf("progress record %q lacks %s", rec, want)
		}
	}
	if strings.Contains(rec, " fetched=") {
		t.Errorf("progress record %q has a bare fetched=, which reads as the worker's own", rec)
	}
}
