package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawl-project/crawl/frontier"
)

// fakeDNS answers lookups from a table (a name not in it fails) and counts them; while hold
// is open, lookups of held names wait for it to close.
type fakeDNS struct {
	mu    sync.Mutex
	addrs map[string]string
	calls map[string]int
	held  map[string]bool
	hold  chan struct{}
}

func newFakeDNS(addrs map[string]string) *fakeDNS {
	return &fakeDNS{addrs: addrs, calls: map[string]int{}, held: map[string]bool{}, hold: make(chan struct{})}
}

func (d *fakeDNS) lookup(ctx context.Context, name string) ([]netip.Addr, error) {
	d.mu.Lock()
	d.calls[name]++
	a, ok := d.addrs[name]
	held := d.held[name]
	d.mu.Unlock()
	if held {
		select {
		case <-d.hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if !ok {
		return nil, errors.New("no such host")
	}
	return []netip.Addr{netip.MustParseAddr(a)}, nil
}

func (d *fakeDNS) lookups(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[name]
}

// hostsOf lists the hosts with work of partition p.
func hostsOf(t *testing.T, s *Store, p int) []string {
	t.Helper()
	hs, err := s.rdb.SMembers(context.Background(), s.k.hosts(p)).Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(hs)
	return hs
}

// ByAddress puts the names of one address in that address's partition, a name that does not
// resolve in its own, an IP literal in its own address's; the first placement of a name holds
// for every worker whatever its resolver says later, and a worker placing by name is refused.
func TestPlaceByAddress(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	ctx := context.Background()
	const n = 64
	server, other := "10.0.0.1:8080", "10.0.0.2:8080"
	if PartitionOf(server, n) == PartitionOf(other, n) || PartitionOf(server, n) == PartitionOf("x.test:8080", n) {
		t.Fatal("the test's addresses share a partition: pick others")
	}
	dns := newFakeDNS(map[string]string{"a.test": "10.0.0.1", "b.test": "10.0.0.1", "c.test": "10.0.0.2"})
	a := newStore(t, rdb, "a", &Options{Partitions: n, Placement: ByAddress, Resolve: dns.lookup})
	var es []frontier.Entry
	for _, h := range []string{"a.test:8080", "b.test:8080", "c.test:8080", "x.test:8080", server} {
		es = append(es, entries(h, 2)...)
	}
	ownRest(t, a) // the owner of every partition records its adds at once
	if added, err := a.Add(ctx, es); err != nil || added != len(es) {
		t.Fatalf("Add: %d, %v; want %d", added, err, len(es))
	}
	want := map[int][]string{
		PartitionOf(server, n):        {server, "a.test:8080", "b.test:8080"},
		PartitionOf(other, n):         {"c.test:8080"},
		PartitionOf("x.test:8080", n): {"x.test:8080"}, // no address: placed by its name
	}
	for p, hs := range want {
		if got := hostsOf(t, a, p); !slices.Equal(got, hs) {
			t.Errorf("partition %d holds %v, want %v", p, got, hs)
		}
	}
	if dns.lookups("10.0.0.1") != 0 {
		t.Error("an IP literal was looked up")
	}
	// The owner of the server's partition takes from every name of it.
	o := mustAcquire(t, a, PartitionOf(server, n))
	if ls := drain(t, a, o, "b.test:8080"); len(ls) != 2 {
		t.Errorf("took %d URLs of b.test from the server's partition, want 2", len(ls))
	}

	// Worker b's resolver says a.test moved: the crawl's record holds, a.test is not looked up
	// again, and a new name of the server joins it.
	dns2 := newFakeDNS(map[string]string{"a.test": "10.0.0.2", "d.test": "10.0.0.1"})
	b := newStore(t, rdb, "b", &Options{Partitions: n, Placement: ByAddress, Resolve: dns2.lookup})
	more := append(entries("a.test:8080", 4), entries("d.test:8080", 1)...)
	if _, err := b.Add(ctx, more); err != nil {
		t.Fatal(err)
	}
	drainAll(t, a, o) // b sent them to the owner's inbox
	if got := hostsOf(t, b, PartitionOf(server, n)); !slices.Equal(got, []string{server, "a.test:8080", "d.test:8080"}) {
		t.Errorf("the server's partition holds %v after b's adds", got)
	}
	if dns2.lookups("a.test") != 0 {
		t.Errorf("worker b looked a.test up %d times; its placement is recorded", dns2.lookups("a.test"))
	}
	for _, h := range []string{"a.test:8080", "d.test:8080"} {
		if p, ok, err := b.partitionOf(ctx, h); err != nil || !ok || p != PartitionOf(server, n) {
			t.Errorf("partitionOf(%s) = %d, %v, %v; want %d", h, p, ok, err, PartitionOf(server, n))
		}
	}
	if _, ok, err := b.partitionOf(ctx, "never.test"); ok || err != nil {
		t.Errorf("a host never placed: ok %v, err %v; want not placed", ok, err)
	}

	// An operator's store (crawl add) places as the crawl does.
	op, err := OpenExisting(ctx, rdb, "t", "op")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := op.Add(ctx, entries("a.test:8080", 6)); err != nil {
		t.Fatal(err)
	}
	drainAll(t, a, o)
	// server 2, a.test 2 + 2 (b's new ones) + 2 (the operator's), b.test 2, d.test 1
	if c, _ := a.PartitionCounts(ctx); c[PartitionOf(server, n)].Queued != 11 {
		t.Errorf("the server's partition has %d URLs queued or in flight after the operator's add, want 11", c[PartitionOf(server, n)].Queued)
	}

	// A worker that places by name cannot join, nor one placing by address a crawl by name.
	_, err = Open(ctx, rdb, "t", "c", &Options{Partitions: n})
	if !errors.Is(err, ErrConfigMismatch) || !strings.Contains(err.Error(), "places hosts by address, this worker by name") {
		t.Errorf("a worker placing by name: %v", err)
	}
	_, err = Open(ctx, rdb, "other", "c", &Options{Partitions: n})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, rdb, "other", "d", &Options{Partitions: n, Placement: ByAddress})
	if !errors.Is(err, ErrConfigMismatch) || !strings.Contains(err.Error(), "places hosts by name, this worker by address") {
		t.Errorf("a worker placing by address a crawl by name: %v", err)
	}
}

// A link whose name is still being looked up waits in the outbox: Forward delivers the rest of
// nothing, loses nothing, never waits for the lookup, and delivers it once the lookup ends.
func TestForwardWaitsForPlacement(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	ctx := context.Background()
	const n = 64
	dns := newFakeDNS(map[string]string{"slow.test": "10.0.0.7"})
	dns.held["slow.test"] = true
	s := newStore(t, rdb, "a", &Options{Partitions: n, Placement: ByAddress, Resolve: dns.lookup})
	seed := "10.0.0.1"
	o := queueAndOwn(t, s, seed, 1)
	ls := drain(t, s, o, seed)
	link := frontier.Entry{URL: "http://slow.test/", Host: "slow.test", Depth: 1}
	if err := s.Complete(ctx, o, ls[0], frontier.Result{Kind: frontier.Fetched, Links: []frontier.Entry{link}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if added, err := s.Forward(ctx, o); added != 0 || err != nil {
		t.Fatalf("Forward while the link's name is looked up: %d, %v; want 0, nil", added, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Forward waited %v for a lookup", d)
	}
	if c, _ := s.PartitionCounts(ctx); c[o.Partition].Outbox != 1 {
		t.Fatalf("outbox %d after a Forward that could not place its link, want 1", c[o.Partition].Outbox)
	}
	close(dns.hold)
	for deadline := time.Now().Add(10 * time.Second); ; {
		added, err := s.Forward(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if added == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the link was never forwarded")
		}
		time.Sleep(10 * time.Millisecond)
	}
	mustAcquire(t, s, PartitionOf("10.0.0.7", n)) // its owner records it
	if got := hostsOf(t, s, PartitionOf("10.0.0.7", n)); !slices.Equal(got, []string{"slow.test"}) {
		t.Errorf("slow.test's address's partition holds %v", got)
	}
	if dns.lookups("slow.test") != 1 {
		t.Errorf("slow.test looked up %d times, want once", dns.lookups("slow.test"))
	}
}

// A host whose placement ended between a caller's read of its record (none yet) and its call
// to start is not looked up again: start finds it placed.
func TestPlacementEndedMeanwhileIsNotLookedUpAgain(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	dns := newFakeDNS(map[string]string{"late.test": "10.0.0.9"})
	s := newStore(t, rdb, "a", &Options{Partitions: 64, Placement: ByAddress, Resolve: dns.lookup})
	first := s.place.start("late.test")
	<-first.done
	again := s.place.start("late.test") // as place does after reading the record before it was written
	<-again.done
	if first.err != nil || again.err != nil || again.p != first.p || again.p != PartitionOf("10.0.0.9", 64) {
		t.Errorf("placed in %d (%v), then %d (%v); want %d both times", first.p, first.err, again.p, again.err, PartitionOf("10.0.0.9", 64))
	}
	if n := dns.lookups("late.test"); n != 1 {
		t.Errorf("late.test looked up %d times, want once", n)
	}
}

// The placement cache stays within maxPlaced and keeps what it was told last; a placement it
// forgot is read again from its record, not looked up again.
func TestPlacementCacheIsBounded(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	ctx := context.Background()
	dns := newFakeDNS(map[string]string{"first.test": "10.0.0.1"})
	s := newStore(t, rdb, "a", &Options{Partitions: 64, Placement: ByAddress, Resolve: dns.lookup})
	if _, err := s.Add(ctx, entries("first.test", 1)); err != nil {
		t.Fatal(err)
	}
	for i := range maxPlaced + 1 {
		s.learn("h"+strconv.Itoa(i)+".test", i%64)
	}
	s.place.mu.Lock()
	n := len(s.place.known)
	s.place.mu.Unlock()
	if n > maxPlaced {
		t.Errorf("%d placements cached, bound %d", n, maxPlaced)
	}
	if p, ok := s.knownPartition("h" + strconv.Itoa(maxPlaced) + ".test"); !ok || p != maxPlaced%64 {
		t.Errorf("the last placement learned: %d, %v", p, ok)
	}
	s.place.mu.Lock()
	delete(s.place.known, "first.test") // as if evicted
	s.place.mu.Unlock()
	if _, ok := s.knownPartition("first.test"); ok {
		t.Fatal("first.test still cached")
	}
	if p, ok, err := s.partitionOf(ctx, "first.test"); err != nil || !ok || p != PartitionOf("10.0.0.1", 64) {
		t.Errorf("first.test after the cache filled: %d, %v, %v; want %d from its record", p, ok, err, PartitionOf("10.0.0.1", 64))
	}
	if dns.lookups("first.test") != 1 {
		t.Errorf("first.test looked up %d times, want once", dns.lookups("first.test"))
	}
}

// ByAddress, a page's link whose name hashes to the page's own partition but whose server is
// placed in another is not queued in the page's partition by Complete: it goes to the outbox,
// and Forward queues it in its server's partition.
func TestCompletePlacesOwnLinksByAddress(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	ctx := context.Background()
	const n = 64
	seed, other := "10.0.0.1", "10.0.0.2:8080"
	p := PartitionOf(seed, n)
	if PartitionOf(other, n) == p {
		t.Fatal("the test's addresses share a partition: pick others")
	}
	name := ""
	for i := 0; name == ""; i++ {
		if h := fmt.Sprintf("n%d.test:8080", i); PartitionOf(h, n) == p {
			name = h
		}
	}
	dns := newFakeDNS(map[string]string{strings.TrimSuffix(name, ":8080"): "10.0.0.2"})
	s := newStore(t, rdb, "a", &Options{Partitions: n, Placement: ByAddress, Resolve: dns.lookup})
	o := queueAndOwn(t, s, seed, 1)
	ls := drain(t, s, o, seed)
	link := frontier.Entry{URL: "http://" + name + "/", Host: name, Depth: 1}
	if err := s.Complete(ctx, o, ls[0], frontier.Result{Kind: frontier.Fetched, Links: []frontier.Entry{link}}); err != nil {
		t.Fatal(err)
	}
	if got := hostsOf(t, s, p); slices.Contains(got, name) {
		t.Errorf("%s (name in partition %d, server in %d) queued in the page's partition: %v", name, p, PartitionOf(other, n), got)
	}
	if added, err := s.Forward(ctx, o); added != 1 || err != nil {
		t.Fatalf("Forward: %d, %v; want 1, nil", added, err)
	}
	mustAcquire(t, s, PartitionOf(other, n)) // its owner records it
	if got := hostsOf(t, s, PartitionOf(other, n)); !slices.Contains(got, name) {
		t.Errorf("%s not queued in its server's partition %d: %v", name, PartitionOf(other, n), got)
	}
}
