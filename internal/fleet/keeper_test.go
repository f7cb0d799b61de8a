package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/redis/go-redis/v9"
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
	parallel(t)
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

// epochsAt maps the partitions k holds at local time now to their epochs.
func epochsAt(k *Keeper, now time.Time) map[int]int64 {
	m := map[int]int64{}
	for _, o := range k.Owned(now) {
		m[o.Partition] = o.Epoch
	}
	return m
}

// The ownerships hang on the worker's lease: a Tick renews them all, judged on the local clock
// from the Tick's time; past TTL − TTL/5 without one they are lapsed, and the next Tick loses
// them and takes them again under new epochs (this worker's own stale tokens are free to it).
func TestKeeperLeaseOnTheLocalClock(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	const ttl = time.Minute
	k := newStore(t, newRedis(t), "a", &Options{Partitions: 2, LeaseTTL: ttl}).NewKeeper()
	t0 := time.Now()
	ch, err := k.Tick(ctx, t0)
	if err != nil || len(ch.Acquired) != 2 {
		t.Fatalf("first tick: %+v, %v; want both partitions", ch, err)
	}
	stop := ttl - ttl/safetyDiv
	if n := len(k.Owned(t0.Add(stop - time.Millisecond))); n != 2 {
		t.Fatalf("%d held just before TTL-TTL/5, want 2", n)
	}
	if n := len(k.Owned(t0.Add(stop))); n != 0 {
		t.Fatalf("%d held at TTL-TTL/5 without a heartbeat, want 0", n)
	}
	t1 := t0.Add(30 * time.Second)
	if ch, err := k.Tick(ctx, t1); err != nil || len(ch.Lost)+len(ch.Acquired) != 0 {
		t.Fatalf("renewing tick: %+v, %v; want nothing lost or acquired", ch, err)
	}
	before := epochsAt(k, t1)
	if n := len(k.Owned(t1.Add(stop - time.Millisecond))); n != 2 {
		t.Fatalf("%d held after the renewal, want 2", n)
	}
	late := t1.Add(stop)
	ch, err = k.Tick(ctx, late)
	if err != nil || len(ch.Lost) != 2 || len(ch.Acquired) != 2 {
		t.Fatalf("tick after a local lapse: %+v, %v; want both lost and taken again", ch, err)
	}
	for p, e := range epochsAt(k, late) {
		if e <= before[p] {
			t.Errorf("partition %d taken again under epoch %d, was %d", p, e, before[p])
		}
	}
}

