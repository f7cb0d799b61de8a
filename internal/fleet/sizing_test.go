package fleet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/aimd"
	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/hostlimit"
	"github.com/crawl-project/crawl/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Sizing figures for docs/DESIGN.md, measured on a real redis-server (BENCHMARKS.md, "Redis memory
// per URL and per host"):
//
//	go test ./internal/fleet -run '^$' -bench RedisMemory -benchtime 1x -timeout 30m
//
// It adds sizingURLs URLs over sizingHosts hosts through Store.Add into an empty server and
// reads INFO memory's used_memory: per URL queued (seen-set entry, queue item, hosts-set member
// and queue key), then per URL only seen (the same URLs given to Exclude in another empty
// crawl: the seen-set alone), then per host (the politeness state a registry saves, and the
// extra cost of the same URLs spread over ten times as many hosts). Then a completion loop
// (Take, Complete with links, and Forward after every page, or after every forwardBatch pages
// of a partition) counts the Redis commands per page from INFO commandstats.
func BenchmarkRedisMemory(b *testing.B) {
	for _, name := range []string{"memory"} {
		b.Run(name, func(b *testing.B) {
			for range b.N {
				m := measureMemory(b)
				b.ReportMetric(m.perQueued, "B/queued-URL")
				b.ReportMetric(m.perSeen, "B/seen-URL")
				b.ReportMetric(m.perQueueKey, "B/host-queue")
				b.ReportMetric(m.perHostState, "B/host-state")
			}
		})
	}
	for _, every := range []int{1, forwardBatch} {
		b.Run("ops-per-page/forward-every="+strconv.Itoa(every), func(b *testing.B) {
			for range b.N {
				o := measureOps(b, every)
				b.ReportMetric(o.roundTrips, "round-trips/page")
				b.ReportMetric(o.scripts, "scripts/page")
				b.ReportMetric(o.commands, "commands/page")
				b.ReportMetric(o.pagesPerSec, "pages/s")
				b.ReportMetric(o.cpuPerPage, "redis-CPU-µs/page")
			}
		})
	}
}

const (
	sizingURLs  = 1_000_000
	sizingHosts = 10_000
)

// sizingURL is URL i of the sizing crawl, on one of hosts hosts: a realistic length (about
// 60 bytes) and shape.
func sizingURL(i, hosts int) frontier.Entry {
	h := fmt.Sprintf("www.site%d.example", i%hosts)
	return frontier.Entry{URL: fmt.Sprintf("https://%s/articles/%d/some-title-%d.html", h, i/hosts, i), Host: h, Depth: 2, Parent: "https://" + h + "/"}
}

type memoryFigures struct{ perQueued, perSeen, perQueueKey, perHostState float64 }

// measureMemory fills fresh servers as the doc comment of BenchmarkRedisMemory says.
func measureMemory(b *testing.B) memoryFigures {
	ctx := context.Background()
	opts := &Options{}
	fill := func(rdb *redis.Client, crawl string, hosts int, exclude bool) float64 {
		s, err := Open(ctx, rdb, crawl, "bench", opts)
		if err != nil {
			b.Fatal(err)
		}
		before := usedMemory(b, rdb)
		const batch = 20_000
		for start := 0; start < sizingURLs; start += batch {
			es := make([]frontier.Entry, 0, batch)
			for i := start; i < start+batch; i++ {
				es = append(es, sizingURL(i, hosts))
			}
			if exclude {
				ex := make([]frontier.Exclusion, len(es))
				for i, e := range es {
					ex[i] = frontier.Exclusion{Entry: e, Reason: frontier.ReasonScope}
				}
				err = s.Exclude(ctx, ex)
			} else {
				_, err = s.Add(ctx, es)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		return float64(usedMemory(b, rdb) - before)
	}
	server := func() *redis.Client {
		srv := redistest.Start(b)
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
		b.Cleanup(func() { rdb.Close() })
		return rdb
	}
	var m memoryFigures
	queued := fill(server(), "q", sizingHosts, false)
	seen := fill(server(), "s", sizingHosts, true)
	spread := fill(server(), "h", 10*sizingHosts, false)
	m.perQueued = queued / sizingURLs
	m.perSeen = seen / sizingURLs
	m.perQueueKey = (spread - queued) / (9 * sizingHosts)

	// Politeness state: what a worker's registry saves for hosts it has fetched from.
	rdb := server()
	s, err := Open(ctx, rdb, "p", "bench", opts)
	if err != nil {
		b.Fatal(err)
	}
	k := s.NewKeeper()
	if _, err := k.Tick(ctx, time.Now()); err != nil {
		b.Fatal(err)
	}
	reg := hostlimit.New(hostlimit.Config{}, k.HostStates(time.Minute))
	before := usedMemory(b, rdb)
	now := time.Now()
	for i := range sizingHosts {
		h := fmt.Sprintf("www.site%d.example", i)
		tk, _ := reg.TryAdmit(now, h)
		if tk == nil {
			b.Fatalf("%s: first request not admitted", h)
		}
		tk.Done(now.Add(80*time.Millisecond), aimd.Outcome{Sent: now, Latency: 80 * time.Millisecond, InFlight: 1})
	}
	if err := reg.Flush(); err != nil {
		b.Fatal(err)
	}
	m.perHostState = float64(usedMemory(b, rdb)-before) / sizingHosts
	b.Logf("%.1f B per queued URL, %.1f per seen URL, %.1f per host queue key, %.1f per host state",
		m.perQueued, m.perSeen, m.perQueueKey, m.perHostState)
	return m
}

type opsFigures struct{ roundTrips, scripts, commands, pagesPerSec, cpuPerPage float64 }

// countHook counts what the client sends: round trips (a pipeline is one) and commands.
type countHook struct{ trips, cmds int }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.trips++
		h.cmds++
		return next(ctx, cmd)
	}
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.trips++
		h.cmds += len(cmds)
		return next(ctx, cmds)
	}
}

