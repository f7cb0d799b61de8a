package crawler

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"
	"time"
)

func TestSchedule(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	s := plainSchedule(10)
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

// plainSchedule is a schedule of hosts that all have the starting rate, with no budget: the
// hosts take plain turns, and maxActive alone bounds the hosts in play.
func plainSchedule(maxActive int) *schedule {
	return newSchedule(maxActive, math.Inf(1), 0, func(string) float64 { return 2 })
}

func TestScheduleWarmHostsGoFirst(t *testing.T) {
	// A host still being crawled that has new ready work (a link its page just found) is asked
	// at once, ahead of the hosts waiting for their turn and beyond maxActive: a broad crawl
	// finishes a host before it starts new ones.
	s := plainSchedule(1)
	s.add([]string{"a", "b", "c"}, cold)
	s.admit()
	if h, _ := s.next(); h != "a" {
		t.Fatalf("first = %q, want a", h)
	}
	s.served()
	s.forget("a", "gate-a") // no ready work, a job running
	// Its job found a link to it.
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
	s := plainSchedule(2)
	s.add([]string{"a", "b", "c", "d"}, cold)
	s.admit()
	h1, _ := s.next()
	h2, _ := s.next()
	if _, ok := s.next(); ok || h1 != "a" || h2 != "b" {
		t.Fatalf("in play %q %q and more; want a and b only", h1, h2)
	}
	s.requeue("a")          // a has more work
	s.forget("b", "gate-b") // b is done
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

// simHost is a host of simulate: a token bucket of burst 1 at rate, a window of requests in
// flight, and pages jobs to do.
type simHost struct {
	rate      float64
	window    int
	pages     int
	inflight  int
	nextToken time.Duration
	starved   bool // a pass left a worker free while only its rate held it back
}

// simRun is what simulate counts.
type simRun struct {
	jobs        map[string][]time.Duration // each host's jobs' start times
	starvedWith map[string]int             // pages a host had left when a pass that left a worker free first found it held by its rate alone
	end         time.Duration              // when the last job ended
}

// simulate runs the dispatcher's loop over s on a fake clock: workers jobs at most in flight,
// each taking latency; arrive[t] are the hosts found at t (their frontier's ready hosts). It
// asks the schedule as dispatch does (next, then a job, requeue or forget; or wakeAt its next
// token; or waitFor a full window) and notes, as reportHeld does, the hosts held back by their
// rate alone in a pass that left a worker free.
func simulate(s *schedule, hosts map[string]*simHost, arrive map[time.Duration][]string, workers int, latency time.Duration) simRun {
	run := simRun{jobs: map[string][]time.Duration{}, starvedWith: map[string]int{}}
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	var ends []time.Duration // end times of the jobs in flight
	var endHost []string
	now := time.Duration(0)
	arrivals := make([]time.Duration, 0, len(arrive))
	for at := range arrive {
		arrivals = append(arrivals, at)
	}
	slices.Sort(arrivals)
	left := 0
	for _, h := range hosts {
		left += h.pages
	}
	for left > 0 || len(ends) > 0 {
		// The next event: a job's end, a timed host's time, or an arrival.
		next := time.Duration(math.MaxInt64)
		for _, e := range ends {
			next = min(next, e)
		}
		if at := s.nextAt(); !at.IsZero() {
			next = min(next, max(at.Sub(t0), now))
		}
		if len(arrivals) > 0 {
			next = min(next, arrivals[0])
		}
		if next == time.Duration(math.MaxInt64) {
			break // nothing will happen: work is stuck
		}
		now = next
		for i := 0; i < len(ends); {
			if ends[i] <= now {
				h := endHost[i]
				hosts[h].inflight--
				s.ended(h)
				ends[i], endHost[i] = ends[len(ends)-1], endHost[len(endHost)-1]
				ends, endHost = ends[:len(ends)-1], endHost[:len(endHost)-1]
				continue
			}
			i++
		}
		for len(arrivals) > 0 && arrivals[0] <= now {
			s.add(arrive[arrivals[0]], cold)
			arrivals = arrivals[1:]
		}
		s.due(t0.Add(now))
		s.admit()
		var held []string
		for len(ends) < workers {
			name, ok := s.next()
			if !ok {
				break
			}
			h := hosts[name]
			switch {
			case h.inflight >= h.window:
				s.waitFor(name, name)
			case now < h.nextToken:
				s.wakeAt(name, name, t0.Add(h.nextToken))
				held = append(held, name)
			default:
				s.served()
				run.jobs[name] = append(run.jobs[name], now)
				h.inflight++
				h.pages--
				left--
				h.nextToken = now + time.Duration(float64(time.Second)/h.rate)
				ends, endHost = append(ends, now+latency), append(endHost, name)
				run.end = max(run.end, now+latency)
				if h.pages > 0 {
					s.requeue(name)
				} else {
					s.forget(name, name)
				}
			}
		}
		if len(ends) < workers {
			for _, name := range held {
				if h := hosts[name]; !h.starved {
					h.starved = true
					run.starvedWith[name] = h.pages
				}
			}
		}
	}
	return run
}

// simRates is the rate function of a simulation's hosts.
func simRates(hosts map[string]*simHost) func(string) float64 {
	return func(h string) float64 { return hosts[h].rate }
}

// countIn counts the times in [from, to).
func countIn(at []time.Duration, from, to time.Duration) int {
	n := 0
	for _, a := range at {
		if a >= from && a < to {
			n++
		}
	}
	return n
}

// TestScheduleHubSparesTheHostsInPlay: two hosts are crawled at about 1,150 requests/s
// (windows of 8, 14 ms a request, 32 workers) when a page names 20,000 new hosts (2 req/s,
// a robots.txt and a page each). The two keep their requests/s in the 5 s after it; with
// plain turns among 2,048 hosts in play they got one request in about 2,048, 1 a second.
func TestScheduleHubSparesTheHostsInPlay(t *testing.T) {
	const workers, maxActive = 32, 2048
	hosts := map[string]*simHost{
		"old1": {rate: 1000, window: 8, pages: 20000},
		"old2": {rate: 1000, window: 8, pages: 20000},
	}
	var fresh []string
	for i := range 20000 {
		name := fmt.Sprintf("h%05d", i)
		hosts[name] = &simHost{rate: 2, window: 2, pages: 2}
		fresh = append(fresh, name)
	}
	hubAt := 5 * time.Second
	arrive := map[time.Duration][]string{0: {"old1", "old2"}, hubAt: fresh}
	s := newSchedule(maxActive, maxActive/2*2, workers, simRates(hosts))
	run := simulate(s, hosts, arrive, workers, 14*time.Millisecond)
	old := append(slices.Clone(run.jobs["old1"]), run.jobs["old2"]...)
	before := float64(countIn(old, hubAt-2*time.Second, hubAt)) / 2
	after := float64(countIn(old, hubAt, hubAt+5*time.Second)) / 5
	newJobs := 0
	for _, h := range fresh {
		newJobs += countIn(run.jobs[h], hubAt, hubAt+5*time.Second)
	}
	t.Logf("the two hosts: %.0f requests/s before the hub page, %.0f in the 5 s after (%.2f of it); the new hosts %.0f requests/s beside them; all done at %s",
		before, after, after/before, float64(newJobs)/5, run.end)
	if after < 0.9*before {
		t.Errorf("the hosts in play went from %.0f to %.0f requests/s when the new hosts came, want ≥ 0.9 of it", before, after)
	}
	if newJobs == 0 {
		t.Errorf("the new hosts had no request in the 5 s after the hub page: the workers the two leave free are theirs")
	}
}

// TestScheduleBroadWebKeepsHostsTogether: a broad web of equal hosts, more than the workers can
// serve at their starting rate (2 req/s, 40 ms a request, 32 workers: 800 requests/s for
// hosts × 2 req/s), is crawled with every host in play from the start, in plain turns, so
// the hosts advance together and finish together: no host is held back by its rate alone
// with a worker free (which lets its rate grow, into the host's limit) while it has much left
// to fetch. Putting new hosts in play only as the workers need them left a tail of about 400
// hosts (800 ÷ 2) with most of their pages left and workers free once the last was in play.
func TestScheduleBroadWebKeepsHostsTogether(t *testing.T) {
	const workers, maxActive = 32, 2048
	for _, tc := range []struct{ hosts, pages int }{{1000, 30}, {10000, 5}} {
		t.Run(fmt.Sprintf("%dx%d", tc.hosts, tc.pages), func(t *testing.T) {
			hosts := map[string]*simHost{}
			var seeds []string
			for i := range tc.hosts {
				name := fmt.Sprintf("h%05d", i)
				hosts[name] = &simHost{rate: 2, window: 2, pages: tc.pages}
				seeds = append(seeds, name)
			}
			s := newSchedule(maxActive, maxActive/2*2, workers, simRates(hosts))
			run := simulate(s, hosts, map[time.Duration][]string{0: seeds}, workers, 40*time.Millisecond)
			most, many := 0, 0
			for _, left := range run.starvedWith {
				most = max(most, left)
				if left > tc.pages/5 {
					many++
				}
			}
			ideal := time.Duration(float64(tc.hosts*tc.pages) / 800 * float64(time.Second))
			t.Logf("%d hosts × %d pages: done at %s (%s at 800 requests/s); %d hosts held back by their rate with a worker free, with at most %d pages left; %d with more than %d",
				tc.hosts, tc.pages, run.end, ideal, len(run.starvedWith), most, many, tc.pages/5)
			if many > 0 {
				t.Errorf("%d hosts were held back by their rate alone with a worker free while they had more than %d of %d pages left", many, tc.pages/5, tc.pages)
			}
			if run.end > ideal*11/10 {
				t.Errorf("done at %s, want within 1.1 × %s", run.end, ideal)
			}
		})
	}
}

// TestScheduleTurnsFollowRates: hosts that always have a job ready get turns in proportion
// to their rates: one host at 1,000 req/s beside 100 at 2 req/s gets 1,000 ÷ 1,200 of them,
// where plain turns gave it 1 in 101.
func TestScheduleTurnsFollowRates(t *testing.T) {
	rates := map[string]float64{"fast": 1000}
	hosts := []string{"fast"}
	for i := range 100 {
		h := fmt.Sprintf("slow%03d", i)
		rates[h] = 2
		hosts = append(hosts, h)
	}
	s := newSchedule(1024, math.Inf(1), 0, func(h string) float64 { return rates[h] })
	s.add(hosts, cold)
	s.admit()
	turns := map[string]int{}
	const n = 120_000
	for range n {
		h, ok := s.next()
		if !ok {
			t.Fatal("no host queued")
		}
		s.served()
		turns[h]++
		s.requeue(h)
	}
	share := float64(turns["fast"]) / n
	t.Logf("fast: %.4f of %d turns (want 1000/1200 = %.4f); slow000: %d, slow099: %d", share, n, 1000.0/1200, turns["slow000"], turns["slow099"])
	if math.Abs(share-1000.0/1200) > 0.01 {
		t.Errorf("the 1,000 req/s host got %.4f of the turns, want %.4f ± 0.01", share, 1000.0/1200)
	}
	for h, r := range rates {
		if want := n * r / 1200; math.Abs(float64(turns[h])-want) > 0.02*want+2 {
			t.Errorf("%s (%g req/s) got %d turns, want about %.0f", h, r, turns[h], want)
		}
	}
}

// TestScheduleEqualRatesKeepPlainTurns: hosts of one rate are asked in the order they entered
// the queue, whatever mix of jobs, waits and wake-ups came before, as a plain queue asks
// them: a broad web of equal hosts is crawled in the order it was before turns followed rates.
func TestScheduleEqualRatesKeepPlainTurns(t *testing.T) {
	seed := time.Now().UnixNano()
	rnd := rand.New(rand.NewSource(seed))
	t.Logf("seed %d", seed)
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	s := plainSchedule(1 << 20)
	var plain []string          // the order a plain queue asks the hosts in
	away := map[string]string{} // taken hosts put back to wait: how (timed, waiting)
	var hosts []string
	for i := range 200 {
		hosts = append(hosts, fmt.Sprintf("h%03d", i))
	}
	s.add(hosts, cold)
	s.admit()
	plain = append(plain, hosts...)
	now := t0
	for step := range 20000 {
		switch op := rnd.Intn(10); {
		case op < 6: // ask the next host: a job (back in the queue), a wait for a time or for its gate
			h, ok := s.next()
			if len(plain) == 0 {
				if ok {
					t.Fatalf("step %d: next = %q, want none queued", step, h)
				}
				continue
			}
			if !ok || h != plain[0] {
				t.Fatalf("step %d: next = %q %v, want %q", step, h, ok, plain[0])
			}
			plain = plain[1:]
			switch rnd.Intn(3) {
			case 0:
				s.served()
				s.requeue(h)
				plain = append(plain, h)
			case 1:
				at := now.Add(time.Duration(rnd.Intn(1000))*time.Millisecond + time.Duration(step)) // no two alike
				s.wakeAt(h, "gate-"+h, at)
				away[h] = "timed"
			case 2:
				s.waitFor(h, "gate-"+h)
				away[h] = "waiting"
			}
		case op < 8: // time passes: timed hosts come due, in their times' order
			now = now.Add(time.Duration(rnd.Intn(300)) * time.Millisecond)
			var due []string
			for _, e := range s.timed {
				if sl := s.hosts[e.host]; sl.kind == slotTimed && sl.at.Equal(e.at) && !e.at.After(now) {
					due = append(due, e.host)
				}
			}
			slices.SortStableFunc(due, func(a, b string) int { return s.hosts[a].at.Compare(s.hosts[b].at) })
			s.due(now)
			for _, h := range due {
				delete(away, h)
			}
			plain = append(plain, due...)
		default: // a job of some host's gate ends
			h := hosts[rnd.Intn(len(hosts))]
			if away[h] != "" {
				delete(away, h)
				plain = append(plain, h)
			}
			s.ended("gate-" + h)
		}
	}
}

// TestScheduleBudgetBoundsNewHosts: pending hosts are put in play while the rates in play add
// up to no more than the budget, so that hosts crawled fast leave room for few new ones; a new
// host still takes a worker no host in play can use (none queued), and one leaving makes room.
func TestScheduleBudgetBoundsNewHosts(t *testing.T) {
	rates := map[string]float64{"fast1": 1000, "fast2": 1000}
	s := newSchedule(2048, 2048, 32, func(h string) float64 {
		if r, ok := rates[h]; ok {
			return r
		}
		return 2
	})
	s.add([]string{"fast1", "fast2"}, cold)
	var fresh []string
	for i := range 5000 {
		fresh = append(fresh, fmt.Sprintf("h%04d", i))
	}
	s.add(fresh, cold)
	s.admit()
	if got, want := s.inPlay(), 2+24; got != want { // (2048 - 2,000) ÷ 2
		t.Fatalf("%d hosts in play, want %d: 2,000 req/s of the 2,048 are the fast hosts'", got, want)
	}
	for range 2 + 24 {
		h, _ := s.next()
		s.waitFor(h, "gate-"+h) // every host in play waits for a job of its own to end
	}
	h, ok := s.next()
	if !ok || h != "h0024" {
		t.Fatalf("none queued, a worker free: next = %q %v, want the oldest pending host, h0024", h, ok)
	}
	s.served()
	s.forget(h, "gate-"+h)
	// At most 32 (the spare allowed) are in play that way, however many workers are free.
	var spare []string
	for range 40 {
		h, ok := s.next()
		if !ok {
			break
		}
		spare = append(spare, h)
		s.waitFor(h, "gate-"+h)
	}
	if len(spare) != 32 || spare[0] != "h0025" {
		t.Fatalf("put in play past the budget: %d hosts from %v, want 32 from h0025", len(spare), spare[:min(len(spare), 1)])
	}
	s.ended("gate-" + spare[0])
	if h, _ := s.next(); h != spare[0] {
		t.Fatalf("next = %q, want %s, queued again", h, spare[0])
	}
	s.forget(spare[0], "gate-"+spare[0]) // done: room for one more past the budget
	if h, ok := s.next(); !ok || h != "h0057" {
		t.Fatalf("after a host past the budget left: next = %q %v, want h0057", h, ok)
	}
	s.waitFor("h0057", "gate-h0057")
	s.ended("gate-fast1")
	if h, _ := s.next(); h != "fast1" {
		t.Fatalf("next = %q, want fast1, queued again", h)
	}
	s.forget("fast1", "gate-fast1") // done: its 1,000 req/s make room for new hosts
	s.admit()
	if got, want := s.inPlay(), 1+24+32+(2048-1000-2*(24+32))/2; got != want {
		t.Fatalf("%d hosts in play after fast1 left, want %d", got, want)
	}
}
