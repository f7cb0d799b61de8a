package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/fleet"
	"github.com/crawl-project/crawl/internal/termsafe"
)

// fleetStatus is `crawl status --redis --json`: the keys of crawl status (crawler.Status)
// with the fleet's totals, plus the crawl's name, its partitions and its workers. Hosts is
// empty: per-host figures live in each worker (crawl status --data DIR on its machine).
type fleetStatus struct {
	crawler.Status
	Crawl          string             `json:"crawl"`
	Partitions     int                `json:"partitions"`
	PartitionsFree int                `json:"partitions_free"` // held by no worker
	Outbox         int                `json:"outbox"`          // completed pages whose links are not yet forwarded
	Inbox          int                `json:"inbox"`           // payloads of URLs sent to partitions, not yet recorded by their owners
	HostsQueued    int                `json:"hosts_queued"`    // hosts with URLs queued or delayed
	Workers        []fleet.WorkerView `json:"workers"`
	WorkersAlive   int                `json:"workers_alive"`
	// What Redis held that could not be used (docs/guarantees.md "Hostile contents in Redis"):
	// values set aside in the partitions' bad lists, damaged values repaired, and counters
	// read as 0 until their partition's owner recounts them.
	SetAside       int      `json:"set_aside"`
	Repaired       int      `json:"repaired"`
	DamagedCount   int      `json:"damaged_counters"`
	DamagedSamples []string `json:"damaged,omitempty"`
}

// redisTimeout bounds how long crawl status waits for Redis before it reports it unreachable.
const redisTimeout = 5 * time.Second

// fleetStatusCmd prints the fleet view of crawl in the Redis at rawURL. Redis unreachable or
// a bad URL: exit 2, naming the address and the cause.
func fleetStatusCmd(rawURL, crawl string, asJSON bool, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*redisTimeout)
	defer cancel()
	rdb, target, code := dialRedis(ctx, "status", rawURL, func(o *redis.Options) {
		o.MaxRetries = -1 // one attempt: an unreachable server is reported, not retried
		o.DialTimeout = redisTimeout
	}, stderr)
	if code != exitOK {
		return code
	}
	defer rdb.Close()
	v, err := fleet.ReadView(ctx, rdb, crawl)
	switch {
	case errors.Is(err, fleet.ErrNoCrawl):
		fmt.Fprintf(stderr, "crawl status: no crawl %q in the Redis at %s\n", crawl, target)
		return exitRuntime
	case errors.Is(err, fleet.ErrCrawlName):
		fmt.Fprintf(stderr, "crawl status: --crawl %q: a name is 1 to 64 letters, digits, '.', '_' or '-'\n", crawl)
		return exitUsage
	case err != nil:
		fmt.Fprintf(stderr, "crawl status: Redis at %s: %s\n", target, strings.TrimPrefix(err.Error(), "fleet: "))
		return exitRuntime
	}
	st := fleetStatusOf(v)
	if asJSON {
		return printStatusJSON(stdout, stderr, st)
	}
	printFleetStatus(stdout, st, target)
	return exitOK
}

// fleetStatusOf turns the fleet view into crawl status's form.
func fleetStatusOf(v fleet.View) fleetStatus {
	st := fleetStatus{
		Status: crawler.Status{
			UpdatedAt: v.Now,
			Fetched:   v.Counts.Fetched, Failed: v.Counts.Failed, Excluded: v.Counts.Excluded,
			Queued: v.Counts.Queued, InFlight: v.Counts.InFlight,
			FailedBy: v.Counts.FailedBy, ExcludedBy: v.Counts.ExcludedBy,
			Hosts: []crawler.HostStatus{},
		},
		Crawl: v.Crawl, Partitions: v.Partitions, PartitionsFree: v.PartitionsFree,
		Outbox: v.Outbox, Inbox: v.Inbox, HostsQueued: v.HostsQueued, Workers: v.Workers,
		SetAside: v.SetAside, Repaired: v.Repaired, DamagedCount: v.DamagedCount, DamagedSamples: v.Damaged,
	}
	if st.Workers == nil {
		st.Workers = []fleet.WorkerView{}
	}
	for _, w := range v.Workers {
		if w.State == fleet.WorkerAlive {
			st.WorkersAlive++
		}
	}
	st.Running = st.WorkersAlive > 0
	return st
}

// printFleetStatus prints st for a reader: the totals, then one line per worker.
func printFleetStatus(w io.Writer, st fleetStatus, target fleet.Target) {
	state := "stopped (no worker alive)"
	if st.Running {
		state = fmt.Sprintf("running (%d %s alive)", st.WorkersAlive, plural(st.WorkersAlive, "worker", "workers"))
	}
	fmt.Fprintf(w, "crawl %q in the Redis at %s: %s\n", st.Crawl, target, state)
	fmt.Fprintf(w, "fetched %d  failed %d  excluded %d  queued %d  in flight %d\n", st.Fetched, st.Failed, st.Excluded, st.Queued, st.InFlight)
	fmt.Fprintf(w, "%d %s with URLs queued; %d %s waiting to be forwarded, %d %s for their partitions' owners; %d partitions, %d held by no worker\n",
		st.HostsQueued, plural(st.HostsQueued, "host", "hosts"), st.Outbox, plural(st.Outbox, "page's links", "pages' links"),
		st.Inbox, plural(st.Inbox, "batch of URLs", "batches of URLs"), st.Partitions, st.PartitionsFree)
	printReasons(w, "failed", st.FailedBy)
	printReasons(w, "excluded", st.ExcludedBy)
	if st.SetAside > 0 || st.Repaired > 0 {
		fmt.Fprintf(w, "damage found in Redis: %d unreadable %s set aside (in the partitions' bad lists, crawl:%s:{P}:bad), %d damaged %s repaired\n",
			st.SetAside, plural(st.SetAside, "value", "values"), st.Crawl, st.Repaired, plural(st.Repaired, "value", "values"))
	}
	if st.DamagedCount > 0 {
		fmt.Fprintf(w, "%d damaged %s read as 0 until the partition's owner recounts:\n", st.DamagedCount, plural(st.DamagedCount, "counter", "counters"))
		for _, d := range st.DamagedSamples {
			fmt.Fprintf(w, "  %s\n", termsafe.Escape(strings.TrimPrefix(d, "fleet: bad value in Redis: ")))
		}
	}
	if len(st.Workers) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%-24s %-5s %10s %8s %14s  %s\n", "worker", "state", "partitions", "pages", "last heartbeat", "where")
	for _, wv := range st.Workers {
		beat := "-"
		if wv.Heartbeat != nil {
			beat = fmt.Sprintf("%.1fs ago", st.UpdatedAt.Sub(*wv.Heartbeat).Seconds())
		}
		where := strings.Trim(wv.Host+":"+wv.Data, ":")
		fmt.Fprintf(w, "%-24s %-5s %10d %8d %14s  %s\n", termsafe.Escape(wv.ID), wv.State, len(wv.Partitions), wv.Pages, beat, termsafe.Escape(dash(where)))
	}
}
