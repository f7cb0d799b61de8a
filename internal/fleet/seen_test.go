package fleet

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/crawl-project/crawl/frontier"
	"github.com/redis/go-redis/v9"
)

// An owner whose view of its partition's seen-set header is far behind (another worker's
// adds split its buckets 150 times since) has its completion refused as stale, writing
// nothing, and runs it again with the header the refusal gave: the URLs seen stay seen and
// the new link is queued once. An add reads the headers first and runs once.
func TestSeenStaleViewRunsAgain(t *testing.T) {
	parallel(t)
	rdb, _ := newRedisServer(t)
	ctx := context.Background()
	a := newStore(t, rdb, "a", &Options{Partitions: 1})
	b := newStore(t, rdb, "b", &Options{Partitions: 1})
	if added, err := a.Add(ctx, entries("h", 10)); err != nil || added != 10 {
		t.Fatalf("a adds 10: %d, %v", added, err)
	}
	o := mustAcquire(t, a, 0)
	ls, _, err := a.TakeN(ctx, o, "h", 1)
	if err != nil || len(ls) != 1 {
		t.Fatalf("take: %v, %v", ls, err)
	}
	var many []frontier.Entry
	for i := range 20_000 {
		many = append(many, frontier.Entry{URL: fmt.Sprintf("http://h/b%d", i), Host: "h"})
	}
	if added, err := b.Add(ctx, many); err != nil || added != len(many) {
		t.Fatalf("b adds %d: %d, %v", len(many), added, err)
	}
	n := seenBuckets(t, a, 0)
	if v := a.seenViewOf(0); v.n >= n-seenSlackMax {
		t.Fatalf("a's view %+v is not stale beyond the slack (header n=%d)", v, n)
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	links := append(many[:500:500], frontier.Entry{URL: "http://h/new", Host: "h"})
	in, err := a.CompleteBatch(ctx, o, []Done{{Lease: ls[0], Result: frontier.Result{Kind: frontier.Fetched, Links: links}}})
	if err != nil || len(in) != 1 || !in[0] {
		t.Fatalf("complete with 500 links seen and 1 new: %v, %v", in, err)
	}
	if calls := executed(t, rdb); calls["evalsha"] != 2 {
		t.Errorf("%d scripts run, want 2 (refused as stale, then run): %v", calls["evalsha"], calls)
	}
	if v := a.seenViewOf(0); v.n != seenBuckets(t, a, 0) || v.urls != 20_011 {
		t.Errorf("a's view after: %+v, want the header (n=%d, urls=20011)", v, seenBuckets(t, a, 0))
	}
	c, err := a.Counts(ctx)
	if err != nil || c.Queued != 20_010 || c.Fetched != 1 {
		t.Errorf("counts %+v, %v; want 20010 queued, 1 fetched", c, err)
	}

	for i := range many[:6000] { // 6,000 more by b: a's view is again behind beyond the slack
		many[i].URL += "-more"
	}
	if added, err := b.Add(ctx, many[:6000]); err != nil || added != 6000 {
		t.Fatalf("b adds 6000: %d, %v", added, err)
	}
	if v := a.seenViewOf(0); v.n >= seenBuckets(t, a, 0)-seenSlackMax {
		t.Fatalf("a's view %+v is not stale beyond the slack (header n=%d)", v, seenBuckets(t, a, 0))
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if added, err := a.Add(ctx, append(many[:1000:1000], frontier.Entry{URL: "http://h/new2", Host: "h"})); err != nil || added != 1 {
		t.Fatalf("a adds 1000 seen and 1 new: %d, %v", added, err)
	}
	if calls := executed(t, rdb); calls["evalsha"] != 1 {
		t.Errorf("%d scripts run for an add, want 1 (the header read first): %v", calls["evalsha"], calls)
	}
}

// A seen-set bucket key that is not a set (damage, or another program's key) fails no script:
// it is deleted, counted as repaired, and the URLs go on being recorded.
func TestSeenBucketNotASet(t *testing.T) {
	parallel(t)
	rdb, _ := newRedisServer(t)
	ctx := context.Background()
	s := newStore(t, rdb, "w", &Options{Partitions: 1})
	rdb.Set(ctx, s.k.bucket(0, 0), "not a set", 0)
	if added, err := s.Add(ctx, entries("h", 300)); err != nil || added != 300 {
		t.Fatalf("add 300 over a bucket that is a string: %d, %v", added, err)
	}
	if added, err := s.Add(ctx, entries("h", 300)); err != nil || added != 0 {
		t.Fatalf("add them again: %d added, %v; want none", added, err)
	}
	ps, err := s.PartitionCounts(ctx)
	if err != nil || len(ps) != 1 || ps[0].Repaired != 1 {
		t.Errorf("counts %+v, %v; want 1 repaired", ps, err)
	}
}

// A seen-set bucket holding a member that is not a number (damage: Redis keeps such a set as a
// hash table) is split like any other: the member stays where it is, read as hash 0, and the
// URLs go on being recorded, each once.
func TestSeenBucketMemberNotANumber(t *testing.T) {
	parallel(t)
	rdb, _ := newRedisServer(t)
	ctx := context.Background()
	s, err := Open(ctx, rdb, "t", "w", &Options{Partitions: 1}) // not newStore: its checks refuse the damage
	if err != nil {
		t.Fatal(err)
	}
	rdb.SAdd(ctx, s.k.bucket(0, 0), "not a number", "12x")
	if added, err := s.Add(ctx, entries("h", 300)); err != nil || added != 300 {
		t.Fatalf("add 300 over a bucket with members that are not numbers: %d, %v", added, err)
	}
	if n := seenBuckets(t, s, 0); n < 2 {
		t.Fatalf("%d buckets after 300 URLs: bucket 0 was never split", n)
	}
	if added, err := s.Add(ctx, entries("h", 300)); err != nil || added != 0 {
		t.Fatalf("add them again: %d added, %v; want none", added, err)
	}
	if ok, err := rdb.SIsMember(ctx, s.k.bucket(0, 0), "not a number").Result(); err != nil || !ok {
		t.Errorf("the member that is not a number left bucket 0: %v, %v", ok, err)
	}
}

// A completion whose worker knows its partition's seen-set header declares the buckets of the
// splits it may do and of seenSlackMin more, not seenSlackMax more: each split allowed is two
// more keys a script's Redis reads and makes Lua strings of. Once another worker's adds split
// the partition beyond that, the next completion is refused as stale and run again, and the
// partition's scripts allow more splits (seenWiden), down again to seenSlackMin as they fit.
func TestSeenSlackFollowsOtherWriters(t *testing.T) {
	parallel(t)
	rdb, _ := newRedisServer(t)
	ctx := context.Background()
	a := newStore(t, rdb, "a", &Options{Partitions: 1})
	b := newStore(t, rdb, "b", &Options{Partitions: 1})
	for i := 0; i < 100_000; i += 20_000 {
		var es []frontier.Entry
		for j := i; j < i+20_000; j++ {
			es = append(es, frontier.Entry{URL: fmt.Sprintf("http://h/%d", j), Host: "h"})
		}
		if added, err := a.Add(ctx, es); err != nil || added != len(es) {
			t.Fatalf("a adds %d: %d, %v", len(es), added, err)
		}
	}
	o := mustAcquire(t, a, 0)
	ls, _, err := a.TakeN(ctx, o, "h", 3)
	if err != nil || len(ls) != 3 {
		t.Fatalf("take 3: %v, %v", ls, err)
	}
	next := 0
	page := func(l Lease) []Done {
		var links []frontier.Entry
		for range 40 {
			links = append(links, frontier.Entry{URL: fmt.Sprintf("http://h/new%d", next), Host: "h"})
			next++
		}
		return []Done{{Lease: l, Result: frontier.Result{Kind: frontier.Fetched, Links: links}}}
	}
	if err := rdb.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err(); err != nil {
		t.Fatal(err)
	}
	rdb.Do(ctx, "SLOWLOG", "RESET")
	v := a.seenViewOf(0)
	if in, err := a.CompleteBatch(ctx, o, page(ls[0])); err != nil || !in[0] {
		t.Fatalf("complete a page of 40 new links: %v, %v", in, err)
	}
	// 7 keys, the result's delayed set, the host's queue, and the buckets: at most two a
	// member (no power of two lies between the counts the script may reach) and two a split.
	need := (v.urls+41+seenLoad-1)/seenLoad - v.n
	most := 7 + 1 + 1 + 2*41 + 2*(max(need, 0)+seenSlackMin) + 1
	if keys := completionKeys(t, rdb); keys > most {
		t.Errorf("the completion declared %d keys, want at most %d (header n=%d, urls=%d)", keys, most, v.n, v.urls)
	}

	var more []frontier.Entry // 1,000 URLs by b: 7 or 8 splits, beyond a's slack
	for i := range 1000 {
		more = append(more, frontier.Entry{URL: fmt.Sprintf("http://h/b%d", i), Host: "h"})
	}
	if added, err := b.Add(ctx, more); err != nil || added != len(more) {
		t.Fatalf("b adds %d: %d, %v", len(more), added, err)
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if in, err := a.CompleteBatch(ctx, o, page(ls[1])); err != nil || !in[0] {
		t.Fatalf("complete a second page: %v, %v", in, err)
	}
	if calls := executed(t, rdb); calls["evalsha"] != 2 {
		t.Errorf("%d scripts run, want 2 (refused as stale, then run): %v", calls["evalsha"], calls)
	}
	if k := a.seenSlackOf(0); k != 2*seenSlackMin-1 {
		t.Errorf("slack after a stale run and one that fitted: %d, want %d", k, 2*seenSlackMin-1)
	}
	if in, err := a.CompleteBatch(ctx, o, page(ls[2])); err != nil || !in[0] {
		t.Fatalf("complete a third page: %v, %v", in, err)
	}
	if k := a.seenSlackOf(0); k != seenSlackMin {
		t.Errorf("slack after two that fitted: %d, want %d", k, seenSlackMin)
	}
	c, err := a.Counts(ctx)
	if err != nil || c.Queued != 100_000+1000+120-3 || c.Fetched != 3 {
		t.Errorf("counts %+v, %v; want %d queued, 3 fetched", c, err, 100_000+1000+120-3)
	}
}

// completionKeys is the number of keys of the last script run (SLOWLOG, logging every
// command).
func completionKeys(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	logs, err := rdb.SlowLogGet(context.Background(), 128).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range logs { // newest first
		if len(l.Args) > 2 && strings.EqualFold(l.Args[0], "evalsha") {
			n, err := strconv.Atoi(l.Args[2])
			if err != nil {
				t.Fatalf("numkeys %q: %v", l.Args[2], err)
			}
			return n
		}
	}
	t.Fatal("no script in the slow log")
	return 0
}
