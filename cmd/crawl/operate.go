package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/crawl-project/crawl/fetch"
	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/fleet"
	"github.com/crawl-project/crawl/internal/termsafe"
)

// Commands that operate a running shared crawl from outside its workers: crawl add, and
// crawl urls --redis (urls.go).

func init() {
	commands["add"] = command{summary: "add seed URLs to a running crawl shared through Redis", run: addCmd}
}

const addSynopsis = `usage: crawl add --redis redis://HOST:PORT/DB [--crawl NAME] [URL...] [--seeds FILE|-]

Adds seeds to a crawl shared through Redis while its workers run: the crawl's scope widens to
cover them (under the --scope mode it was started with) and the seeds not seen before are
queued. Running workers take the wider scope in within 5 seconds; the workers' --include and
--exclude are not applied to the seeds themselves.`

func addCmd(args []string, stdout, stderr io.Writer) int {
	flags := newFlags("add", addSynopsis)
	fs := flags.FlagSet
	redisURL := fs.String("redis", "", "the Redis (or Valkey) of the shared crawl, as redis://HOST:PORT/DB")
	crawlName := fs.String("crawl", "default", "the shared crawl's name")
	seedFile := fs.String("seeds", "", "seed file: one URL per line, # comments; - reads stdin")
	pos, code, ok := flags.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if *redisURL == "" || *seedFile == "" && len(pos) == 0 {
		fmt.Fprintln(stderr, strings.SplitN(addSynopsis, "\n", 2)[0])
		return exitUsage
	}
	seeds, _, err := readSeeds(*seedFile, pos, stderr) // a bare seed is tried on https only: the fallback is a worker's, per run
	if err != nil {
		fmt.Fprintf(stderr, "crawl add: %v\n", err)
		return exitUsage
	}
	rdb, target, code, ok := openSharedRedis("crawl add", *redisURL, stderr)
	if !ok {
		return code
	}
	defer rdb.Close()
	fr, code, ok := openSharedCrawl("crawl add", rdb, target, *crawlName, stderr)
	if !ok {
		return code
	}
	_, err = crawler.AddSeedsTo(fr, seeds, fetch.NewResolver(fetch.ResolverConfig{}))
	switch {
	case errors.Is(err, crawler.ErrUsage):
		fmt.Fprintf(stderr, "crawl add: %v\n", strings.TrimSuffix(err.Error(), " (usage error)"))
		return exitUsage
	case err != nil:
		fmt.Fprintf(stderr, "crawl add: %d seeds: %v\n", len(seeds), err)
		return exitRuntime
	}
	fmt.Fprintf(stdout, "%d %s sent to the shared crawl %q (the owners of their hosts queue those not seen before)\n",
		len(seeds), plural(len(seeds), "seed", "seeds"), *crawlName)
	return exitOK
}

// openSharedRedis connects to the Redis (or Redis Cluster) at rawURL for command cmd,
// failing (with a message on stderr and the exit code) when the URL is bad or Redis
// unreachable.
func openSharedRedis(cmd, rawURL string, stderr io.Writer) (redis.UniversalClient, fleet.Target, int, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*redisTimeout)
	defer cancel()
	rdb, t, code := dialRedis(ctx, strings.TrimPrefix(cmd, "crawl "), rawURL, func(o *redis.Options) {
		o.DialTimeout = redisTimeout
	}, stderr)
	return rdb, t, code, code == exitOK
}

// openSharedCrawl opens the existing shared crawl name for command cmd: its frontier, used
// for operations on the whole crawl (no partition is taken), with a short patience.
func openSharedCrawl(cmd string, rdb redis.UniversalClient, t fleet.Target, name string, stderr io.Writer) (*fleet.Frontier, int, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*redisTimeout)
	defer cancel()
	s, err := fleet.OpenExisting(ctx, rdb, name, "operator-"+fleet.NewWorkerID())
	if err != nil {
		return openSharedCrawlError(cmd, err, t, name, stderr)
	}
	return fleet.NewFrontier(s.NewKeeper(), fleet.FrontierOptions{Patience: redisTimeout, Timeout: redisTimeout}), exitOK, true
}

