package retry

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestUnansweredGivesUp: requests that time out one after another give their host up at the
// UnansweredLimit-th, not before; an answer in between starts the count again.
func TestUnansweredGivesUp(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const timeout = 3 * time.Second
	gap := 10 * time.Second // a host slowed to 0.1 req/s
	var u Unanswered
	at := t0
	for i := range UnansweredLimit {
		gave := u.Failed(fmt.Sprintf("/p/%d", i), at, at.Add(timeout), timeout, "timeout", "timeout: request timeout exceeded")
		if want := i == UnansweredLimit-1; gave != want || u.GivenUp() != want {
			t.Fatalf("request %d: Failed = %v, GivenUp = %v; want %v", i+1, gave, u.GivenUp(), want)
		}
		at = at.Add(timeout + gap)
	}
	if u.Reason() != "timeout" || !strings.Contains(u.String(), "8 requests in a row") {
		t.Errorf("Reason %q, String %q", u.Reason(), u.String())
	}
	if u.Failed("/p/x", at, at.Add(timeout), timeout, "timeout", "") {
		t.Error("Failed reported a give-up twice")
	}
	u.Answered()
	if u.GivenUp() {
		t.Error("an answer did not take the host back")
	}

	// An answer after 7 failures: 7 more are not enough.
	u = Unanswered{}
	at = t0
	fail := func(n int) {
		for i := range n {
			u.Failed(fmt.Sprintf("/q/%d", i), at, at.Add(timeout), timeout, "timeout", "")
			at = at.Add(timeout + gap)
		}
	}
	fail(UnansweredLimit - 1)
	u.Answered()
	fail(UnansweredLimit - 1)
	if u.GivenUp() {
		t.Error("given up after an answer and 7 failures")
	}
	fail(1)
	if !u.GivenUp() {
		t.Error("not given up after 8 failures in a row")
	}
}

// TestUnansweredOverlapCountsOnce: requests in flight together, as a window of 8 sends them,
// count as one; only a request sent after the last counted one ended counts again.
func TestUnansweredOverlapCountsOnce(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const timeout = 300 * time.Millisecond
	var u Unanswered
	rounds := 0
	for at := t0; !u.GivenUp(); at = at.Add(timeout + time.Millisecond) {
		rounds++
		for w := range 8 {
			sent := at.Add(time.Duration(w) * time.Millisecond)
			u.Failed(fmt.Sprintf("/r%d/%d", rounds, w), sent, sent.Add(timeout), timeout, "timeout", "")
		}
		if rounds > 100 {
			t.Fatal("never given up")
		}
	}
	if rounds != UnansweredLimit {
		t.Errorf("given up after %d rounds of 8 requests at once, want %d", rounds, UnansweredLimit)
	}
}

// TestUnansweredNeedsURLsAndTime: one URL failing again and again is the page's (it fails by
// --max-attempts), and fast refusals must last UnansweredLimit × the timeout: a host
// restarting for a few seconds is not given up.
func TestUnansweredNeedsURLsAndTime(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const timeout = 3 * time.Second
	var u Unanswered
	at := t0
	for range 3 * UnansweredLimit {
		u.Failed("/same", at, at.Add(timeout), timeout, "timeout", "")
		at = at.Add(2 * timeout)
	}
	if u.GivenUp() {
		t.Error("given up on one URL's failures")
	}

	u = Unanswered{}
	var gaveAt time.Duration
	for i := 0; i < 100 && !u.GivenUp(); i++ {
		sent := t0.Add(time.Duration(i) * time.Second) // refused at once, one a second
		if u.Failed(fmt.Sprintf("/p/%d", i), sent, sent.Add(time.Millisecond), timeout, "conn-refused", "") {
			gaveAt = sent.Add(time.Millisecond).Sub(t0)
		}
	}
	if want := UnansweredLimit * timeout; gaveAt < want || gaveAt > want+time.Second {
		t.Errorf("fast refusals gave up after %v, want at %v (UnansweredLimit × timeout)", gaveAt, want)
	}
}

