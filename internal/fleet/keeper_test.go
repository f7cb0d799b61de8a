package fleet

import (
	"context"
	"fmt"
	"github.com/crawl-project/crawl/frontier"
	"testing"
	"time"
)

func TestFairShare(t *testing.T) {
	for _, tc := range []struct{ n, live, want int }{
		{16, 0, 16}, {16, 1, 16}, {16, 3, 6}, {16, 4, 4}, {16, 5, 4}, {1024, 3, 342}, {2, 5, 1},
	} {
		if got := fairShare(tc.n, tc.live); got != tc.want {
			t.Errorf("fairShare(%d, %d) = %d, want %d", tc.n, tc.live, got, tc.want)
		}
	}
}

// settle ticks the keepers in turn, releasing surpluses at once, until a whole round changes
// nothing; it fails t after 50 rounds.
func settle(t *testing.T, ks []*Keeper) {
	t.Helper()
	ctx := context.Background()
	for range 50 {
		changed := false
		for _, k := range ks {
			ch, err := k.Tick(ctx, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range ch.Surplus {
				if err := k.Release(ctx, p); err != nil {
					t.Fatal(err)
				}
			}
			changed = changed || len(ch.Acquired)+len(ch.Lost)+len(ch.Surplus) > 0 || ch.Live != len(ks)
		}
		if !changed {
			return
		}
	}
	t.Fatalf("%d keepers did not settle in 50 rounds", len(ks))
}

// checkShares checks that every partition has exactly one keeper that holds it, matching the
// owner key in Redis, and that none holds more than its fair share.
func checkShares(t *testing.T, ks []*Keeper) {
	t.Helper()
	s := ks[0].s
	holder := map[int]string{}
	for _, k := range ks {
		own := k.Owned(time.Now())
		if max := fairShare(s.Partitions(), len(ks)); len(own) > max {
			t.Errorf("%s holds %d partitions, fair share %d", k.s.worker, len(own), max)
		}
		for _, o := range own {
			if h, ok := holder[o.Partition]; ok {
				t.Errorf("partition %d held by %s and %s", o.Partition, h, k.s.worker)
			}
			holder[o.Partition] = k.s.worker
			tok, err := s.rdb.Get(context.Background(), s.k.owner(o.Partition)).Result()
			if err != nil || tok != o.token {
				t.Errorf("partition %d: owner key %q (%v), %s holds %q", o.Partition, tok, err, k.s.worker, o.token)
			}
		}
	}
	if len(holder) != s.Partitions() {
		t.Errorf("%d of %d partitions held", len(holder), s.Partitions())
	}
}

func TestKeepersShareAndRebalance(t *testing.T) {
	rdb := newRedis(t)
	opts := &Options{Partitions: 16, LeaseTTL: 5 * time.Second}
	var ks []*Keeper
	add := func(n int) {
		for range n {
			ks = append(ks, newStore(t, rdb, fmt.Sprintf("w%d", len(ks)), opts).NewKeeper())
		}
	}
	add(3)
	settle(t, ks)
	checkShares(t, ks)
	add(2)
	settle(t, ks)
	checkShares(t, ks)
	// A worker that stops hands its partitions back at once.
	if err := ks[1].ReleaseAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	ks = append(ks[:1], ks[2:]...)
	settle(t, ks)
	checkShares(t, ks)
}

// A worker that dies holding partitions loses them when its lease and heartbeat expire; the
// survivor takes all of them, with the URLs the dead one had in flight.
func TestKeeperTakesOverFromDeadWorker(t *testing.T) {
	ctx := context.Background()
	a, b := twoWorkers(t, &Options{Partitions: 4, LeaseTTL: time.Second})
	ka, kb := a.NewKeeper(), b.NewKeeper()
	settle(t, []*Keeper{ka, kb})
	own := ka.Owned(time.Now())
	if len(own) == 0 {
		t.Fatal("a holds nothing")
	}
	host := ""
	for i := 0; host == ""; i++ {
		if h := fmt.Sprintf("h%d.example", i); PartitionOf(h, 4) == own[0].Partition {
			host = h
		}
	}
	a.Add(ctx, entries(host, 2))
	if _, ok, _, err := a.Take(ctx, own[0], host); !ok || err != nil {
		t.Fatal(ok, err)
	}
	// a stops ticking; b ticks until it holds every partition.
	for deadline := time.Now().Add(30 * time.Second); len(kb.Owned(time.Now())) < 4; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("b holds %d partitions 30 s after a stopped", len(kb.Owned(time.Now())))
		}
		if _, err := kb.Tick(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	var o Ownership
	for _, x := range kb.Owned(time.Now()) {
		if x.Partition == own[0].Partition {
			o = x
		}
	}
	ls := drain(t, b, o, host)
	if len(ls) != 2 || ls[0].Attempts != 1 || ls[1].Attempts != 0 {
		t.Fatalf("b leased %+v; want a's in-flight URL first with 1 attempt, then the other", ls)
	}
	for _, l := range ls {
		if err := b.Complete(ctx, o, l, frontier.Result{Kind: frontier.Fetched}); err != nil {
			t.Fatal(err)
		}
	}
}
