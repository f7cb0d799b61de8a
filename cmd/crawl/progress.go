package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/metrics"
	"github.com/crawl-project/crawl/internal/termsafe"
)

// outputOptions are the flags of run and demo that decide what a crawl shows while it runs.
type outputOptions struct {
	quiet       bool
	logFormat   string
	metricsAddr string
	beforeClose func() error  // called when the run has ended, before the store closes (--memprofile)
	maxTime     time.Duration // --max-time: the run stops after this long (0: no limit)
}

func outputFlags(fs *flag.FlagSet) *outputOptions {
	o := &outputOptions{}
	fs.BoolVar(&o.quiet, "quiet", false, "no progress line (or periodic progress log line)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log lines on stderr as text or json")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics while crawling (e.g. 127.0.0.1:9090)")
	return o
}

func (o *outputOptions) validate() error {
	if o.logFormat != "text" && o.logFormat != "json" {
		return fmt.Errorf("--log-format must be text or json, not %q", o.logFormat)
	}
	return nil
}

// escapeAttr escapes the control characters of a string or error value (termsafe) for the JSON
// log handler, which escapes C0 controls but leaves C1 and bidi controls as they are; the text
// handler quotes every value that has one.
func escapeAttr(_ []string, a slog.Attr) slog.Attr {
	switch v := a.Value.Any().(type) {
	case string:
		a.Value = slog.StringValue(termsafe.Escape(v))
	case error:
		a.Value = slog.StringValue(termsafe.Escape(v.Error()))
	}
	return a
}

// progressEvery is how often the progress is logged when stderr is not a terminal.
const progressEvery = 10 * time.Second

// watcher shows one crawl: a live status line on a terminal, or a progress log line every
// progressEvery otherwise; logs through log/slog; and the metrics endpoint.
type watcher struct {
	log     *slog.Logger
	w       *lineWriter
	quiet   bool
	start   time.Time
	lastLog time.Time
	hist    []progressPoint // recent (time, fetched), for pages/s

	col *metrics.Collector
	srv *metrics.Server
}

type progressPoint struct {
	t       time.Time
	fetched int
}

// watch sets up logging, progress and metrics for cfg, and tells the user where the metrics
// are served. Call attach with the opened crawler, finish after Run and close at the end.
func (o *outputOptions) watch(cfg *crawler.Config, stderr io.Writer) (*watcher, error) {
	lw := &lineWriter{w: stderr, tty: isTerminal(stderr), width: termWidth(stderr)}
	var h slog.Handler = slog.NewTextHandler(lw, nil)
	if o.logFormat == "json" {
		h = slog.NewJSONHandler(lw, &slog.HandlerOptions{ReplaceAttr: escapeAttr})
	}
	wt := &watcher{log: slog.New(h), w: lw, quiet: o.quiet, start: time.Now()}
	cfg.Log = wt.log
	if !o.quiet {
		cfg.Progress = wt.progress
	}
	if o.metricsAddr != "" {
		wt.col = metrics.New(metrics.TopHosts)
		srv, err := metrics.Listen(o.metricsAddr, wt.col.Handler())
		if err != nil {
			return nil, err
		}
		wt.srv = srv
		wt.log.Info("serving metrics", "url", "http://"+srv.Addr()+"/metrics")
	}
	return wt, nil
}

// attach makes c report to the metrics, if they are served.
func (wt *watcher) attach(c *crawler.Crawler) {
	if wt.col != nil {
		c.SetObserver(wt.col)
	}
}

// finish ends the live line, so what follows starts on a line of its own.
func (wt *watcher) finish() { wt.w.endLine() }

// close stops the metrics server.
func (wt *watcher) close() {
	if wt.srv != nil {
		wt.srv.Close()
	}
}

// progress is the crawler's Progress hook. A worker of a shared crawl shows its own pages and
// rate apart from the shared crawl's counts, as its summary does (Status.Shared: the
// frontier's counts are the fleet's).
func (wt *watcher) progress(st crawler.Status) {
	now := time.Now()
	var run crawler.RunCounters
	if st.Run != nil {
		run = *st.Run
	}
	own := st.Fetched // the pages the rate counts: the crawl's, or a shared crawl's worker's own
	if st.Shared != nil {
		own = run.Pages
	}
	wt.hist = append(wt.hist, progressPoint{now, own})
	for len(wt.hist) > 2 && now.Sub(wt.hist[1].t) >= 5*time.Second {
		wt.hist = wt.hist[1:] // keep about five seconds
	}
	rate := 0.0
	if first := wt.hist[0]; now.Sub(first.t) > 0 {
		rate = float64(own-first.fetched) / now.Sub(first.t).Seconds()
	}
	active, paused := st.HostsNotCrawledQueued, 0 // a host waiting for its first request is active
	for _, h := range st.Hosts {
		if h.InFlight > 0 || h.Queued > 0 {
			active++
		}
		if h.PausedUntil != nil {
			paused++
		}
	}
	elapsed := now.Sub(wt.start)
	if !wt.w.tty {
		if st.Running && !wt.lastLog.IsZero() && now.Sub(wt.lastLog) < progressEvery {
			return
		}
		wt.lastLog = now
		pages := []any{"fetched", st.Fetched}
		if st.Shared != nil {
			pages = []any{"worker_fetched", run.Pages, "shared_fetched", st.Fetched}
		}
		wt.log.Info("progress", append(append([]any{"elapsed", elapsed.Round(time.Second).String()}, pages...),
			"pages_per_s", float64(int(rate*10))/10, "queued", st.Queued, "in_flight", st.InFlight,
			"hosts_active", active, "hosts_paused", paused, "over_limit", run.OverLimit,
			"retries", run.Retries, "errors", run.Errors)...)
		return
	}
	pages := fmt.Sprintf("%d pages (%.1f/s)  queued %d", st.Fetched, rate, st.Queued)
	if st.Shared != nil {
		pages = fmt.Sprintf("this worker %d pages (%.1f/s); shared crawl %d fetched, %d queued", run.Pages, rate, st.Fetched, st.Queued)
	}
	wt.w.setLine(fmt.Sprintf("%s  %s  hosts: %d active, %d paused  429/503: %d  retries: %d  errors: %d",
		fmtElapsed(elapsed), pages, active, paused, run.OverLimit, run.Retries, run.Errors))
}

func fmtElapsed(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Minute {
		return d.String()
	}
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

// lineWriter is stderr shared by the live status line and log records: on a terminal, a log
// record first clears the status line and the line is drawn again after it. It is safe for
// concurrent use.
type lineWriter struct {
	w     io.Writer
	tty   bool
	width int // terminal columns; 0 if unknown

	mu    sync.Mutex
	line  string
	shown bool
}

// Write writes one log record.
func (lw *lineWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.shown {
		io.WriteString(lw.w, "\r\033[K")
	}
	n, err := lw.w.Write(p)
	if lw.shown {
		io.WriteString(lw.w, lw.line)
	}
	return n, err
}

// setLine replaces the live line.
func (lw *lineWriter) setLine(s string) {
	if lw.width > 1 && len([]rune(s)) >= lw.width {
		s = string([]rune(s)[:lw.width-1])
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.line, lw.shown = s, true
	io.WriteString(lw.w, "\r\033[K"+s)
}

// endLine moves past the live line, if one is shown.
func (lw *lineWriter) endLine() {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.shown {
		io.WriteString(lw.w, "\n")
		lw.shown = false
	}
}

// isTerminal reports whether w writes (through any wrappers) to a terminal.
func isTerminal(w io.Writer) bool {
	f := underlyingFile(w)
	if f == nil {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