// A worker whose lease ended in Redis (its heartbeat found none: a long pause, or Redis lost
// it) loses every ownership at once, whatever its clock says, and takes them again fenced.
func TestKeeperLeaseEndedInRedis(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	s := newStore(t, newRedis(t), "a", &Options{Partitions: 2, LeaseTTL: time.Minute})
	k := s.NewKeeper()
	for range 2 { // the second Tick has nothing to do
		if _, err := k.Tick(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	old := k.Owned(time.Now())
	if err := s.rdb.ZRem(ctx, s.k.workers(), "a").Err(); err != nil {
		t.Fatal(err)
	}
	ch, err := k.Tick(ctx, time.Now())
	if err != nil || len(ch.Lost) != 2 || len(ch.Acquired) != 2 {
		t.Fatalf("tick after the lease ended: %+v, %v; want both lost and taken again", ch, err)
	}
	for _, o := range old {
		if err := s.Release(ctx, o); !errors.Is(err, ErrFenced) {
			t.Errorf("partition %d: the old ownership's Release: %v, want ErrFenced", o.Partition, err)
		}
	}
}

// A live worker's partitions are never taken; once its lease ends they are, at the next Tick.
func TestKeeperTakesOverOnlyFromEndedLease(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	a, b := twoWorkers(t, &Options{Partitions: 4, LeaseTTL: time.Minute})
	ka, kb := a.NewKeeper(), b.NewKeeper()
	settle(t, []*Keeper{ka, kb})
	if err := a.rdb.ZAdd(ctx, a.k.workers(), redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "a"}).Err(); err != nil {
		t.Fatal(err)
	}
	if ch, err := kb.Tick(ctx, time.Now()); err != nil || len(ch.Acquired) != 0 || ch.Live != 2 {
		t.Fatalf("b's tick with a alive: %+v, %v; want nothing acquired, 2 live", ch, err)
	}
	if err := a.rdb.ZAdd(ctx, a.k.workers(), redis.Z{Score: 1, Member: "a"}).Err(); err != nil {
		t.Fatal(err)
	}
	ch, err := kb.Tick(ctx, time.Now())
	if err != nil || len(ch.Acquired) != 2 || ch.Live != 1 {
		t.Fatalf("b's tick once a's lease ended: %+v, %v; want a's 2 partitions, 1 live", ch, err)
	}
}

// A Keeper below its fair share reads the owner keys again only when something may have
// changed: here, another worker released a partition.
func TestKeeperLooksForFreePartitionsWhenReleased(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	a, b := twoWorkers(t, &Options{Partitions: 3, LeaseTTL: time.Minute})
	ka, kb := a.NewKeeper(), b.NewKeeper()
	if _, err := ka.Tick(ctx, time.Now()); err != nil { // a takes all 3, alone
		t.Fatal(err)
	}
	settle(t, []*Keeper{ka, kb})
	if len(ka.Owned(time.Now())) != 2 || len(kb.Owned(time.Now())) != 1 {
		t.Fatalf("a holds %d, b %d; want 2 and 1", len(ka.Owned(time.Now())), len(kb.Owned(time.Now())))
	}
	looked := kb.scan.at
	if _, err := kb.Tick(ctx, time.Now()); err != nil || kb.scan.at != looked {
		t.Fatalf("b looked for free partitions again with nothing changed (err %v)", err)
	}
	p := ka.Owned(time.Now())[0].Partition
	if err := ka.Release(ctx, p); err != nil {
		t.Fatal(err)
	}
	ch, err := kb.Tick(ctx, time.Now())
	if err != nil || !slices.Equal(ch.Acquired, []int{p}) {
		t.Fatalf("b's tick after a released %d: %+v, %v", p, ch, err)
	}
}

// A Keeper that loses its partitions (its lease ended) looks for free ones at once, even
// when its last look found none and the live workers are the same.
func TestKeeperLooksAgainAfterALoss(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	a, b := twoWorkers(t, &Options{Partitions: 3, LeaseTTL: time.Minute})
	ka, kb := a.NewKeeper(), b.NewKeeper()
	if _, err := ka.Tick(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	settle(t, []*Keeper{ka, kb})
	if _, err := kb.Tick(ctx, time.Now()); err != nil || kb.scan.again {
		t.Fatalf("b below its share: err %v, looks again %v; want a look that found nothing", err, kb.scan.again)
	}
	p := kb.Owned(time.Now())[0].Partition
	if err := b.rdb.ZRem(ctx, b.k.workers(), "b").Err(); err != nil {
		t.Fatal(err)
	}
	ch, err := kb.Tick(ctx, time.Now())
	if err != nil || !slices.Equal(ch.Lost, []int{p}) || !slices.Equal(ch.Acquired, []int{p}) {
		t.Fatalf("b's tick after its lease ended: %+v, %v; want partition %d lost and taken again", ch, err, p)
	}
}

// A Keeper whose ownerships lapsed on its own clock (Redis unreachable for a while) while its
// lease lived on in Redis hands back the owner keys it no longer uses: they name a live
// worker, so another worker would never take those partitions, and this one, holding its
// share with others, would not either (a crawl then hung with work queued in them).
func TestKeeperHandsBackLapsedPartitions(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	a, b := twoWorkers(t, &Options{Partitions: 4, LeaseTTL: time.Minute})
	ka, kb := a.NewKeeper(), b.NewKeeper()
	start := time.Now()
	if ch, err := ka.Tick(ctx, start); err != nil || len(ch.Acquired) != 4 {
		t.Fatalf("a alone: %+v, %v; want the 4 partitions", ch, err)
	}
	if _, err := b.heartbeat(ctx); err != nil { // b is live: a's share is 2
		t.Fatal(err)
	}
	ch, err := ka.Tick(ctx, start.Add(time.Minute)) // a's ownerships lapsed on its clock
	if err != nil || len(ch.Lost) != 4 || len(ch.Acquired) != 2 {
		t.Fatalf("a after the lapse: %+v, %v; want 4 lost and its share of 2 taken again", ch, err)
	}
	if ch, err := kb.Tick(ctx, time.Now()); err != nil || len(ch.Acquired) != 2 {
		t.Fatalf("b: %+v, %v; want the 2 partitions a does not use", ch, err)
	}
}

// A worker whose ownerships lapsed on its own clock while its lease lived on in Redis (a Redis
// outage longer than the TTL's margin, Redis back before the lease ended) still has its name
// on their owner keys, and no other worker takes a partition from a live owner. When it held
// more than its fair share (surplus not yet released), it must give back the named partitions
// it does not take again: TestFleetRedisKilled stalled a minute with two partitions queued,
// owned in Redis by a live worker that no longer knew it held them.
func TestKeeperGivesBackWhatItLostAboveItsShare(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	const ttl = time.Minute
	a, b := twoWorkers(t, &Options{Partitions: 4, LeaseTTL: ttl})
	ka, kb := a.NewKeeper(), b.NewKeeper()
	t0 := time.Now()
	if ch, err := ka.Tick(ctx, t0); err != nil || len(ch.Acquired) != 4 {
		t.Fatalf("a alone: %+v, %v; want all 4", ch, err)
	}
	if ch, err := kb.Tick(ctx, t0); err != nil || len(ch.Acquired) != 0 || ch.Live != 2 {
		t.Fatalf("b with a alive: %+v, %v; want nothing, 2 live", ch, err)
	}
	late := t0.Add(ttl - ttl/safetyDiv) // a's ownerships lapse before it released its surplus
	ch, err := ka.Tick(ctx, late)
	if err != nil || len(ch.Lost) != 4 || len(ch.Acquired) != 2 {
		t.Fatalf("a after a local lapse: %+v, %v; want 4 lost and its share of 2 taken again", ch, err)
	}
	for range 3 {
		if _, err := kb.Tick(ctx, late); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(kb.Owned(late)); n != 2 {
		t.Errorf("b holds %d partitions, want the 2 a no longer holds", n)
	}
	for p := range 4 {
		tok, err := a.rdb.Get(ctx, a.k.owner(p)).Result()
		if err != nil {
			t.Fatal(err)
		}
		_, byA := ka.holding(p, late)
		_, byB := kb.holding(p, late)
		if byA == byB || byA != (tokenWorker(tok) == "a") {
			t.Errorf("partition %d: owner key %q, held by a %v, by b %v; want one holder, named by the key", p, tok, byA, byB)
		}
	}
}

// An acquire whose answer was lost (the call failed after its script ran) leaves an owner key
// naming a worker that does not hold the partition: its next Tick looks, even at its fair
// share, and gives the partition back.
func TestKeeperGivesBackAnAcquireItDidNotHear(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	a, b := twoWorkers(t, &Options{Partitions: 4, LeaseTTL: time.Minute})
	ka, kb := a.NewKeeper(), b.NewKeeper()
	settle(t, []*Keeper{ka, kb})
	p := kb.Owned(time.Now())[0].Partition
	if err := kb.Release(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.acquireFrom(ctx, time.Now(), p, ""); err != nil || !ok {
		t.Fatalf("a's acquire of %d: ok=%v err=%v", p, ok, err)
	}
	ka.scan.unsure = true // what Tick notes when an acquire call fails
	for range 2 {
		for _, k := range []*Keeper{ka, kb} {
			if _, err := k.Tick(ctx, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, ok := kb.holding(p, time.Now()); !ok {
		tok, _ := a.rdb.Get(ctx, a.k.owner(p)).Result()
		t.Errorf("partition %d: owner key %q, b does not hold it again", p, tok)
	}
	checkShares(t, []*Keeper{ka, kb})
}

// A surplus partition whose release fails (Redis unreachable, or a cluster down during a
// failover) is no longer held, yet its owner key still names the live worker, so no other
// worker takes it: the keeper's next Tick, at its fair share, looks again and gives it back.
// TestFleetClusterFailover stalled a minute with URLs queued in such a partition.
func TestKeeperReleasesAgainAfterAFailedRelease(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	a, b := twoWorkers(t, &Options{Partitions: 4, LeaseTTL: time.Minute})
	ka, kb := a.NewKeeper(), b.NewKeeper()
	if ch, err := ka.Tick(ctx, time.Now()); err != nil || len(ch.Acquired) != 4 {
		t.Fatalf("a alone: %+v, %v; want all 4", ch, err)
	}
	if _, err := b.heartbeat(ctx); err != nil { // b is live: a's share is 2
		t.Fatal(err)
	}
	ch, err := ka.Tick(ctx, time.Now())
	if err != nil || len(ch.Surplus) != 2 {
		t.Fatalf("a with b live: %+v, %v; want 2 surplus", ch, err)
	}
	down, cancel := context.WithCancel(ctx)
	cancel() // the release never reaches Redis
	for _, p := range ch.Surplus {
		if err := ka.Release(down, p); err == nil {
			t.Fatalf("release of %d with a cancelled context succeeded", p)
		}
	}
	for range 2 {
		for _, k := range []*Keeper{ka, kb} {
			if _, err := k.Tick(ctx, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, p := range ch.Surplus {
		if _, ok := kb.holding(p, time.Now()); !ok {
			tok, _ := a.rdb.Get(ctx, a.k.owner(p)).Result()
			t.Errorf("partition %d: owner key %q, b does not hold it", p, tok)
		}
	}
	checkShares(t, []*Keeper{ka, kb})
}
