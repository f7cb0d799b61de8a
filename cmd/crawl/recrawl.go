package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/crawler"
)

// printRecrawlLeft says, after --recrawl queued its revisits (rev, as printChanges has it),
// what it left alone: with nothing queued, why there is nothing to revisit; with --older-than
// (olderThan), how many fetched pages are too recent and when the first of them will be old
// enough (ages, at now).
func printRecrawlLeft(w io.Writer, olderThan time.Duration, rev frontier.Revised, ages crawler.RecrawlAges, now time.Time) {
	older := shortDuration(olderThan)
	due := fmt.Sprintf("%s (in %s)", ages.NextAt.Local().Format(time.DateTime), fmtWait(ages.NextAt.Sub(now)))
	switch {
	case rev.Revisited == 0 && ages.Old == 0 && ages.Recent > 0:
		fmt.Fprintf(w, "crawl: nothing to revisit: no fetched page is older than %s (%d %s last visited since); the oldest will be at %s\n",
			older, ages.Recent, plural(ages.Recent, "page was", "pages were"), due)
		return
	case rev.Revisited == 0 && ages.Recent > 0:
		fmt.Fprintf(w, "crawl: nothing to revisit: the store holds no fetched page that the settings admit older than %s\n", older)
	case rev.Revisited == 0:
		fmt.Fprintln(w, "crawl: nothing to revisit: the store holds no fetched page that the settings admit")
	}
	if ages.Recent > 0 {
		fmt.Fprintf(w, "crawl: %d fetched %s newer than %s left for a later run; the oldest of them will be old enough at %s\n",
			ages.Recent, plural(ages.Recent, "page", "pages"), older, due)
	}
}

// fmtWait writes d to the second under a minute and to the minute above ("23h59m"); a d not
// positive is "0s".
func fmtWait(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Minute:
		return d.Round(time.Second).String()
	}
	return shortDuration(d.Round(time.Minute))
}

// shortDuration is d as time.Duration writes it, without its trailing zero units: "24h",
// "1h30m", "90s" written "1m30s".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
