package fleet

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// BenchmarkRedisNewURL measures Redis' CPU per new URL where pages are link-rich and most links
// are new (BENCHMARKS.md "Redis work per new URL"):
//
//	go test ./internal/fleet -run '^$' -bench RedisNewURL -benchtime 1x
//
// One host's partition holds newURLSeen URLs; then newURLPages of its pages are completed in
// group commits of newURLBatch (CompleteBatch), each linking to newURLLinks URLs of the host,
// newURLNew of them never seen before. Redis' CPU is INFO cpu's used_cpu_user + used_cpu_sys
// over the completions alone (the leases are taken before), and the scripts' own time INFO
// commandstats' usec of evalsha.
func BenchmarkRedisNewURL(b *testing.B) {
	for range b.N {
		cpu, script := measureNewURL(b)
		b.ReportMetric(cpu, "redis-CPU-µs/new-URL")
		b.ReportMetric(script, "script-µs/new-URL")
	}
}

const (
	newURLSeen  = 200_000
	newURLPages = 4096
	newURLBatch = 16
	newURLLinks = 40
	newURLNew   = 35
)

func measureNewURL(b *testing.B) (cpuPerURL, scriptPerURL float64) {
	ctx := context.Background()
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	b.Cleanup(func() { rdb.Close() })
	s, err := Open(ctx, rdb, "newurl", "bench", &Options{LeaseTTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	const host = "www.site.example"
	url := func(i int) frontier.Entry {
		return frontier.Entry{URL: fmt.Sprintf("https://%s/articles/%d/some-title-%d.html", host, i/100, i), Host: host, Depth: 2, Parent: "https://" + host + "/"}
	}
	next := 0
	for next < newURLSeen {
		es := make([]frontier.Entry, 0, 20_000)
		for range 20_000 {
			es = append(es, url(next))
			next++
		}
		if _, err := s.Add(ctx, es); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.heartbeat(ctx); err != nil {
		b.Fatal(err)
	}
	o, ok, err := s.Acquire(ctx, time.Now(), PartitionOf(host, s.Partitions()))
	if err != nil || !ok {
		b.Fatalf("acquire: %v %v", ok, err)
	}
	for { // the URLs added before the partition had an owner wait in its inbox
		n, err := rdb.LLen(ctx, s.k.inbox(o.Partition)).Result()
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			break
		}
		if _, err := s.Drain(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	var ls []Lease
	for len(ls) < newURLPages {
		got, _, err := s.TakeN(ctx, o, host, 256)
		if err != nil || len(got) == 0 {
			b.Fatalf("take: %d leases, %v", len(got), err)
		}
		ls = append(ls, got...)
	}
	ls = ls[:newURLPages]
	seen := 0 // the seen links cycle through the first URLs
	var batches [][]Done
	for i := 0; i < len(ls); i += newURLBatch {
		var ds []Done
		for _, l := range ls[i : i+newURLBatch] {
			links := make([]frontier.Entry, 0, newURLLinks)
			for range newURLNew {
				links = append(links, url(next))
				next++
			}
			for len(links) < newURLLinks {
				links = append(links, url(seen%newURLSeen))
				seen += 7919
			}
			ds = append(ds, Done{Lease: l, Result: frontier.Result{Kind: frontier.Fetched, Links: links}})
		}
		batches = append(batches, ds)
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	cpu0 := redisCPU(b, rdb)
	b.ResetTimer()
	for _, ds := range batches {
		in, err := s.CompleteBatch(ctx, o, ds)
		if err != nil {
			b.Fatal(err)
		}
		for _, ok := range in {
			if !ok {
				b.Fatal("a leased URL was not in flight")
			}
		}
	}
	b.StopTimer()
	cpu := redisCPU(b, rdb) - cpu0
	newURLs := float64(newURLPages * newURLNew)
	fps, err := s.loadSeen(ctx, o)
	if err != nil || len(fps) != newURLSeen+newURLPages*newURLNew {
		b.Fatalf("seen log holds %d URLs (%v), want %d", len(fps), err, newURLSeen+newURLPages*newURLNew)
	}
	usec := evalUsec(b, rdb)
	b.Logf("%d pages in batches of %d, %d links each, %d new, over %d seen: Redis CPU %.2f µs per new URL (%.3f ms per page), scripts %.2f µs per new URL",
		newURLPages, newURLBatch, newURLLinks, newURLNew, newURLSeen, cpu.Seconds()*1e6/newURLs, cpu.Seconds()*1e3/newURLPages, usec/newURLs)
	return cpu.Seconds() * 1e6 / newURLs, usec / newURLs
}

// evalUsec is the usec INFO commandstats gives evalsha and eval together.
func evalUsec(b *testing.B, rdb *redis.Client) float64 {
	stats, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var usec float64
	for _, line := range strings.Split(stats, "\r\n") {
		name, rest, ok := strings.Cut(line, ":")
		if name != "cmdstat_evalsha" && name != "cmdstat_eval" || !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "usec="); ok {
				n, _ := strconv.ParseFloat(v, 64)
				usec += n
			}
		}
	}
	return usec
}
