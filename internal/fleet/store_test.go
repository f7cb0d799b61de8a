package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/redis/go-redis/v9"
)

// entries returns n URLs of host.
func entries(host string, n int) []frontier.Entry {
	var es []frontier.Entry
	for i := range n {
		es = append(es, frontier.Entry{URL: fmt.Sprintf("http://%s/%d", host, i), Host: host, Depth: 1, Parent: "http://seed/"})
	}
	return es
}

// drain takes every ready URL of host and returns their URLs in order.
func drain(t *testing.T, s *Store, o Ownership, host string) []Lease {
	t.Helper()
	var ls []Lease
	for {
		l, ok, _, err := s.Take(context.Background(), o, host)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return ls
		}
		ls = append(ls, l)
	}
}

func TestOpenChecksConfiguration(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	ctx := context.Background()
	if _, err := Open(ctx, rdb, "t", "w1", &Options{Partitions: 8}); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, rdb, "t", "w2", &Options{Partitions: 8}); err != nil {
		t.Fatalf("same configuration: %v", err)
	}
	if _, err := Open(ctx, rdb, "t", "w3", &Options{Partitions: 16}); !errors.Is(err, ErrConfigMismatch) {
		t.Fatalf("other partition count: %v, want ErrConfigMismatch", err)
	}
	if _, err := Open(ctx, rdb, "a{b}", "w", nil); !errors.Is(err, ErrCrawlName) {
		t.Fatalf("bad name: %v, want ErrCrawlName", err)
	}
}

// A crawl stored by an earlier version (fixed seen-set buckets, JSON queue items; or the
// seen-set as one hash of byte-string buckets) is refused by workers and operators alike,
// saying so, and left as it is.
func TestEarlierCrawlRefused(t *testing.T) {
	parallel(t)
	for _, old := range []string{"partitions=1024 buckets=4096 active-set", "partitions=1024 seen=hash items=bin1 active-set"} {
		rdb := newRedis(t)
		ctx := context.Background()
		rdb.Set(ctx, keys{crawl: "old"}.config(), old, 0)
		_, errOpen := Open(ctx, rdb, "old", "w", nil)
		_, errExisting := OpenExisting(ctx, rdb, "old", "op")
		_, errView := ReadView(ctx, rdb, "old")
		for what, err := range map[string]error{"Open": errOpen, "OpenExisting": errExisting, "ReadView": errView} {
			if !errors.Is(err, ErrConfigMismatch) || !strings.Contains(err.Error(), "another version") || !strings.Contains(err.Error(), old) {
				t.Errorf("%s of %q: %v, want ErrConfigMismatch naming the crawl's configuration and another version", what, old, err)
			}
		}
		if got := rdb.Get(ctx, keys{crawl: "old"}.config()).Val(); got != old {
			t.Errorf("configuration now %q", got)
		}
	}
}

func TestOnePartitionOneOwner(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	ctx := context.Background()
	a := newStore(t, rdb, "a", &Options{Partitions: 4})
	b := newStore(t, rdb, "b", &Options{Partitions: 4})
	oa := mustAcquire(t, a, 2)
	if _, ok, err := b.Acquire(ctx, time.Now(), 2); ok || err != nil {
		t.Fatalf("b acquired a held partition: ok=%v err=%v", ok, err)
	}
	if err := a.Release(ctx, oa); err != nil {
		t.Fatal(err)
	}
	ob := mustAcquire(t, b, 2)
	if ob.Epoch <= oa.Epoch {
		t.Fatalf("epoch did not grow: %d then %d", oa.Epoch, ob.Epoch)
	}
	if err := a.Release(ctx, oa); !errors.Is(err, ErrFenced) {
		t.Fatalf("release of someone else's partition: %v, want ErrFenced", err)
	}
	if _, ok, err := a.Acquire(ctx, time.Now(), 4); err == nil || ok {
		t.Fatal("partition out of range accepted")
	}
}

