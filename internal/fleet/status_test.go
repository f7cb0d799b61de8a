package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/crawl-project/crawl/frontier"
)

// partitionsOf lists the partitions k holds now.
func partitionsOf(k *Keeper) []int {
	ps := []int{}
	for _, o := range k.Owned(time.Now()) {
		ps = append(ps, o.Partition)
	}
	return ps
}

// The view sums the partitions' counters as Counts does and lists each worker with the
// partitions whose owner key names it, its heartbeat and its last report; a worker that stops
// stays listed as gone, with no partitions, until its report expires.
func TestReadViewCountsAndWorkers(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	rdb := newRedis(t)
	opts := &Options{Partitions: 8}
	a, b, c := newStore(t, rdb, "a", opts), newStore(t, rdb, "b", opts), newStore(t, rdb, "c", opts)
	ka, kb := a.NewKeeper(), b.NewKeeper()
	settle(t, []*Keeper{ka, kb})

	hosts := []string{"h1.example", "h2.example", "h3.example"}
	for _, h := range hosts {
		if _, err := a.Add(ctx, entries(h, 5)); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []*Keeper{ka, kb} { // the URLs a sent to b's partitions wait in their inboxes
		for _, o := range k.Owned(time.Now()) {
			drainAll(t, k.s, o)
		}
	}
	// Complete two URLs of each host: fetched with a link, failed; one stays in flight.
	for _, h := range hosts {
		k, s := ka, a
		if !slices.Contains(partitionsOf(ka), PartitionOf(h, 8)) {
			k, s = kb, b
		}
		var o Ownership
		for _, x := range k.Owned(time.Now()) {
			if x.Partition == PartitionOf(h, 8) {
				o = x
			}
		}
		for i, r := range []frontier.Result{
			{Kind: frontier.Fetched, Links: []frontier.Entry{{URL: "http://new.example/" + h, Host: "new.example"}}},
			{Kind: frontier.Failed, Reason: "http-404"},
			{},
		} {
			l, ok, _, err := s.Take(ctx, o, h)
			if err != nil || !ok {
				t.Fatalf("take from %s: ok=%v err=%v", h, ok, err)
			}
			if i < 2 {
				if err := s.Complete(ctx, o, l, r); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := a.Report(ctx, WorkerReport{Pages: 7, Host: "m1", Data: "/data/a"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Report(ctx, WorkerReport{Pages: 1, Host: "m3", Data: "/data/c"}); err != nil {
		t.Fatal(err)
	}

	v, err := ReadView(ctx, rdb, "t")
	if err != nil {
		t.Fatal(err)
	}
	want, err := a.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, wantS := fmt.Sprint(v.Counts), fmt.Sprint(want); got != wantS {
		t.Errorf("counts %s, want %s", got, wantS)
	}
	if v.Counts.Fetched != 3 || v.Counts.Failed != 3 || v.Counts.InFlight != 3 || v.Counts.Queued != 9 {
		t.Errorf("counts %+v: want 3 fetched, 3 failed, 3 in flight, 9 queued", v.Counts)
	}
	if v.Outbox != 3 || v.HostsQueued != 3 || v.Partitions != 8 || v.PartitionsFree != 0 {
		t.Errorf("outbox %d, hosts queued %d, partitions %d (%d free): want 3, 3, 8, 0", v.Outbox, v.HostsQueued, v.Partitions, v.PartitionsFree)
	}
	now, _ := a.Now(ctx)
	if d := now.Sub(v.Now); d < 0 || d > time.Second {
		t.Errorf("view's clock %v, Redis now %v", v.Now, now)
	}
	byID := map[string]WorkerView{}
	for _, w := range v.Workers {
		byID[w.ID] = w
	}
	if len(v.Workers) != 3 || byID["b"].ReportedAt != nil {
		t.Fatalf("workers %+v: want a, b (no report yet) and c", v.Workers)
	}
	for id, k := range map[string]*Keeper{"a": ka, "b": kb} {
		w := byID[id]
		if !slices.Equal(w.Partitions, partitionsOf(k)) || w.State != WorkerAlive || w.Heartbeat == nil {
			t.Errorf("worker %s: %+v; want alive, a heartbeat, partitions %v", id, w, partitionsOf(k))
		}
	}
	if w := byID["a"]; w.Pages != 7 || w.Host != "m1" || w.Data != "/data/a" || w.ReportedAt == nil || v.Now.Sub(*w.ReportedAt) > time.Second {
		t.Errorf("worker a's report: %+v", w)
	}
	if w := byID["c"]; w.State != WorkerGone || len(w.Partitions) != 0 || w.Heartbeat != nil || w.Pages != 1 {
		t.Errorf("worker c (reported, no keeper): %+v; want gone, no partitions, 1 page", w)
	}

	if err := b.Report(ctx, WorkerReport{Pages: 2}); err != nil {
		t.Fatal(err)
	}
	bParts := partitionsOf(kb)
	if err := kb.ReleaseAll(ctx); err != nil {
		t.Fatal(err)
	}
	v, err = ReadView(ctx, rdb, "t")
	if err != nil {
		t.Fatal(err)
	}
	if v.PartitionsFree != len(bParts) || len(v.Workers) != 3 {
		t.Errorf("after b stopped: %d free partitions, workers %+v", v.PartitionsFree, v.Workers)
	}
	for _, w := range v.Workers {
		if w.ID == "b" && (w.State != WorkerGone || len(w.Partitions) != 0) {
			t.Errorf("b after ReleaseAll: %+v; want gone, no partitions", w)
		}
	}
}

// A report expires ReportTTL after it was made (checked on the key's TTL, not by waiting), and
// a worker silent for longer than its lease TTL is gone although its heartbeat is still kept.
func TestWorkerReportExpiresAndSilentWorkerIsGone(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	const leaseTTL = time.Second
	s := newStore(t, rdb, "w", &Options{Partitions: 2, LeaseTTL: leaseTTL})
	if err := s.Report(ctx, WorkerReport{Pages: 2}); err != nil {
		t.Fatal(err)
	}
	ttl, err := rdb.PTTL(ctx, s.k.report("w")).Result()
	if err != nil || ttl <= ReportTTL-5*time.Second || ttl > ReportTTL {
		t.Fatalf("report's TTL %v (err %v), want about %v", ttl, err, ReportTTL)
	}
	k := s.NewKeeper()
	// Alive right after a heartbeat: a view read within the lease TTL of the tick. On a
	// machine so loaded that the tick and the read took longer than that, "gone" is right:
	// tick again.
	for try := 0; ; try++ {
		start := time.Now()
		if _, err := k.Tick(ctx, start); err != nil {
			t.Fatal(err)
		}
		v, err := ReadView(ctx, rdb, "t")
		if time.Since(start) >= leaseTTL && try < 5 {
			continue
		}
		if err != nil || len(v.Workers) != 1 || v.Workers[0].State != WorkerAlive {
			t.Fatalf("view %+v, err %v: want w alive", v.Workers, err)
		}
		break
	}
	time.Sleep(leaseTTL + 100*time.Millisecond) // past the lease TTL on Redis' clock
	v, err := ReadView(ctx, rdb, "t")
	if err != nil || len(v.Workers) != 1 || v.Workers[0].State != WorkerGone || v.Workers[0].Heartbeat == nil {
		t.Fatalf("view %+v, err %v: want w gone, its heartbeat kept", v.Workers, err)
	}
}

func TestReadViewNoCrawl(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	if _, err := ReadView(context.Background(), rdb, "nothing"); !errors.Is(err, ErrNoCrawl) {
		t.Fatalf("err %v, want ErrNoCrawl", err)
	}
	if _, err := ReadView(context.Background(), rdb, "a{1}"); !errors.Is(err, ErrCrawlName) {
		t.Fatalf("err %v, want ErrCrawlName", err)
	}
}