// urlsShared is crawl urls --redis: the URLs the shared crawl holds in Redis, those queued
// (waiting, delayed for a retry, or in flight), filtered as crawl urls filters. URLs fetched,
// failed or excluded are kept in Redis as fingerprints only, so they cannot be listed: a
// filter that asks only for them is told so.
func urlsShared(rawURL, name string, states []string, reason, host string, asJSON bool, stdout, stderr io.Writer) int {
	if len(states) > 0 && !slices.Contains(states, "queued") || reason != "" {
		fmt.Fprintf(stderr, "crawl urls: a shared crawl keeps only its queued URLs in Redis (fetched, failed and excluded ones as fingerprints, and a queued URL's last retry reason not at all); crawl status --redis %s --crawl %s counts them by reason\n",
			redactedRedis(rawURL), name)
		return exitUsage
	}
	rdb, target, code, ok := openSharedRedis("crawl urls", rawURL, stderr)
	if !ok {
		return code
	}
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*redisTimeout)
	s, err := fleet.OpenExisting(ctx, rdb, name, "operator-"+fleet.NewWorkerID())
	cancel()
	if err != nil {
		_, code, _ := openSharedCrawlError("crawl urls", err, target, name, stderr)
		return code
	}
	w := bufio.NewWriter(stdout)
	enc := json.NewEncoder(w)
	if !asJSON {
		fmt.Fprintf(w, "%-8s %-10s %8s %5s  %s  %s\n", "state", "where", "attempts", "depth", "url", "parent")
	}
	unreadable := 0
	err = s.Queued(context.Background(), func(q fleet.QueuedURL) error {
		if host != "" && !hostMatches(q.Host, host) {
			return nil
		}
		if asJSON {
			return enc.Encode(sharedURLLine{urlLine: urlLine{URL: q.URL, State: "queued", Attempts: q.Attempts, Depth: q.Depth, Parent: q.Parent},
				Where: q.State.String()})
		}
		_, err := fmt.Fprintf(w, "%-8s %-10s %8d %5d  %s  %s\n", "queued", q.State, q.Attempts, q.Depth, termsafe.Escape(q.URL), termsafe.Escape(dash(q.Parent)))
		return err
	}, func(err error) {
		if unreadable++; unreadable <= maxUnreadableShown {
			fmt.Fprintf(stderr, "crawl urls: skipped: %s\n", termsafe.Escape(strings.TrimPrefix(err.Error(), "fleet: ")))
		}
	})
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		fmt.Fprintf(stderr, "crawl urls: %v\n", err)
		return exitRuntime
	}
	if unreadable > 0 {
		fmt.Fprintf(stderr, "crawl urls: %d unreadable %s in Redis skipped (a worker sets them aside in their partition's bad list when it meets them)\n",
			unreadable, plural(unreadable, "item", "items"))
		return exitRuntime
	}
	return exitOK
}

// maxUnreadableShown bounds the unreadable items crawl urls --redis names one by one.
const maxUnreadableShown = 10

// sharedURLLine is one URL as crawl urls --redis --json prints it: crawl urls' fields plus
// where the queued URL is (waiting, delayed, in flight).
type sharedURLLine struct {
	urlLine
	Where string `json:"where"`
}

// openSharedCrawlError reports err, from fleet.OpenExisting, as openSharedCrawl does.
func openSharedCrawlError(cmd string, err error, t fleet.Target, name string, stderr io.Writer) (*fleet.Frontier, int, bool) {
	switch {
	case errors.Is(err, fleet.ErrNoCrawl):
		fmt.Fprintf(stderr, "%s: no crawl %q in the Redis at %s\n", cmd, name, t)
		return nil, exitRuntime, false
	case errors.Is(err, fleet.ErrCrawlName):
		fmt.Fprintf(stderr, "%s: --crawl %q: a name is 1 to 64 letters, digits, '.', '_' or '-'\n", cmd, name)
		return nil, exitUsage, false
	case errors.Is(err, fleet.ErrServerTooOld):
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return nil, exitUsage, false
	}
	fmt.Fprintf(stderr, "%s: Redis at %s: %s\n", cmd, t, strings.TrimPrefix(err.Error(), "fleet: "))
	return nil, exitRuntime, false
}