// TestUnansweredForgettable: an empty run, or one not extended for UnansweredMemory, says
// nothing; a host given up is remembered.
func TestUnansweredForgettable(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var u Unanswered
	if !u.Forgettable(t0) {
		t.Error("empty run not forgettable")
	}
	u.Failed("/a", t0, t0.Add(time.Second), time.Second, "timeout", "")
	if u.Forgettable(t0.Add(UnansweredMemory)) || !u.Forgettable(t0.Add(time.Second+UnansweredMemory)) {
		t.Error("a run is forgotten before UnansweredMemory or kept after it")
	}
	at := t0
	for i := range UnansweredLimit {
		u.Failed(fmt.Sprintf("/p/%d", i), at, at.Add(time.Second), time.Second, "timeout", "")
		at = at.Add(2 * time.Second)
	}
	if !u.GivenUp() || u.Forgettable(at.Add(24*time.Hour)) {
		t.Error("a host given up is forgotten")
	}
}

// TestUnansweredBounds: whatever the window and the pacing, a host that never answers is
// given up after at most UnansweredLimit × window requests when they time out (those in flight
// at the give-up included), and within UnansweredLimit × (2 × timeout + the longest gap
// between a free slot and the gate's next request) of its first request, when the window
// shrinks meanwhile (a request then waits for one in flight to end) and when some are refused
// at once: the figures docs/guarantees.md states. Simulated with random windows, shrinks, gaps
// and durations.
func TestUnansweredBounds(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewSource(seed))
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const timeout, maxGap = time.Second, 3 * time.Second
	type req struct{ sent, ended time.Time }
	for trial := range 4000 {
		refusals := trial%2 == 1
		window := 1 + rnd.Intn(16)
		start := window
		send := func(at time.Time) req {
			d := timeout
			if refusals && rnd.Intn(2) == 0 {
				d = time.Duration(rnd.Intn(5)) * time.Millisecond
			}
			return req{at, at.Add(d)}
		}
		var flight []req
		for range window {
			flight = append(flight, send(t0.Add(time.Duration(rnd.Intn(1000))*time.Millisecond)))
		}
		first := flight[0].sent
		for _, r := range flight {
			if r.sent.Before(first) {
				first = r.sent
			}
		}
		var u Unanswered
		var gaveAt time.Time
		sent := window
		for gaveAt.IsZero() {
			// the request that ends first gets no answer
			sort.Slice(flight, func(a, b int) bool { return flight[a].ended.Before(flight[b].ended) })
			r := flight[0]
			flight = flight[1:]
			if u.Failed(fmt.Sprintf("/p/%d", sent), r.sent, r.ended, timeout, "timeout", "") {
				gaveAt = r.ended
			}
			if window > 1 && rnd.Intn(4) == 0 {
				window-- // the controller cuts the window: a slot freed may not be used
			}
			if gaveAt.IsZero() && len(flight) < window { // the gate sends again after its pace
				flight = append(flight, send(r.ended.Add(time.Duration(rnd.Int63n(int64(maxGap))))))
				sent++
			}
			if sent > 100_000 {
				t.Fatalf("trial %d: never given up", trial)
			}
		}
		if limit := UnansweredLimit * start; !refusals && sent > limit {
			t.Fatalf("trial %d, window %d: %d requests sent before the give-up, want at most %d", trial, start, sent, limit)
		}
		took := gaveAt.Sub(first)
		if limit := UnansweredLimit * (2*timeout + maxGap); took > limit || took < UnansweredLimit*timeout {
			t.Fatalf("trial %d, window %d, refusals %v: given up %v after the first request, want between %v and %v",
				trial, start, refusals, took, UnansweredLimit*timeout, limit)
		}
	}
}

func TestNoAnswer(t *testing.T) {
	for kind, want := range map[string]bool{
		"timeout": true, "conn-refused": true, "conn-reset": true,
		"dns": false, "tls": false, "protocol": false, "canceled": false, "other": false,
	} {
		if got := NoAnswer(kind); got != want {
			t.Errorf("NoAnswer(%q) = %v, want %v", kind, got, want)
		}
	}
}
