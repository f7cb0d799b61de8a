package fleet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/crawl-project/crawl/frontier"
)

// URLs added by a worker that does not own their partition wait in its inbox; its owner queues
// those it has not seen, once, and a later owner, loading the seen log, still knows them.
func TestSeenSetFollowsTheOwner(t *testing.T) {
	parallel(t)
	a, b := twoWorkers(t, &Options{Partitions: 1, LeaseTTL: 300 * time.Millisecond})
	ctx := context.Background()
	es := entries("h", 50)
	if n, err := a.Add(ctx, es); err != nil || n != 0 {
		t.Fatalf("Add by a worker owning nothing: %d queued, %v; want 0 (sent to the inbox)", n, err)
	}
	if idle, err := a.Idle(ctx); err != nil || idle {
		t.Fatalf("Idle with URLs in an inbox: %v, %v", idle, err)
	}
	o := mustAcquire(t, b, 0) // drains the inbox
	if c, _ := b.Counts(ctx); c.Queued != 50 {
		t.Fatalf("queued %d after the owner drained its inbox, want 50", c.Queued)
	}
	if _, err := a.Add(ctx, append(es[:10:10], frontier.Entry{URL: "http://h/new", Host: "h"})); err != nil {
		t.Fatal(err)
	}
	if n := drainAll(t, b, o); n != 1 {
		t.Fatalf("drain of 10 URLs seen and 1 new: %d queued, want 1", n)
	}
	if n, err := b.Add(ctx, es); err != nil || n != 0 {
		t.Fatalf("owner's Add of URLs seen: %d queued, %v", n, err)
	}
	if err := b.Release(ctx, o); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, a, 0)
	if n, err := a.Add(ctx, append(es, frontier.Entry{URL: "http://h/newer", Host: "h"})); err != nil || n != 1 {
		t.Fatalf("new owner's Add of 50 URLs seen and 1 new: %d queued, %v; want 1", n, err)
	}
}

// An owner whose partition another worker took writes nothing: its Add is fenced, goes to the
// inbox instead, and the new owner records each URL once.
func TestSeenSetOfAFencedOwner(t *testing.T) {
	parallel(t)
	a, b := twoWorkers(t, &Options{Partitions: 1, LeaseTTL: 300 * time.Millisecond})
	ctx := context.Background()
	mustAcquire(t, a, 0)
	if n, err := a.Add(ctx, entries("h", 20)); err != nil || n != 20 {
		t.Fatalf("owner's Add: %d, %v", n, err)
	}
	waitLeaseEnded(t, a)
	ob := mustAcquire(t, b, 0)
	if n, err := b.Add(ctx, entries("h", 30)[10:]); err != nil || n != 10 {
		t.Fatalf("new owner's Add of 10 seen and 10 new: %d, %v", n, err)
	}
	if n, err := a.Add(ctx, entries("h", 40)); err != nil || n != 0 {
		t.Fatalf("fenced owner's Add: %d queued, %v; want 0 (sent to the inbox)", n, err)
	}
	if _, ok := a.ownsSeen(0); ok {
		t.Error("the fenced owner still holds the partition's seen-set")
	}
	if n := drainAll(t, b, ob); n != 10 {
		t.Fatalf("drain: %d queued, want the 10 never seen", n)
	}
	if c, _ := b.Counts(ctx); c.Queued != 40 {
		t.Errorf("queued %d, want 40", c.Queued)
	}
}

// An inbox payload that cannot be read, or names a host of another partition, is set aside;
// the others are recorded.
func TestDrainSetsAsidePayloads(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	ctx := context.Background()
	s := openRaw(t, rdb, "w", &Options{Partitions: 64})
	var other string
	for i := 0; other == ""; i++ {
		if h := fmt.Sprintf("o%d", i); PartitionOf(h, 64) != PartitionOf("h", 64) {
			other = h
		}
	}
	p := PartitionOf("h", 64)
	o := mustAcquire(t, s, p)
	rdb.RPush(ctx, s.k.inbox(p), "not json",
		`{"l":[{"URL":"http://`+other+`/","Host":"`+other+`"}]}`,
		`{"l":[{"URL":"http://h/1","Host":"h"},{"URL":"http://h/1","Host":"h"}]}`)
	rdb.HSet(ctx, s.k.counts(p), "inbox", 3)
	if n, err := s.Drain(ctx, o); err != nil || n != 1 {
		t.Fatalf("Drain: %d, %v; want the one readable URL queued once", n, err)
	}
	if n, _ := rdb.LLen(ctx, s.k.bad(p)).Result(); n != 2 {
		t.Errorf("bad list holds %d; want the 2 payloads set aside", n)
	}
	if n, _ := rdb.HGet(ctx, s.k.counts(p), "inbox").Int(); n != 0 {
		t.Errorf("inbox counter %d after the drain", n)
	}
	checkInvariants(t, s)
}
