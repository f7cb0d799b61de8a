package crawler

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestSchedule(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	s := newSchedule(10)
	take := func() []string {
		var out []string
		for h, ok := s.next(); ok; h, ok = s.next() {
			out = append(out, h)
		}
		return out
	}
	s.add([]string{"a", "b", "c"}, cold)
	s.add([]string{"b"}, cold) // already held: not twice
	s.admit()
	if got := take(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("queue = %v, want a b c in turn", got)
	}
	s.wakeAt("a", "gate-a", t0.Add(2*time.Second))
	s.wakeAt("b", "gate-b", t0.Add(time.Second))
	s.waitFor("c", "gate-c")
	s.add([]string{"a", "c"}, cold) // held elsewhere: stay there
	if got := take(); len(got) != 0 {
		t.Fatalf("queue = %v with every host held", got)
	}
	if at := s.nextAt(); !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("nextAt = %v, want the earliest (b's)", at)
	}
	s.due(t0.Add(time.Second))
	s.ended("gate-other")
	if got := take(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("at +1s = %v, want only b", got)
	}
	s.ended("gate-c")
	s.due(t0.Add(3 * time.Second))
	if got := take(); !slices.Equal(got, []string{"c", "a"}) {
		t.Fatalf("after c's gate ended and a's time came = %v, want c a", got)
	}
	// A job of a timed host's gate ends: ask it again at once (the rate may have changed);
	// its heap entry is stale and wakes nothing.
	s.wakeAt("a", "gate-a", t0.Add(time.Hour))
	s.ended("gate-a")
	if got := take(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after a's gate ended = %v, want a", got)
	}
	s.due(t0.Add(2 * time.Hour))
	if got := take(); len(got) != 0 {
		t.Fatalf("a stale entry queued %v", got)
	}
	s.waitFor("b", "gate-b")
	if !s.waiting("gate-b") || s.waiting("gate-a") {
		t.Fatalf("waiting: gate-b %v (b waits for it), gate-a %v (nothing does)", s.waiting("gate-b"), s.waiting("gate-a"))
	}
	s.forget("b", "gate-b")
	if len(s.byGate) != 0 || s.timed.Len() != 0 {
		t.Fatalf("schedule not empty: %v %v", s.byGate, s.timed)
	}
}

// cold says no host is warm.
func cold(string) bool { return false }

func TestScheduleWarmHostsGoFirst(t *testing.T) {
	// A host still being crawled that has new ready work (a link its page just found) is asked
	// at once, ahead of the hosts waiting for their turn and beyond maxActive: a broad crawl
	// finishes a host before it starts new ones.
	s := newSchedule(1)
	s.add([]string{"a", "b", "c"}, cold)
	s.admit()
	if h, _ := s.next(); h != "a" {
		t.Fatalf("first = %q, want a", h)
	}
	// a left the schedule (no ready work, a job running); its job found a link to it.
	s.add([]string{"a", "d"}, func(h string) bool { return h == "a" })
	s.admit()
	var got []string
	for h, ok := s.next(); ok; h, ok = s.next() {
		got = append(got, h)
	}
	if !slices.Equal(got, []string{"a"}) || !slices.Equal(s.pending, []string{"b", "c", "d"}) {
		t.Fatalf("queue %v, pending %v; want [a] and [b c d]", got, s.pending)
	}
}

func TestDropIdleHosts(t *testing.T) {
	// A host's record leaves memory once it has no job, no ready work and no use for hostIdle.
	c := openSeeded(t, "http://127.0.0.2:9/")
	now := time.Now()
	c.mu.Lock()
	c.hostLocked("idle.test")
	c.hostLocked("busy.test").jobs = 1
	c.hostLocked("127.0.0.2:9") // has a ready URL (the seed)
	c.hostLocked("recent.test")
	for _, h := range []string{"idle.test", "busy.test", "127.0.0.2:9"} {
		c.hosts[h].used = now.Add(-hostIdle)
	}
	c.mu.Unlock()
	c.dropIdleHosts(now)
	var kept []string
	for h := range c.hosts {
		kept = append(kept, h)
	}
	slices.Sort(kept)
	if want := []string{"127.0.0.2:9", "busy.test", "recent.test"}; !slices.Equal(kept, want) {
		t.Fatalf("records kept %v, want %v", kept, want)
	}
}

func TestScheduleBoundsHostsInPlay(t *testing.T) {
	// At most maxActive hosts are in play; the others wait in order, and each host that leaves
	// lets the next one in.
	s := newSchedule(2)
	s.add([]string{"a", "b", "c", "d"}, cold)
	s.admit()
	h1, _ := s.next()
	h2, _ := s.next()
	if _, ok := s.next(); ok || h1 != "a" || h2 != "b" {
		t.Fatalf("in play %q %q and more; want a and b only", h1, h2)
	}
	s.requeue("a") // a has more work; b is done (left the schedule)
	s.admit()
	var got []string
	for h, ok := s.next(); ok; h, ok = s.next() {
		got = append(got, h)
	}
	if !slices.Equal(got, []string{"a", "c"}) || !slices.Equal(s.pending, []string{"d"}) {
		t.Fatalf("after b left: in play %v, pending %v; want [a c] and [d]", got, s.pending)
	}
}

func TestSeedsAddedInChunks(t *testing.T) {
	// A seed list longer than a chunk is enqueued whole, one transaction per chunk.
	defer func(n int) { seedChunk = n }(seedChunk)
	seedChunk = 2
	cfg := Defaults()
	cfg.Dir = t.TempDir()
	for i := range 5 {
		cfg.Seeds = append(cfg.Seeds, fmt.Sprintf("http://127.0.0.%d:9/", i+2))
	}
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n := c.fr.Counts().Queued; n != 5 {
		t.Fatalf("queued %d seeds, want 5", n)
	}
}
