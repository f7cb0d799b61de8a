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
	if h, _ := s.next(); h != "a" {
		t.Fatalf("first = %q, want a", h)
	}
	// a left the schedule (no ready work, a job running); its job found a link to it.
	s.add([]string{"a", "d"}, func(h string) bool { return h == "a" })
	if h, _ := s.next(); h != "a" || !slices.Equal(s.pending, []string{"b", "c", "d"}) {
		t.Fatalf("next %q, pending %v; want a and [b c d]", h, s.pending)
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
	for _, want := range []string{"a", "b"} {
		h, _ := s.next()
		if h != want {
			t.Fatalf("next = %q, want %q", h, want)
		}
		s.waitFor(h, "gate-"+h) // its gate's window is full
	}
	if h, ok := s.next(); ok {
		t.Fatalf("next = %q with a and b in play; want none", h)
	}
	s.ended("gate-a")
	s.ended("gate-b")
	if h, _ := s.next(); h != "a" {
		t.Fatalf("next = %q, want a", h)
	}
	s.waitFor("a", "gate-a") // a has more work
	if h, _ := s.next(); h != "b" {
		t.Fatalf("next = %q, want b", h)
	}
	s.forget("b", "gate-b") // b is done: it leaves the schedule
	var got []string
	for h, ok := s.next(); ok; h, ok = s.next() {
		got = append(got, h)
		s.waitFor(h, "gate-"+h)
	}
	if !slices.Equal(got, []string{"c"}) || !slices.Equal(s.pending, []string{"d"}) {
		t.Fatalf("after b left: put in play %v, pending %v; want [c] and [d]", got, s.pending)
	}
}

// TestScheduleNewHostsTakeWhatIsLeft: a page names 5,000 new hosts while two hosts are being
// crawled. As long as a host in play is queued (its gate admits a request: the dispatcher
// requeues it after its job), the dispatcher is given it, not a new host; a new host is put in
// play, oldest first, only when every host in play waits (for a token, for a job of its gate
// to end), and a host in play that is queued again goes before the next new one. Else the
// workers are shared out among thousands of hosts in play, and each host already being
// crawled gets one request in thousands.
func TestScheduleNewHostsTakeWhatIsLeft(t *testing.T) {
	s := newSchedule(2048)
	s.add([]string{"old1", "old2"}, cold)
	for range 2 {
		h, _ := s.next()
		s.requeue(h) // it got a job and has more work
	}
	fresh := make([]string, 5000)
	for i := range fresh {
		fresh[i] = fmt.Sprintf("h%04d", i)
	}
	s.add(fresh, cold)
	for i := range 1000 {
		h, _ := s.next()
		if h != "old1" && h != "old2" {
			t.Fatalf("ask %d: next = %q with old1 and old2 queued; want one of them", i, h)
		}
		s.requeue(h)
	}
	// Both gates' windows fill: the next host asked is a new one.
	for range 2 {
		h, _ := s.next()
		s.waitFor(h, "gate-"+h)
	}
	for _, want := range []string{"h0000", "h0001"} {
		h, _ := s.next()
		if h != want {
			t.Fatalf("with old1 and old2 waiting: next = %q, want %q", h, want)
		}
		s.wakeAt(h, "gate-"+h, time.Now().Add(time.Second)) // its next token
	}
	s.ended("gate-old2") // a job of old2 ended: it goes before the next new host
	if h, _ := s.next(); h != "old2" {
		t.Fatalf("after old2's job ended: next = %q, want old2", h)
	}
	if len(s.pending) != 4998 {
		t.Fatalf("%d hosts pending, want 4998 (two in play)", len(s.pending))
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