// Completion loop: opsHosts hosts, one worker holding every partition; each page fetched
// links to opsLinks URLs, opsNew of them new (on random hosts), the others already seen.
const (
	opsHosts = 1000
	opsPages = 10_000
	opsLinks = 40
	opsNew   = 4
)

// measureOps runs the completion loop, forwarding a partition's outbox after every
// forwardEvery of its pages, and reads INFO commandstats.
func measureOps(b *testing.B, forwardEvery int) opsFigures {
	ctx := context.Background()
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	b.Cleanup(func() { rdb.Close() })
	s, err := Open(ctx, rdb, "ops", "bench", &Options{LeaseTTL: time.Hour}) // no renewals in the loop
	if err != nil {
		b.Fatal(err)
	}
	k := s.NewKeeper()
	if _, err := k.Tick(ctx, time.Now()); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	next := 0 // URLs 0 … next-1 have been linked to
	newURL := func() frontier.Entry { e := sizingURL(next, opsHosts); next++; return e }
	var seeds []frontier.Entry
	for range 2 * opsHosts {
		seeds = append(seeds, newURL())
	}
	if _, err := s.Add(ctx, seeds); err != nil {
		b.Fatal(err)
	}
	owned := k.Owned(time.Now())
	hook := &countHook{}
	rdb.AddHook(hook)
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	hook.trips, hook.cmds = 0, 0
	start := time.Now()
	pages := 0
	pending := map[int]int{} // outbox payloads per partition (one per completed page)
	forward := func(o Ownership) {
		if _, err := s.Forward(ctx, o); err != nil {
			b.Fatal(err)
		}
		pending[o.Partition] -= min(pending[o.Partition], forwardBatch)
	}
	cpu0 := redisCPU(b, rdb)
	for pages < opsPages {
		progress := false
		for _, o := range owned {
			hosts, err := s.Hosts(ctx, o)
			if err != nil {
				b.Fatal(err)
			}
			slices.Sort(hosts)
			for _, h := range hosts {
				l, ok, _, err := s.Take(ctx, o, h)
				if err != nil {
					b.Fatal(err)
				}
				if !ok {
					continue
				}
				links := make([]frontier.Entry, 0, opsLinks)
				for range opsNew {
					links = append(links, newURL())
				}
				for len(links) < opsLinks {
					links = append(links, sizingURL(rng.IntN(next), opsHosts))
				}
				if err := s.Complete(ctx, o, l, frontier.Result{Kind: frontier.Fetched, Links: links}); err != nil {
					b.Fatal(err)
				}
				pending[o.Partition]++
				if pending[o.Partition] >= forwardEvery {
					forward(o)
				}
				pages++
				progress = true
			}
		}
		if !progress { // the links wait in outboxes: deliver them
			for _, o := range owned {
				forward(o)
			}
		}
	}
	for _, o := range owned { // deliver every link found, so that each page's work is counted
		for pending[o.Partition] > 0 {
			forward(o)
		}
	}
	elapsed := time.Since(start)
	cpu := redisCPU(b, rdb) - cpu0
	trips, cmds := hook.trips, hook.cmds
	stats, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	executed, scripts := 0, 0
	var lines []string
	for _, line := range strings.Split(stats, "\r\n") {
		name, rest, ok := strings.Cut(line, ":calls=")
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		name = strings.TrimPrefix(name, "cmdstat_")
		if name == "info" || name == "config|resetstat" {
			continue
		}
		executed += n
		if name == "evalsha" || name == "eval" {
			scripts += n
		}
		lines = append(lines, fmt.Sprintf("%s %.2f", name, float64(n)/float64(pages)))
	}
	slices.Sort(lines)
	b.Logf("%d pages (%d links each, %d new), forward every %d: %v, Redis CPU %.1f µs per page: %.2f round trips, %.2f commands sent, %.2f scripts, %.2f commands executed per page; per command: %s",
		pages, opsLinks, opsNew, forwardEvery, elapsed.Round(time.Millisecond), cpu.Seconds()*1e6/float64(pages), float64(trips)/float64(pages), float64(cmds)/float64(pages),
		float64(scripts)/float64(pages), float64(executed)/float64(pages), strings.Join(lines, ", "))
	return opsFigures{
		roundTrips:  float64(trips) / float64(pages),
		scripts:     float64(scripts) / float64(pages),
		commands:    float64(executed) / float64(pages),
		pagesPerSec: float64(pages) / elapsed.Seconds(),
		cpuPerPage:  cpu.Seconds() * 1e6 / float64(pages),
	}
}

// redisCPU is the server's CPU time so far (used_cpu_user + used_cpu_sys of INFO cpu).
func redisCPU(b *testing.B, rdb *redis.Client) time.Duration {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		for _, k := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatal(err)
				}
				total += f
			}
		}
	}
	return time.Duration(total * float64(time.Second))
}
