package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/crawl-project/crawl/internal/crawler"
)

// crawlValues are the crawl-wide values of a shared crawl (internal/fleet's Store).
type crawlValues interface {
	Value(ctx context.Context, name string) (string, bool, error)
	Settle(ctx context.Context, name, value string) (string, error)
}

// seedsWait is how long a worker given no seeds waits for a worker given seeds to start the
// shared crawl (workers started together), polling every seedsPoll.
const (
	seedsWait = 15 * time.Second
	seedsPoll = 100 * time.Millisecond
)

// takeCrawlSettings makes cfg's crawl settings (crawler.CrawlSettings) those of the shared
// crawl name, as a resume takes a store's: every flag of fs not given takes the crawl's value,
// and a flag given a value other than the crawl's is refused (*crawler.SettingsConflict: the
// settings belong to the crawl, which its workers cannot change). A worker given seeds
// (seeded) that finds no settings stores its own, atomically, the first one winning; a worker
// given none waits up to seedsWait for one to start the crawl. A crawl started by a version
// that kept no settings has none: the worker's flags are then its own, as before, and it says
// so.
func takeCrawlSettings(ctx context.Context, st crawlValues, fs *flag.FlagSet, cfg *crawler.Config, seeded bool, name string, stderr io.Writer) error {
	v, ok, err := crawlRecord(ctx, st, cfg, seeded, name, stderr)
	if err != nil {
		return err
	}
	if !ok {
		fmt.Fprintf(stderr, "crawl: shared crawl %q keeps no settings (started by an earlier version): this worker crawls with its own flags\n", name)
		return nil
	}
	crawl, err := crawler.DecodeCrawlSettings(v)
	if err != nil {
		return fmt.Errorf("shared crawl %q: %w", name, err)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	mine := cfg.CrawlSettings().Flags()
	var conflicts []crawler.Change
	var taken []string
	for i, s := range crawl.Flags() {
		switch {
		case slices.Equal(s.Values, mine[i].Values):
		case given[s.Flag]:
			conflicts = append(conflicts, crawler.Change{Was: s, Now: mine[i]})
		default:
			for _, v := range s.Values { // a repeatable flag not given holds nothing yet
				if err := fs.Set(s.Flag, v); err != nil {
					return fmt.Errorf("shared crawl %q: setting --%s %q: %v", name, s.Flag, v, err)
				}
			}
			taken = append(taken, s.String())
		}
	}
	if len(conflicts) > 0 {
		return &crawler.SettingsConflict{Changes: conflicts}
	}
	if len(taken) > 0 {
		fmt.Fprintf(stderr, "crawl: shared crawl %q: taking its %s\n", name, strings.Join(taken, " "))
	}
	return nil
}

// crawlRecord returns the shared crawl's settings record, and whether it has one: with seeds,
// the one stored first (this worker's if none was); without, the one of the crawl once a
// worker's seeds are in it (crawler.SeededName), or none for a crawl of an earlier version
// (seeded, it has a scope but no settings).
func crawlRecord(ctx context.Context, st crawlValues, cfg *crawler.Config, seeded bool, name string, stderr io.Writer) (string, bool, error) {
	if seeded {
		if err := cfg.ValidateGiven(); err != nil { // what the crawl keeps must be what a worker may run with
			return "", false, fmt.Errorf("%w (%w)", err, crawler.ErrUsage)
		}
		v, err := st.Settle(ctx, crawler.CrawlSettingsName, crawler.EncodeCrawlSettings(cfg.CrawlSettings()))
		return v, err == nil, err
	}
	deadline := time.Now().Add(seedsWait)
	for said := false; ; said = true {
		if _, ok, err := st.Value(ctx, crawler.SeededName); err != nil {
			return "", false, err
		} else if ok {
			return st.Value(ctx, crawler.CrawlSettingsName)
		}
		if _, ok, err := st.Value(ctx, "scope-mode"); err != nil {
			return "", false, err
		} else if ok {
			v, ok, err := st.Value(ctx, crawler.CrawlSettingsName)
			if err != nil || !ok {
				return v, ok, err // seeded by an earlier version
			}
			// being started by a worker of this version: wait for its seeds
		}
		if time.Now().After(deadline) {
			return "", false, fmt.Errorf("the shared crawl holds no URL: no worker given seeds started %q within %v; give this one seed URLs or --seeds FILE (%w)", name, seedsWait, crawler.ErrUsage)
		}
		if !said {
			fmt.Fprintf(stderr, "crawl: waiting for a worker given seeds to start the shared crawl %q\n", name)
		}
		select {
		case <-ctx.Done():
			return "", false, ctx.Err()
		case <-time.After(seedsPoll):
		}
	}
}
