package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/crawl-project/crawl/hostlimit"
)

// A host's learned politeness moves with its partition: worker a's registry saves the
// Crawl-delay ceiling it learned, b takes the partition over and b's registry starts from it.
// A registry saving hosts of partitions its worker does not hold writes nothing for them.
func TestHostStateFollowsThePartition(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	a, b := twoWorkers(t, &Options{Partitions: 4, LeaseTTL: time.Minute})
	ka, kb := a.NewKeeper(), b.NewKeeper()
	if _, err := ka.Tick(ctx, time.Now()); err != nil { // alone: a takes all 4 partitions
		t.Fatal(err)
	}
	host := "polite.example"
	ra := hostlimit.New(hostlimit.Config{}, ka.HostStates(5*time.Second))
	ra.SetCeiling(host, 0.5)
	if err := ra.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := ka.ReleaseAll(ctx); err != nil {
		t.Fatal(err)
	}
	// a no longer holds anything: its saves are dropped.
	ra.SetCeiling(host, 7)
	if err := ra.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := kb.Tick(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	rb := hostlimit.New(hostlimit.Config{}, kb.HostStates(5*time.Second))
	st, ok := rb.Host(time.Now(), host)
	if ok {
		t.Fatalf("host in memory before use: %+v", st)
	}
	if tk, _ := rb.TryAdmit(time.Now(), host); tk == nil {
		t.Fatal("first request not admitted")
	}
	st, _ = rb.Host(time.Now(), host)
	if st.Ceiling != 0.5 || st.StateError != "" {
		t.Fatalf("b's registry: ceiling %v (state error %q), want a's 0.5", st.Ceiling, st.StateError)
	}
}

// A host's robots.txt moves with its partition: a saves it while it holds the partition, b
// loads it after taking over; a's save once it no longer holds the partition is dropped, and
// SaveRobots says so.
func TestRobotsFollowThePartition(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	a, b := twoWorkers(t, &Options{Partitions: 4, LeaseTTL: time.Minute})
	ka, kb := a.NewKeeper(), b.NewKeeper()
	if _, err := ka.Tick(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	host := "polite.example"
	ra, rb := ka.Robots(5*time.Second), kb.Robots(5*time.Second)
	if _, ok, err := rb.LoadRobots(host); ok || err != nil {
		t.Fatalf("robots.txt before any save: %v, %v", ok, err)
	}
	if saved, err := ra.SaveRobots(host, []byte("first")); !saved || err != nil {
		t.Fatalf("a's save while it holds the partition: saved %v, %v", saved, err)
	}
	if err := ka.ReleaseAll(ctx); err != nil {
		t.Fatal(err)
	}
	if saved, err := ra.SaveRobots(host, []byte("after release")); saved || err != nil {
		t.Fatalf("a's save after the release: saved %v, %v; want skipped without error", saved, err)
	}
	if _, err := kb.Tick(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := rb.LoadRobots(host); string(got) != "first" || !ok || err != nil {
		t.Fatalf("b loads %q, %v, %v; want a's save while it held the partition", got, ok, err)
	}
	if saved, err := rb.SaveRobots(host, []byte("second")); !saved || err != nil {
		t.Fatalf("b's save: saved %v, %v", saved, err)
	}
	if got, _, _ := ra.LoadRobots(host); string(got) != "second" {
		t.Fatalf("a loads %q, want b's save", got)
	}
}

// A host's saved state expires HostStateTTL after its last save, its robots.txt RobotsTTL
// after its last save (by default HostStateTTL too), so an abandoned crawl's are not kept forever.
func TestHostStateExpires(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	rdb := newRedis(t)
	s := newStore(t, rdb, "a", &Options{Partitions: 1, HostStateTTL: 300 * time.Millisecond, RobotsTTL: time.Hour})
	o := mustAcquire(t, s, 0)
	if err := s.SaveHostStates(ctx, o, map[string][]byte{"h.example": []byte("state")}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveRobots(ctx, o, "h.example", []byte("robots")); err != nil {
		t.Fatal(err)
	}
	if ttl, err := rdb.PTTL(ctx, s.k.state(0, "h.example")).Result(); err != nil || ttl <= 0 || ttl > 300*time.Millisecond {
		t.Fatalf("state's expiry %v (%v), want within 300 ms", ttl, err)
	}
	if ttl, err := rdb.PTTL(ctx, s.k.robots(0, "h.example")).Result(); err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("robots.txt's expiry %v (%v), want within the hour (RobotsTTL)", ttl, err)
	}
	if d := (*Options)(nil).withDefaults(); d.HostStateTTL != 30*24*time.Hour || d.RobotsTTL != d.HostStateTTL {
		t.Errorf("default HostStateTTL %v, RobotsTTL %v; want 30 days both", d.HostStateTTL, d.RobotsTTL)
	}
	if d := (&Options{HostStateTTL: time.Hour}).withDefaults(); d.RobotsTTL != time.Hour {
		t.Errorf("RobotsTTL %v, want HostStateTTL's hour by default", d.RobotsTTL)
	}
}
