package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"time"

	"github.com/crawl-project/crawl/fetch"
	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/fleet"
	"github.com/redis/go-redis/v9"
)

// The fleet's frontier keeps the crawler's contract, extras included (discovered by OpenWith).
var _ crawler.Shared = (*fleet.Frontier)(nil)

// fleetOptions are run's flags for a crawl shared through Redis.
type fleetOptions struct {
	redisURL   string
	crawl      string
	leaseTTL   time.Duration
	partitions int
	stateTTL   time.Duration // --host-state-ttl
}

func fleetFlags(fs *flag.FlagSet) *fleetOptions {
	o := &fleetOptions{}
	fs.StringVar(&o.redisURL, "redis", "", "share the crawl with other workers through Redis or Valkey (or a Redis Cluster, found from one node) at this `URL` ("+redisURLForm+"); pages stay in --data")
	fs.StringVar(&o.crawl, "crawl", "default", "with --redis: the `name` of the shared crawl to join or start")
	durationVar(fs, &o.leaseTTL, "lease-ttl", 10*time.Second, "with --redis: how long a worker's hold on its hosts lasts without renewal; a dead worker's hosts move after it (a `duration`, the same for every worker)")
	fs.IntVar(&o.partitions, "partitions", 1024, "with --redis: host partitions, fixed when the shared crawl is created")
	durationVar(fs, &o.stateTTL, "host-state-ttl", 30*24*time.Hour, "with --redis: how long Redis keeps a host's learned politeness (rate, window, pause) after its last save; a host idle for longer starts afresh (a `duration`, at least 1m)")
	return o
}

// sharedUnsupported names the flags a shared crawl does not take: they revise URLs already
// seen, which the shared frontier does not do.
func sharedUnsupported(fs *flag.FlagSet) []string {
	var bad []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "retry", "recrawl", "older-than":
			bad = append(bad, "--"+f.Name)
		}
	})
	return bad
}

// crawlShared runs cfg as a worker of the shared crawl o names: it joins the crawl in Redis,
// keeps its share of partitions while the crawl loop runs on them, and at the end (the crawl
// over, or a signal) hands its partitions back at once.
func crawlShared(cfg crawler.Config, rdb redis.UniversalClient, o *fleetOptions, out *outputOptions, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	machine, _ := os.Hostname()
	w, err := fleet.Join(ctx, rdb, o.crawl, fleet.NewWorkerID(),
		&fleet.Options{Partitions: o.partitions, LeaseTTL: o.leaseTTL, HostBudget: cfg.MaxHostPages, HostStateTTL: o.stateTTL, RobotsTTL: cfg.RobotsTTL,
			Placement: placement(cfg.KeyByIP), Resolve: fetch.NewResolver(fetch.ResolverConfig{Server: cfg.DNSServer}).LookupNetIP},
		fleet.FrontierOptions{Log: log, Machine: machine, Data: cfg.Dir, Redis: redactedRedis(o.redisURL), Crawl: o.crawl})
	if err != nil {
		fmt.Fprintf(stderr, "crawl run: %v\n", err)
		return exitUsage
	}
	fr := w.Frontier
	code := crawlWith(cfg, out, stdout, stderr, func(cfg crawler.Config) (*crawler.Crawler, error) {
		return crawler.OpenWith(cfg, fr)
	})
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer rcancel()
	if err := w.Leave(rctx); err != nil {
		fmt.Fprintf(stderr, "crawl: cannot hand the partitions back (they move when their leases run out): %v\n", err)
	}
	st := fr.Stats()
	if st.Refused > 0 || st.Outages > 0 || st.Restarts > 0 {
		fmt.Fprintf(stderr, "crawl: shared crawl %q: %d results refused (their hosts had moved to another worker: fenced), %d Redis outages, %d Redis restarts or failovers, %d partitions dropped\n",
			o.crawl, st.Refused, st.Outages, st.Restarts, st.Dropped)
	}
	if st.SetAside > 0 || st.Recounted > 0 {
		fmt.Fprintf(stderr, "crawl: shared crawl %q: damage found in Redis: %d unreadable %s set aside in the partitions' bad lists, %d %s' damaged counters recounted\n",
			o.crawl, st.SetAside, plural(st.SetAside, "value", "values"), st.Recounted, plural(st.Recounted, "partition", "partitions"))
	}
	return code
}

// joinSettings dials the Redis of the shared crawl o names and makes cfg's crawl settings the
// crawl's (takeCrawlSettings). It returns the client, or the exit code of a failure.
func joinSettings(fs *flag.FlagSet, cfg *crawler.Config, o *fleetOptions, stderr io.Writer) (redis.UniversalClient, int) {
	if o.stateTTL < time.Minute {
		fmt.Fprintf(stderr, "crawl run: --host-state-ttl %v: want at least 1m\n", o.stateTTL)
		return nil, exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second+seedsWait)
	defer cancel()
	rdb, _, dialed := dialRedis(ctx, "run", o.redisURL, nil, stderr)
	if dialed != exitOK {
		return nil, dialed
	}
	st, err := fleet.Open(ctx, rdb, o.crawl, fleet.NewWorkerID(), &fleet.Options{Partitions: o.partitions, Placement: placement(cfg.KeyByIP),
		Resolve: fetch.NewResolver(fetch.ResolverConfig{Server: cfg.DNSServer}).LookupNetIP})
	if err == nil {
		err = takeCrawlSettings(ctx, st, fs, cfg, len(cfg.Seeds) > 0, o.crawl, stderr)
	}
	if err != nil {
		rdb.Close()
		fmt.Fprintf(stderr, "crawl run: %v\n", err)
		return nil, exitUsage // as a failed Join
	}
	return rdb, exitOK
}

// placement is how a shared crawl partitions its hosts: with --key-by-ip by the address their
// names resolve to, so that the names of one server fall to one worker and share its gate
// (docs/fleet.md "Politeness per server").
func placement(keyByIP bool) fleet.Placement {
	if keyByIP {
		return fleet.ByAddress
	}
	return fleet.ByName
}

// redactedRedis is the Redis URL raw without its password and query (whose options may hold
// one), to be shown and kept in a worker's store.
func redactedRedis(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	if u.User != nil {
		if name := u.User.Username(); name != "" {
			u.User = url.User(name)
		} else {
			u.User = nil
		}
	}
	u.RawQuery, u.Fragment = "", ""
	return u.String()
}

// quietRedis drops go-redis' own log lines.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}