func TestAddIsExactlyOnceAcrossWorkers(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	ctx := context.Background()
	a := newStore(t, rdb, "a", &Options{Partitions: 4})
	b := newStore(t, rdb, "b", &Options{Partitions: 4})
	var all []frontier.Entry
	for h := range 6 {
		all = append(all, entries(fmt.Sprintf("h%d.example", h), 50)...)
	}
	// Neither owns a partition: their adds wait in the inboxes, in order, for the owner.
	n, err := a.Add(ctx, all)
	if err != nil || n != 0 {
		t.Fatalf("first add: %d, %v; want 0 counted (sent to the inboxes)", n, err)
	}
	if n, err := b.Add(ctx, all[:100]); err != nil || n != 0 {
		t.Fatalf("second add by another worker: %d, %v; want 0", n, err)
	}
	if err := b.Exclude(ctx, []frontier.Exclusion{{Entry: all[0], Reason: frontier.ReasonRobots}, {Entry: frontier.Entry{URL: "http://h0.example/private", Host: "h0.example"}, Reason: frontier.ReasonRobots}}); err != nil {
		t.Fatal(err)
	}
	var os []Ownership
	for p := range 4 {
		os = append(os, mustAcquire(t, a, p))
	}
	c, err := a.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Queued != len(all) || c.Excluded != 1 {
		t.Fatalf("counts %+v, want %d queued and 1 excluded (a queued URL stays queued)", c, len(all))
	}
	if n, err := a.Add(ctx, all); err != nil || n != 0 {
		t.Fatalf("the owner's add of URLs seen: %d, %v; want 0", n, err)
	}
	// Every URL comes out of its own host's queue, once, in the order added.
	got := map[string]int{}
	for _, o := range os {
		hosts, err := a.Hosts(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hosts {
			ls := drain(t, a, o, h)
			for i, l := range ls {
				if want := fmt.Sprintf("http://%s/%d", h, i); l.URL != want || l.Host != h || l.Depth != 1 || l.Parent != "http://seed/" {
					t.Fatalf("lease %d of %s: %+v, want %s", i, h, l.Lease, want)
				}
				got[l.URL]++
				if err := a.Complete(ctx, o, l, frontier.Result{Kind: frontier.Fetched}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if len(got) != len(all) {
		t.Fatalf("leased %d distinct URLs, want %d", len(got), len(all))
	}
}

func TestTakeFromOtherPartitionRefused(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	s := newStore(t, rdb, "a", &Options{Partitions: 1024})
	o := mustAcquire(t, s, (PartitionOf("a.example", 1024)+1)%1024)
	if _, _, _, err := s.Take(context.Background(), o, "a.example"); !errors.Is(err, ErrWrongPartition) {
		t.Fatalf("Take: %v, want ErrWrongPartition", err)
	}
}

func TestCompleteStatesAndLinks(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	ctx := context.Background()
	s := newStore(t, rdb, "a", &Options{Partitions: 16})
	host := "a.example"
	o := queueAndOwn(t, s, host, 4)
	ls := drain(t, s, o, host)
	if len(ls) != 4 {
		t.Fatalf("leased %d, want 4", len(ls))
	}
	now, err := s.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ls[0].Deadline.Before(now.Add(s.opts.URLLeaseTTL - time.Minute)) {
		t.Fatalf("deadline %v, Redis now %v, URL lease %v", ls[0].Deadline, now, s.opts.URLLeaseTTL)
	}
	// Links to hosts of this partition are queued by Complete itself; those of other partitions
	// wait in this partition's outbox until Forward delivers them to their inboxes.
	var links []frontier.Entry
	here := 0
	for h := range 20 {
		es := entries(fmt.Sprintf("l%d.example", h), 2)
		if PartitionOf(es[0].Host, 16) == o.Partition {
			here += len(es)
		}
		links = append(links, es...)
	}
	if here == 0 || here == len(links) {
		t.Fatalf("%d of %d links in the page's partition: the test needs both kinds", here, len(links))
	}
	links = append(links, ls[3].Entry) // already seen
	excl := []frontier.Exclusion{{Entry: frontier.Entry{URL: "http://x.example/", Host: "x.example"}, Reason: frontier.ReasonScope}}
	exclHere := 0
	if PartitionOf("x.example", 16) == o.Partition {
		exclHere = 1
	}
	for i, r := range []frontier.Result{
		{Kind: frontier.Fetched, Links: links, Excluded: excl},
		{Kind: frontier.Failed, Reason: "http-500", Status: 500},
		{Kind: frontier.Excluded, Reason: frontier.ReasonRobots},
		{Kind: frontier.Fetched},
	} {
		if err := s.Complete(ctx, o, ls[i], r); err != nil {
			t.Fatalf("complete %d: %v", i, err)
		}
	}
	if err := s.Complete(ctx, o, ls[0], frontier.Result{Kind: frontier.Fetched}); !errors.Is(err, ErrNotInFlight) {
		t.Fatalf("second Complete: %v, want ErrNotInFlight", err)
	}
	c, _ := s.Counts(ctx)
	if c.Queued != here || c.Fetched != 2 || c.Failed != 1 || c.Excluded != 1+exclHere {
		t.Fatalf("before Forward: %+v; want the %d links of the page's partition queued", c, here)
	}
	n, err := s.Forward(ctx, o)
	if err != nil || n != 40-here+1-exclHere {
		t.Fatalf("Forward: %d, %v; want the %d URLs of other partitions delivered", n, err, 40-here+1-exclHere)
	}
	if n, err := s.Forward(ctx, o); err != nil || n != 0 {
		t.Fatalf("second Forward: %d, %v; want nothing left", n, err)
	}
	ownRest(t, s, o) // their owner records them
	c, _ = s.Counts(ctx)
	if c.Queued != 40 || c.Excluded != 2 {
		t.Fatalf("after Forward: %+v, want 40 queued, 2 excluded", c)
	}
	if fmt.Sprint(c.FailedBy, c.ExcludedBy) != "map[http-500:1] map[robots:1 scope:1]" {
		t.Fatalf("by reason: failed %v, excluded %v", c.FailedBy, c.ExcludedBy)
	}
}

// CompleteBatch records several results in one script: each URL's state, a retry, the links
// of every fetched page in one outbox payload; a result whose URL is no longer in flight is
// left out and said so; TakeN leases several URLs in order.
func TestCompleteBatch(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	ctx := context.Background()
	s := newStore(t, rdb, "a", &Options{Partitions: 16})
	host := "a.example"
	o := queueAndOwn(t, s, host, 5)
	ls, _, err := s.TakeN(ctx, o, host, 4)
	if err != nil || len(ls) != 4 || ls[0].URL != entries(host, 5)[0].URL || ls[3].URL != entries(host, 5)[3].URL {
		t.Fatalf("TakeN 4: %v, %v; want the first 4 in order", ls, err)
	}
	if err := s.PutBack(ctx, o, ls[2]); err != nil {
		t.Fatal(err)
	}
	in, err := s.CompleteBatch(ctx, o, []Done{
		{ls[0], frontier.Result{Kind: frontier.Fetched, Links: entries("b.example", 2)}},
		{ls[1], frontier.Result{Kind: frontier.Fetched, Links: entries("c.example", 3)}},
		{ls[2], frontier.Result{Kind: frontier.Fetched}}, // put back: not in flight
		{ls[3], frontier.Result{Kind: frontier.Retry, NotBefore: time.Now().Add(time.Hour)}},
	})
	if err != nil || fmt.Sprint(in) != "[true true false true]" {
		t.Fatalf("CompleteBatch: %v, %v; want [true true false true]", in, err)
	}
	if n, _ := rdb.LLen(ctx, s.k.outbox(o.Partition)).Result(); n != 1 {
		t.Errorf("outbox: %d payloads, want 1 for the batch", n)
	}
	if n, err := s.Forward(ctx, o); err != nil || n != 5 {
		t.Errorf("Forward: %d, %v; want the 5 links", n, err)
	}
	ownRest(t, s, o)
	c, _ := s.Counts(ctx)
	if c.Fetched != 2 || c.Delayed != 1 || c.Queued != 3+5 {
		t.Errorf("counts %+v; want 2 fetched, 1 delayed, 8 queued (2 of a, the retry, 5 links)", c)
	}
}

func TestRetryWaitsForNotBeforeOnRedisClock(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	ctx := context.Background()
	s := newStore(t, rdb, "a", &Options{Partitions: 4})
	host := "a.example"
	o := queueAndOwn(t, s, host, 2)
	ls := drain(t, s, o, host)
	now, _ := s.Now(ctx)
	later := now.Add(time.Hour).Truncate(time.Millisecond)
	if err := s.Complete(ctx, o, ls[0], frontier.Result{Kind: frontier.Retry, NotBefore: later}); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, o, ls[1], frontier.Result{Kind: frontier.Retry, NotBefore: now.Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	l, ok, _, err := s.Take(ctx, o, host)
	if err != nil || !ok || l.URL != ls[1].URL || l.Attempts != 1 {
		t.Fatalf("due retry: %+v ok=%v err=%v; want %s with 1 attempt", l.Lease, ok, err, ls[1].URL)
	}
	_, ok, next, err := s.Take(ctx, o, host)
	if err != nil || ok || !next.Equal(later) {
		t.Fatalf("retry not due: ok=%v next=%v err=%v; want next %v", ok, next, err, later)
	}
	if hosts, _ := s.Hosts(ctx, o); !slices.Equal(hosts, []string{host}) {
		t.Fatalf("hosts with work %v, want the host with a delayed URL", hosts)
	}
	c, _ := s.Counts(ctx)
	if c.Queued != 2 || c.Delayed != 1 || c.InFlight != 1 {
		t.Fatalf("counts %+v", c)
	}
	s.Complete(ctx, o, l, frontier.Result{Kind: frontier.Fetched})
}

// A worker whose lease ran out is fenced: the new owner gets its in-flight URLs back with one
// more attempt, and nothing the old owner writes afterwards is applied.
func TestTakeoverReclaimsAndFences(t *testing.T) {
	ctx := context.Background()
	a, b := twoWorkers(t, &Options{Partitions: 4, LeaseTTL: time.Second})
	host := "a.example"
	oa := queueAndOwn(t, a, host, 5)
	p := oa.Partition
	var ls []Lease
	for range 3 {
		l, ok, _, err := a.Take(ctx, oa, host)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		ls = append(ls, l)
	}
	if err := a.Complete(ctx, oa, ls[0], frontier.Result{Kind: frontier.Fetched}); err != nil {
		t.Fatal(err)
	}
	if err := a.SaveHostStates(ctx, oa, map[string][]byte{host: []byte(`{"rate":2}`)}); err != nil {
		t.Fatal(err)
	}
	waitLeaseEnded(t, a)
	ob := mustAcquire(t, b, p)
	if n, err := b.Reclaim(ctx, ob); err != nil || n != 2 {
		t.Fatalf("reclaim: %d, %v; want the 2 URLs a had in flight", n, err)
	}
	// The old owner is fenced everywhere.
	if err := a.Complete(ctx, oa, ls[1], frontier.Result{Kind: frontier.Fetched}); !errors.Is(err, ErrFenced) {
		t.Fatalf("old owner's Complete: %v, want ErrFenced", err)
	}
	if _, _, _, err := a.Take(ctx, oa, host); !errors.Is(err, ErrFenced) {
		t.Fatalf("old owner's Take: %v, want ErrFenced", err)
	}
	if err := a.SaveHostStates(ctx, oa, map[string][]byte{host: []byte(`{"rate":99}`)}); !errors.Is(err, ErrFenced) {
		t.Fatalf("old owner's SaveHostStates: %v, want ErrFenced", err)
	}
	// The new owner restores the host's state and leases everything not done, the reclaimed
	// URLs first with one more attempt.
	if b, ok, err := b.LoadHostState(ctx, host); err != nil || !ok || string(b) != `{"rate":2}` {
		t.Fatalf("host state: %q ok=%v err=%v", b, ok, err)
	}
	attempts := map[string]int{}
	for _, l := range drain(t, b, ob, host) {
		attempts[l.URL] = l.Attempts
		if err := b.Complete(ctx, ob, l, frontier.Result{Kind: frontier.Fetched}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int{ls[1].URL: 1, ls[2].URL: 1, "http://a.example/3": 0, "http://a.example/4": 0}
	if fmt.Sprint(attempts) != fmt.Sprint(want) {
		t.Fatalf("new owner leased %v, want %v", attempts, want)
	}
	c, _ := b.Counts(ctx)
	if c.Fetched != 5 || c.Queued != 0 {
		t.Fatalf("counts %+v, want 5 fetched", c)
	}
}

func TestLoadHostStateMissing(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	s := newStore(t, rdb, "a", &Options{Partitions: 4})
	if b, ok, err := s.LoadHostState(context.Background(), "none.example"); ok || err != nil || b != nil {
		t.Fatalf("%q %v %v", b, ok, err)
	}
}

func TestPutBackKeepsOrderAndAttempts(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	ctx := context.Background()
	s := newStore(t, rdb, "a", &Options{Partitions: 4})
	host := "a.example"
	o := queueAndOwn(t, s, host, 3)
	l, _, _, err := s.Take(ctx, o, host)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutBack(ctx, o, l); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBack(ctx, o, l); !errors.Is(err, ErrNotInFlight) {
		t.Fatalf("second PutBack: %v, want ErrNotInFlight", err)
	}
	ls := drain(t, s, o, host)
	if len(ls) != 3 || ls[0].URL != l.URL || ls[0].Attempts != 0 {
		t.Fatalf("after PutBack leased %+v; want %s first, no attempt counted", ls, l.URL)
	}
	for _, l := range ls {
		s.Complete(ctx, o, l, frontier.Result{Kind: frontier.Failed, Reason: "x"})
	}
}

// redis-server killed with SIGKILL and restarted (every write fsynced, so the append-only file
// holds them all): the owner's lease, queues, in-flight set and outbox are back, the scripts
// are loaded again on first use, and the crawl goes on.
func TestRedisKilledAndRestarted(t *testing.T) {
	parallel(t)
	rdb, srv := newRedisServer(t)
	ctx := context.Background()
	if err := rdb.ConfigSet(ctx, "appendfsync", "always").Err(); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, rdb, "a", &Options{Partitions: 4, LeaseTTL: time.Minute})
	host := "a.example"
	o := queueAndOwn(t, s, host, 5)
	l1, _, _, _ := s.Take(ctx, o, host)
	l2, _, _, _ := s.Take(ctx, o, host)
	if err := s.Complete(ctx, o, l1, frontier.Result{Kind: frontier.Fetched, Links: entries("b.example", 3)}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.Take(ctx, o, host); err == nil {
		t.Fatal("Take succeeded with redis-server down")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	// The client may take a moment to dial again (its pool backs off after failed dials): a
	// worker retries until Redis answers, as this loop does. Counts only reads.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, err := s.Counts(ctx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis still unreachable 30 s after the restart: %v", err)
		}
	}
	if err := s.Complete(ctx, o, l2, frontier.Result{Kind: frontier.Fetched}); err != nil {
		t.Fatalf("Complete of a URL leased before the restart: %v", err)
	}
	if n, err := s.Forward(ctx, o); err != nil || n != 3 {
		t.Fatalf("Forward after the restart: %d, %v; want the 3 links", n, err)
	}
	if ls := drain(t, s, o, host); len(ls) != 3 || ls[0].URL != "http://a.example/2" {
		t.Fatalf("after the restart leased %d URLs, first %+v", len(ls), ls)
	} else {
		for _, l := range ls {
			s.Complete(ctx, o, l, frontier.Result{Kind: frontier.Fetched})
		}
	}
	ownRest(t, s, o) // the links' owner records them
	c, err := s.Counts(ctx)
	if err != nil || c.Fetched != 5 || c.Queued != 3 {
		t.Fatalf("counts %+v (%v); want 5 fetched, 3 queued", c, err)
	}
}

// With a host budget, a host's URLs ever queued stop at the budget, across workers and calls:
// the rest are excluded ("limit"); a URL already seen costs nothing; other hosts are unaffected.
func TestHostBudget(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	ctx := context.Background()
	opts := &Options{Partitions: 4, HostBudget: 3}
	a := newStore(t, rdb, "a", opts)
	b := newStore(t, rdb, "b", opts)
	ownRest(t, a)
	big := entries("big.example", 5)
	if n, err := a.Add(ctx, big[:2]); err != nil || n != 2 {
		t.Fatalf("first add: %d, %v; want 2", n, err)
	}
	if n, err := b.Add(ctx, append(big[:2:2], big[2:]...)); err != nil || n != 0 {
		t.Fatalf("second add, by another worker: %d, %v; want 0 counted (sent to the inbox)", n, err)
	}
	ob, _ := a.ownsSeen(PartitionOf("big.example", 4))
	if n := drainAll(t, a, ob); n != 1 {
		t.Fatalf("the owner's drain of the 2 seen and 3 new: %d queued, want 1 (the budget's last)", n)
	}
	if n, err := a.Add(ctx, entries("small.example", 2)); err != nil || n != 2 {
		t.Fatalf("another host: %d, %v; want 2", n, err)
	}
	c, err := a.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Queued != 5 || c.Excluded != 2 || c.ExcludedBy[frontier.ReasonLimit] != 2 {
		t.Fatalf("counts %+v; want 5 queued, 2 excluded by %q", c, frontier.ReasonLimit)
	}
	if n, err := a.Add(ctx, big[4:]); err != nil || n != 0 {
		t.Fatalf("an excluded URL again: %d, %v; want 0", n, err)
	}
	// Links Complete queues in the page's own partition keep the budget too.
	o := mustAcquire(t, a, PartitionOf("small.example", 4))
	ls := drain(t, a, o, "small.example")
	more := entries("small.example", 4)[2:]
	if err := a.Complete(ctx, o, ls[0], frontier.Result{Kind: frontier.Fetched, Links: more}); err != nil {
		t.Fatal(err)
	}
	c, _ = a.Counts(ctx)
	if c.Queued != 5 || c.Fetched != 1 || c.ExcludedBy[frontier.ReasonLimit] != 3 {
		t.Fatalf("after a page of small.example linked 2 more: %+v; want 5 queued (one fetched, its 3rd URL queued), 1 more excluded", c)
	}
}

// A partition is taken from its owner only once the owner's lease (its heartbeat) has ended,
// and only from the owner token read: a stale read loses the race and takes nothing.
func TestAcquireOnlyFromEndedLease(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	a, b := twoWorkers(t, &Options{Partitions: 4, LeaseTTL: time.Minute})
	oa := mustAcquire(t, a, 1)
	if _, ok, err := b.Acquire(ctx, time.Now(), 1); ok || err != nil {
		t.Fatalf("b took a partition of a live worker: ok=%v err=%v", ok, err)
	}
	// a's lease ends (its heartbeat score is the lease's end, on Redis' clock)
	if err := a.rdb.ZAdd(ctx, a.k.workers(), redis.Z{Score: 1, Member: "a"}).Err(); err != nil {
		t.Fatal(err)
	}
	ob := mustAcquire(t, b, 1)
	if ob.Epoch <= oa.Epoch {
		t.Fatalf("epoch did not grow: %d then %d", oa.Epoch, ob.Epoch)
	}
	if err := a.Release(ctx, oa); !errors.Is(err, ErrFenced) {
		t.Fatalf("old owner's Release: %v, want ErrFenced", err)
	}
	// A worker that read the old token (before b's takeover) takes nothing.
	if _, ok, err := a.acquireFrom(ctx, time.Now(), 1, oa.token); ok || err != nil {
		t.Fatalf("acquire from a stale token: ok=%v err=%v", ok, err)
	}
	// a's lease starts again: b is alive, so a gets nothing back.
	if _, ok, err := a.Acquire(ctx, time.Now(), 1); ok || err != nil {
		t.Fatalf("a took b's partition back: ok=%v err=%v", ok, err)
	}
	if tok, _ := a.rdb.Get(ctx, a.k.owner(1)).Result(); tok != ob.token {
		t.Fatalf("owner key %q, want b's %q", tok, ob.token)
	}
	if ttl, _ := a.rdb.PTTL(ctx, a.k.owner(1)).Result(); ttl != -1 {
		t.Fatalf("owner key has a TTL (%v): the worker's heartbeat is the lease", ttl)
	}
}
