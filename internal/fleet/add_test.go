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

// executed is how many times Redis ran each command since the last CONFIG RESETSTAT (INFO
// commandstats; a script's calls count).
func executed(t *testing.T, rdb *redis.Client) map[string]int {
	t.Helper()
	stats, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, line := range strings.Split(stats, "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		n[name], _ = strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
	}
	return n
}

// An add touches a host's keys once per host, not once per URL: 2,000 new URLs of two hosts,
// interleaved, under a host budget, added by the partition's owner, cost the same few commands
// as two URLs would (the seen check is the owner's, in memory; the seen log takes one RPUSH);
// each host's queue keeps its URLs in the order given, a URL given twice is queued once, and
// the budget holds (the URLs over it excluded as "limit").
func TestAddWorksPerHostNotPerURL(t *testing.T) {
	parallel(t)
	rdb, _ := newRedisServer(t)
	ctx := context.Background()
	const budget = 900
	s := newStore(t, rdb, "w", &Options{Partitions: 1, HostBudget: budget})
	mustAcquire(t, s, 0)
	var es []frontier.Entry
	for i := range 1000 {
		for _, h := range []string{"a.example", "b.example"} {
			es = append(es, frontier.Entry{URL: fmt.Sprintf("https://%s/p%d", h, i), Host: h})
		}
		if i%10 == 0 { // and again: a duplicate in the batch
			es = append(es, es[len(es)-1])
		}
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	n, err := s.Add(ctx, es)
	if err != nil || n != 2*budget {
		t.Fatalf("added %d (%v), want %d", n, err, 2*budget)
	}
	calls := executed(t, rdb)
	for _, name := range []string{"hget", "hincrby", "rpush", "hmget", "sadd"} {
		if calls[name] > 4 {
			t.Errorf("%d %s for 2 hosts: the script works per URL, not per host (%v)", calls[name], name, calls)
		}
	}
	for _, h := range []string{"a.example", "b.example"} {
		got, err := rdb.LRange(ctx, s.k.queue(0, h), 0, -1).Result()
		if err != nil || len(got) != budget {
			t.Fatalf("%s: %d queued (%v), want %d", h, len(got), err, budget)
		}
		for i, item := range got {
			u, err := ItemURL(h, item)
			if want := fmt.Sprintf("https://%s/p%d", h, i); err != nil || u != want {
				t.Fatalf("%s: item %d is %q (%v), want %q", h, i, u, err, want)
			}
		}
	}
	c, err := s.Counts(ctx)
	if err != nil || c.Queued != 2*budget || c.ExcludedBy[frontier.ReasonLimit] != 2*(1000-budget) {
		t.Fatalf("counts %+v (%v); want %d queued, %d excluded by limit", c, err, 2*budget, 2*(1000-budget))
	}
}

// Arguments are passed whole, never split on a delimiter: URLs holding NUL, newlines, commas,
// pipes and bytes that are not UTF-8 are queued and read back exactly; exclusions of several
// reasons beside links of the same host keep their own reasons; a group larger than a Lua
// unpack takes at once is pushed whole.
func TestAddKeepsAnyBytesAndBigGroups(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	ctx := context.Background()
	s := newStore(t, rdb, "w", &Options{Partitions: 1})
	mustAcquire(t, s, 0)
	const h = "odd.example"
	odd := []string{"https://odd.example/a\x00b", "https://odd.example/a\nb,c|d", "https://odd.example/\xff\xfe", "https://odd.example/1\x001"}
	var es []frontier.Entry
	for _, u := range odd {
		es = append(es, frontier.Entry{URL: u, Host: h})
	}
	for i := range 2500 {
		es = append(es, frontier.Entry{URL: fmt.Sprintf("https://odd.example/%d", i), Host: h})
	}
	if n, err := s.Add(ctx, es); err != nil || n != len(es) {
		t.Fatalf("added %d (%v), want %d", n, err, len(es))
	}
	got, err := s.rdb.LRange(ctx, s.k.queue(0, h), 0, -1).Result()
	if err != nil || len(got) != len(es) {
		t.Fatalf("%d queued (%v), want %d", len(got), err, len(es))
	}
	for i, item := range got {
		if u, err := ItemURL(h, item); err != nil || u != es[i].URL {
			t.Fatalf("item %d is %q (%v), want %q", i, u, err, es[i].URL)
		}
	}
	ex := []frontier.Exclusion{
		{Entry: frontier.Entry{URL: "https://odd.example/robots\x00", Host: h}, Reason: frontier.ReasonRobots},
		{Entry: frontier.Entry{URL: "https://odd.example/scope", Host: h}, Reason: frontier.ReasonScope},
		{Entry: frontier.Entry{URL: "https://odd.example/robots2", Host: h}, Reason: frontier.ReasonRobots},
		{Entry: frontier.Entry{URL: odd[0], Host: h}, Reason: frontier.ReasonScope}, // seen: stays queued
	}
	if err := s.Exclude(ctx, ex); err != nil {
		t.Fatal(err)
	}
	c, err := s.Counts(ctx)
	if err != nil || c.Queued != len(es) || c.Excluded != 3 || c.ExcludedBy[frontier.ReasonRobots] != 2 || c.ExcludedBy[frontier.ReasonScope] != 1 {
		t.Fatalf("counts %+v (%v); want %d queued, 2 excluded by robots, 1 by scope", c, err, len(es))
	}
}

// A lease of more URLs than a Lua unpack takes at once (a TakeN of 5,000) takes them all, each
// in flight once, in queue order.
func TestTakeNBiggerThanUnpack(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	ctx := context.Background()
	s := newStore(t, rdb, "w", &Options{Partitions: 1})
	const h, n = "big.example", 5000
	var es []frontier.Entry
	for i := range n {
		es = append(es, frontier.Entry{URL: fmt.Sprintf("https://big.example/%d", i), Host: h})
	}
	if _, err := s.Add(ctx, es); err != nil {
		t.Fatal(err)
	}
	o := mustAcquire(t, s, PartitionOf(h, s.Partitions()))
	ls, _, err := s.TakeN(ctx, o, h, n)
	if err != nil || len(ls) != n {
		t.Fatalf("took %d (%v), want %d", len(ls), err, n)
	}
	for i, l := range ls {
		if l.URL != es[i].URL {
			t.Fatalf("lease %d is %s, want %s", i, l.URL, es[i].URL)
		}
	}
	if m, err := s.rdb.ZCard(ctx, s.k.inflight(0)).Result(); err != nil || m != n {
		t.Fatalf("%d in flight (%v), want %d", m, err, n)
	}
}
