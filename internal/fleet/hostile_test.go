package fleet

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/redis/go-redis/v9"
)

// These tests write hostile values straight into a real redis-server, as any machine of a
// fleet could, and check that what reads them ends quickly, names what is wrong, sets aside
// what cannot be read and goes on with the rest (docs/guarantees.md "Hostile contents in
// Redis").

// hostileCtx bounds each call of a test: a script looping in Redis, or a read over a billion
// partitions, ends the test instead of hanging it.
func hostileCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// openRaw opens crawl "t" on rdb as worker without newStore's invariant checks (the tests
// here break them on purpose).
func openRaw(t *testing.T, rdb redis.UniversalClient, worker string, opts *Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), rdb, "t", worker, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A configuration key whose partitions are out of bounds is refused, naming the key, before
// anything is allocated by it: crawl status (ReadView) ran out of memory on 1e9 partitions and
// crawl urls (OpenExisting, then Queued) read every one of them.
func TestHostileConfigRefused(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	for _, cfg := range []string{
		"partitions=100000000 " + configLayout,
		"partitions=65537 " + configLayout,
		"partitions=-4 " + configLayout,
		"partitions=0 " + configLayout,
		"partitions=4x " + configLayout,
		"partitions=99999999999999999999999 " + configLayout,
		"\x1b[31m " + configLayout,
	} {
		ctx := hostileCtx(t)
		if err := rdb.Set(ctx, "crawl:t:config", cfg, 0).Err(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err := ReadView(ctx, rdb, "t")
		if !errors.Is(err, errBadValue) || !strings.Contains(err.Error(), "crawl:t:config") || strings.Contains(err.Error(), "\x1b") {
			t.Errorf("ReadView of config %q: %v; want errBadValue naming the key, escaped", cfg, err)
		}
		_, err = OpenExisting(ctx, rdb, "t", "operator")
		if !errors.Is(err, errBadValue) {
			t.Errorf("OpenExisting of config %q: %v; want errBadValue", cfg, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("config %q: refused after %v", cfg, d)
		}
	}
	if _, err := Open(context.Background(), rdb, "u", "w", &Options{Partitions: MaxPartitions + 1}); err == nil {
		t.Errorf("Open with %d partitions: no error", MaxPartitions+1)
	}
}

// Unreadable items in a host's queue are set aside in the partition's bad list and counted;
// the host's other URLs are leased, in order, and the worker is told of each one set aside.
func TestTakeSetsAsideUnreadableItems(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	ctx := hostileCtx(t)
	s := openRaw(t, rdb, "w", &Options{Partitions: 4})
	var told []asideNote
	s.watchSetAside(func(a asideNote) { told = append(told, a) })
	if _, err := s.Add(ctx, entries("h", 2)); err != nil {
		t.Fatal(err)
	}
	p := PartitionOf("h", 4)
	garbage := []string{"", "\xff\xff\xff", string([]byte{itemDepth, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}), "\x40\x05\x7f\x1b[2J"}
	for _, g := range garbage {
		rdb.RPush(ctx, s.k.queue(p, "h"), g)
	}
	if _, err := s.Add(ctx, []frontier.Entry{{URL: "http://h/last", Host: "h"}}); err != nil {
		t.Fatal(err)
	}
	o := mustAcquire(t, s, p)
	var got []string
	for range 10 {
		ls, _, err := s.TakeN(ctx, o, "h", 2)
		if err != nil {
			t.Fatalf("TakeN: %v; want the readable URLs and no error", err)
		}
		for _, l := range ls {
			got = append(got, l.URL)
		}
		if n, _ := rdb.LLen(ctx, s.k.queue(p, "h")).Result(); n == 0 {
			break
		}
	}
	if want := "http://h/0 http://h/1 http://h/last"; strings.Join(got, " ") != want {
		t.Errorf("leased %q; want %q", got, want)
	}
	bad, _ := rdb.LRange(ctx, s.k.bad(p), 0, -1).Result()
	if len(bad) != len(garbage) || len(told) != len(garbage) {
		t.Fatalf("bad list %q, told %v; want the %d unreadable items", bad, told, len(garbage))
	}
	for i, b := range bad {
		if b != s.k.queue(p, "h")+"\n"+inFlightPrefix("h")+garbage[i] {
			t.Errorf("bad list entry %d: %q; want its key and the item", i, b)
		}
	}
	if n, _ := rdb.ZCard(ctx, s.k.inflight(p)).Result(); n != 3 {
		t.Errorf("%d in flight; want the 3 URLs leased", n)
	}
	if c, _ := rdb.HGet(ctx, s.k.counts(p), "bad").Int(); c != len(garbage) {
		t.Errorf("counter bad = %d; want %d", c, len(garbage))
	}
	if a := told[0]; a.From != s.k.queue(p, "h") || a.List != s.k.bad(p) || !errors.Is(a.Err, errBadItem) {
		t.Errorf("told %+v; want the queue, the bad list and errBadItem", a)
	}
}

// A new owner returns what was in flight to its queues; a member it cannot read is set aside,
// not a reason to fail the acquire (which kept the partition from every worker).
func TestReclaimSetsAsideUnreadableMembers(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	ctx := hostileCtx(t)
	s := openRaw(t, rdb, "w", &Options{Partitions: 4})
	o := queueAndOwn(t, s, "h", 2)
	if _, _, err := s.TakeN(ctx, o, "h", 2); err != nil {
		t.Fatal(err)
	}
	p := o.Partition
	rdb.ZAdd(ctx, s.k.inflight(p), redis.Z{Score: 1, Member: "\x05ab"}, redis.Z{Score: 1, Member: "\x01h\xff"})
	rdb.HIncrBy(ctx, s.k.counts(p), "queued", 2)
	rdb.HIncrBy(ctx, s.k.counts(p), "inflight", 2)
	n, err := s.Reclaim(ctx, o)
	if err != nil || n != 2 {
		t.Fatalf("Reclaim: %d, %v; want the 2 readable URLs back in the queue", n, err)
	}
	if bad, _ := rdb.LLen(ctx, s.k.bad(p)).Result(); bad != 2 {
		t.Errorf("bad list holds %d; want 2", bad)
	}
	c, _ := rdb.HGetAll(ctx, s.k.counts(p)).Result()
	if c["queued"] != "2" || c["inflight"] != "0" || c["bad"] != "2" {
		t.Errorf("counts %v; want queued 2, inflight 0, bad 2", c)
	}
}

// An outbox payload that cannot be read is set aside; the others are delivered and trimmed.
func TestForwardSetsAsideUnreadablePayloads(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	ctx := hostileCtx(t)
	s := openRaw(t, rdb, "w", &Options{Partitions: 4})
	o := mustAcquire(t, s, 0)
	rdb.RPush(ctx, s.k.outbox(0), "{not json", `{"l":[{"url":"http://a/1","host":"a"}]}`, `{"l":[{"url":"","host":""}]}`)
	rdb.HSet(ctx, s.k.counts(0), "outbox", 3)
	added, err := s.Forward(ctx, o)
	if err != nil || added != 1 {
		t.Fatalf("Forward: %d, %v; want the one readable link queued", added, err)
	}
	if n, _ := rdb.LLen(ctx, s.k.outbox(0)).Result(); n != 0 {
		t.Errorf("outbox holds %d; want it trimmed", n)
	}
	if n, _ := rdb.LLen(ctx, s.k.bad(0)).Result(); n != 2 {
		t.Errorf("bad list holds %d; want the 2 unreadable payloads", n)
	}
}

// A seen log with an element that is not whole 8-byte records, or that is not a list, is read
// or repaired when its owner loads it: the records it holds stay seen, and the worker goes on
// recording new URLs.
func TestSeenLogDamageRepaired(t *testing.T) {
	parallel(t)
	for _, tc := range []struct {
		name     string
		damage   func(ctx context.Context, rdb redis.UniversalClient, key string)
		oldSeen  bool // the URLs recorded before stay seen
		repaired int
	}{
		{"torn", func(ctx context.Context, rdb redis.UniversalClient, key string) { rdb.RPush(ctx, key, "\x01\x02\x03") }, true, 0},
		{"string", func(ctx context.Context, rdb redis.UniversalClient, key string) {
			rdb.Del(ctx, key)
			rdb.Set(ctx, key, "x", 0)
		}, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb := newRedis(t)
			ctx := hostileCtx(t)
			s := openRaw(t, rdb, "w", &Options{Partitions: 1})
			mustAcquire(t, s, 0)
			old := entries("h", 300)
			if n, err := s.Add(ctx, old); err != nil || n != 300 {
				t.Fatalf("Add: %d, %v", n, err)
			}
			tc.damage(ctx, rdb, s.k.seenLog(0))
			s.forgetSeen() // as after a restart: the next use loads the log
			added, err := s.Add(ctx, append(old, frontier.Entry{URL: "http://h/new", Host: "h"}))
			want := 1
			if !tc.oldSeen {
				want = 301
			}
			if err != nil || added != want {
				t.Fatalf("Add of the URLs seen and a new one: %d added, %v; want %d", added, err, want)
			}
			if r, _ := rdb.HGet(ctx, s.k.counts(0), "repaired").Int(); r != tc.repaired {
				t.Errorf("repaired counts %d, want %d", r, tc.repaired)
			}
		})
	}
}

// Counters that cannot be right (negative, not numbers, too large, or URLs counted queued in a
// partition that lists no host), unreadable queue items and an in-flight deadline no lease
// can have do not stall a worker: it recounts
// the counters of its partitions from their keys, sets the items aside, crawls every URL and
// ends. Before, a negative count kept the crawl from ever being idle, a counter that was not
// a number failed every script that changed it, and a bad item failed every round as "Redis
// unreachable".
func TestHostileCountsAndItemsDoNotStallTheWorker(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	ctx := hostileCtx(t)
	s := openRaw(t, rdb, "a", &Options{Partitions: 16, LeaseTTL: 2 * time.Second})
	f := NewFrontier(s.NewKeeper(), FrontierOptions{Refresh: 10 * time.Millisecond})
	hosts := []string{"h0", "h1", "h2", "h3", "h4"}
	if _, err := s.Add(ctx, []frontier.Entry{{URL: "http://h0/0", Host: "h0"}}); err != nil {
		t.Fatal(err)
	}
	p0 := PartitionOf("h0", 16)
	rdb.RPush(ctx, s.k.queue(p0, "h0"), "\xff", "\x80garbage")
	rdb.HSet(ctx, s.k.counts(p0), "fetched", "lots", "failed:\x1b[2J", "3")
	rdb.HSet(ctx, s.k.counts(PartitionOf("h1", 16)), "queued", "-7")
	rdb.HSet(ctx, s.k.counts(PartitionOf("h2", 16)), "inflight", "1e3", "outbox", "99999999999999999999")
	idle := 0 // a partition with no host and URLs counted queued
	for slices.Contains(hostPartitions(hosts), idle) {
		idle++
	}
	rdb.HSet(ctx, s.k.counts(idle), "queued", "5")
	rdb.SAdd(ctx, s.k.active(), idle)
	runFrontier(t, f)
	waitOwned(t, f, 16)
	// once the worker holds every partition (a new owner reclaims what is in flight): a URL in
	// flight whose deadline is in year 33658, which no lease of the worker can have
	p3 := PartitionOf("h3", 16)
	far := itemOf(frontier.Entry{URL: "http://h3/far", Host: "h3"}, 0).inFlightMember()
	pipe := rdb.TxPipeline()
	pipe.ZAdd(ctx, s.k.inflight(p3), redis.Z{Score: 1e15, Member: far})
	pipe.HIncrBy(ctx, s.k.counts(p3), "queued", 1)
	pipe.HIncrBy(ctx, s.k.counts(p3), "inflight", 1)
	pipe.SAdd(ctx, s.k.active(), p3)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	links := gridLinks(hosts, 6)
	done := crawlLoop(t, []*Frontier{f}, links, 30*time.Second)
	seen := map[string]bool{}
	for _, u := range done {
		seen[u] = true
	}
	if len(done) != 31 || len(seen) != 31 || !seen["http://h3/far"] {
		t.Errorf("completed %d URLs, %d distinct; want the 30 of the web and the one in flight too long, once each", len(done), len(seen))
	}
	st := f.Stats()
	if st.SetAside != 2 || st.Recounted == 0 || st.Outages != 0 {
		t.Errorf("stats %+v; want 2 set aside, partitions recounted, no outage", st)
	}
	v, err := ReadView(ctx, rdb, "t")
	if err != nil {
		t.Fatal(err)
	}
	if v.SetAside != 2 || v.Repaired == 0 || v.DamagedCount != 0 || v.Counts.Queued != 0 {
		t.Errorf("view: set aside %d, repaired %d, damaged %d %q, queued %d; want 2, some, 0, 0",
			v.SetAside, v.Repaired, v.DamagedCount, v.Damaged, v.Counts.Queued)
	}
	if n := v.Counts.FailedBy["unreadable"]; n != 3 || len(v.Counts.FailedBy) != 1 {
		t.Errorf("failed by %v; want the hostile reason's 3 as unreadable", v.Counts.FailedBy)
	}
}

// hostPartitions are the partitions of hosts among 16.
func hostPartitions(hosts []string) []int {
	var ps []int
	for _, h := range hosts {
		ps = append(ps, PartitionOf(h, 16))
	}
	return ps
}

// A view of damaged counters names them, escaped, reads them as 0 and says the crawl is not
// idle; reasons that are not the crawl's are counted as "unreadable".
func TestReadViewNamesDamagedCounters(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	ctx := hostileCtx(t)
	s := openRaw(t, rdb, "w", &Options{Partitions: 4})
	if _, err := s.Add(ctx, entries("h", 1)); err != nil {
		t.Fatal(err)
	}
	p := PartitionOf("h", 4)
	rdb.HSet(ctx, s.k.counts(p), "queued", "-1", "excluded:\x1b]0;x\a", "2")
	v, err := ReadView(ctx, rdb, "t")
	if err != nil {
		t.Fatal(err)
	}
	if v.DamagedCount != 1 || !strings.Contains(v.Damaged[0], s.k.counts(p)+" field queued") || v.Counts.Queued != 0 {
		t.Errorf("view damaged %d %q, queued %d; want the queued counter named, read as 0", v.DamagedCount, v.Damaged, v.Counts.Queued)
	}
	if v.Counts.ExcludedBy["unreadable"] != 2 || len(v.Counts.ExcludedBy) != 1 {
		t.Errorf("excluded by %v; want the hostile reason as unreadable", v.Counts.ExcludedBy)
	}
	if idle, err := s.Idle(ctx); err != nil || idle {
		t.Errorf("Idle with a damaged counter: %v, %v; want false", idle, err)
	}
}

// Times no worker writes are ignored: a retry due more than maxRetryDelay ahead is due now
// (it kept its host, and the crawl, waiting for years), a heartbeat whose lease would end
// more than MaxLeaseTTL ahead is no lease (it kept its partitions from every worker), and a
// damaged epoch starts again above any drawn (INCR failed on it: no acquire ever succeeded).
func TestAbsurdTimesAndEpochsIgnored(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	ctx := hostileCtx(t)
	s := openRaw(t, rdb, "w", &Options{Partitions: 4})
	o := queueAndOwn(t, s, "h", 1)
	p := o.Partition
	it := itemOf(frontier.Entry{URL: "http://h/later", Host: "h"}, 1).encode()
	rdb.ZAdd(ctx, s.k.delayed(p, "h"), redis.Z{Score: 1e15, Member: it})
	rdb.HIncrBy(ctx, s.k.counts(p), "queued", 1)
	rdb.HIncrBy(ctx, s.k.counts(p), "delayed", 1)
	ls, _, err := s.TakeN(ctx, o, "h", 4)
	if err != nil || len(ls) != 2 {
		t.Errorf("TakeN with a retry due in year 33658: %d leases, %v; want both URLs", len(ls), err)
	}

	q := (p + 1) % 4
	rdb.Set(ctx, s.k.owner(q), "7:ghost", 0)
	rdb.ZAdd(ctx, s.k.workers(), redis.Z{Score: 1e300, Member: "ghost"})
	rdb.Set(ctx, s.k.epoch(q), "not a number", 0)
	o2, ok, err := s.Acquire(ctx, time.Now(), q)
	if err != nil || !ok || o2.Epoch <= 7 {
		t.Errorf("Acquire from a ghost whose lease ends in 1e300 ms, epoch damaged: %+v, %v, %v; want it acquired, epoch above 7", o2, ok, err)
	}
	if n, _ := rdb.ZScore(ctx, s.k.workers(), "ghost").Result(); n != 0 {
		if _, err := s.heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := rdb.ZScore(ctx, s.k.workers(), "ghost").Result(); !errors.Is(err, redis.Nil) {
			t.Errorf("the ghost's heartbeat is still there after a heartbeat: %v", err)
		}
	}
}
