package fleet

import (
	"context"
	"testing"
	"time"
)

// paceAt and paceHoldAt take the time (ms on Redis' clock) as an argument: these tests drive
// a gate's pace with a fake clock against a real redis-server.

const paceGate = "api.example:443"

func mustPace(t *testing.T, s *Store, at int64, interval, late time.Duration) PaceSlot {
	t.Helper()
	slot, err := s.paceAt(context.Background(), at, paceGate, interval, late)
	if err != nil {
		t.Fatal(err)
	}
	return slot
}

func mustHold(t *testing.T, s *Store, at int64, interval, pause time.Duration, refused bool) {
	t.Helper()
	if err := s.paceHoldAt(context.Background(), at, paceGate, interval, pause, refused); err != nil {
		t.Fatal(err)
	}
}

func reserved(wait, late time.Duration) PaceSlot {
	return PaceSlot{State: PaceReserved, Wait: wait, Late: late}
}

// The workers' reservations leave one interval and the fleet's lateness apart, in the order
// they were asked, whoever asks.
func TestPaceSpacesTheFleet(t *testing.T) {
	parallel(t)
	a, b := twoWorkers(t, &Options{Partitions: 8})
	const t0 = 1_000_000
	ms := time.Millisecond
	steps := []struct {
		s    *Store
		at   int64
		want PaceSlot
	}{
		{a, t0, reserved(0, 5*ms)},               // next: t0+255
		{b, t0, reserved(255*ms, 5*ms)},          // next: t0+510
		{a, t0 + 100, reserved(410*ms, 5*ms)},    // next: t0+765
		{b, t0 + 2000, reserved(0, 5*ms)},        // long after: at once
		{a, t0 + 2000, reserved(255*ms, 5*ms)},   // behind b
		{b, t0 + 10_000, reserved(0, 5*ms)},      // idle meanwhile: at once
		{a, t0 + 10_000, reserved(255*ms, 5*ms)}, // and spaced again
	}
	for i, st := range steps {
		if got := mustPace(t, st.s, st.at, 250*ms, 5*ms); got != st.want {
			t.Errorf("step %d (%s at +%d ms): %+v, want %+v", i, st.s.worker, st.at-t0, got, st.want)
		}
	}
}

// The greatest lateness a worker reports spaces every reservation after it, and decays.
func TestPaceAllowsForTheFleetsLateness(t *testing.T) {
	parallel(t)
	a, b := twoWorkers(t, &Options{Partitions: 8})
	const t0 = 1_000_000
	ms := time.Millisecond
	if got := mustPace(t, a, t0, 100*ms, 40*ms); got != reserved(0, 40*ms) {
		t.Fatalf("first: %+v", got)
	}
	// b reports little lateness, but a's 40 ms hold (decayed by 5%: 38 ms)
	if got := mustPace(t, b, t0, 100*ms, 0); got != reserved(140*ms, 38*ms) {
		t.Fatalf("b after a: %+v, want the slot after a's 100 ms + 40 ms and a lateness of 38 ms", got)
	}
	late := 38.0
	for range 60 {
		late *= 0.95
		mustPace(t, b, t0+1_000_000, 100*ms, 0)
	}
	got := mustPace(t, b, t0+2_000_000, 100*ms, 0)
	if got.Late > 3*ms {
		t.Errorf("after 60 reservations with no lateness the fleet's is %v, want it decayed (~%.1f ms)", got.Late, late)
	}
}

// A pause any worker was told of holds every worker: nothing is reserved until it ends, and the
// first slot after it is no earlier than its end.
func TestPaceHoldPausesEveryWorker(t *testing.T) {
	parallel(t)
	a, b := twoWorkers(t, &Options{Partitions: 8})
	const t0 = 1_000_000
	ms := time.Millisecond
	mustPace(t, a, t0, 250*ms, 0)
	mustHold(t, a, t0+10, 250*ms, 2*time.Second, false) // e.g. a spent quota: no leader
	if got := mustPace(t, b, t0+500, 250*ms, 0); got != (PaceSlot{State: PacePaused, Wait: 1510 * ms}) {
		t.Errorf("b during a's pause: %+v, want paused for 1510 ms", got)
	}
	if got := mustPace(t, b, t0+2010, 250*ms, 0); got != reserved(0, 0) {
		t.Errorf("b at the pause's end: %+v, want at once", got)
	}
	// A shorter pause does not shorten a longer one held.
	mustHold(t, a, t0+3000, 250*ms, 5*time.Second, false)
	mustHold(t, b, t0+3001, 250*ms, time.Second, false)
	if got := mustPace(t, a, t0+6000, 250*ms, 0); got.State != PacePaused || got.Wait != 2000*ms {
		t.Errorf("after a 5 s pause at +3000 and a 1 s one: %+v, want paused 2000 ms more", got)
	}
}

// A refusal makes its worker the leader: its interval (its gate's, slowed by the refusal) spaces
// every worker's sends, refreshed as its gate recovers, until it has not called for leadLapse.
func TestPaceFollowsTheLastRefused(t *testing.T) {
	parallel(t)
	a, b := twoWorkers(t, &Options{Partitions: 8})
	const t0 = 1_000_000
	ms := time.Millisecond
	mustHold(t, a, t0, 500*ms, time.Second, true) // refused, Retry-After 1 s; a's gate now 2 req/s
	if got := mustPace(t, b, t0+1000, 100*ms, 0); got != reserved(0, 0) {
		t.Fatalf("b after the pause: %+v", got)
	}
	if got := mustPace(t, b, t0+1000, 100*ms, 0); got != reserved(500*ms, 0) {
		t.Errorf("b's next: %+v, want 500 ms after (the leader's interval, not b's 100 ms)", got)
	}
	// a recovers: its interval, 200 ms, becomes the fleet's as it calls.
	if got := mustPace(t, a, t0+2000, 200*ms, 0); got != reserved(0, 0) {
		t.Errorf("a: %+v", got)
	}
	if got := mustPace(t, b, t0+2000, 100*ms, 0); got != reserved(200*ms, 0) {
		t.Errorf("b after a's call: %+v, want 200 ms after", got)
	}
	// a stops calling (done, or dead): after leadLapse, b's own interval.
	later := int64(t0 + 2000 + leadLapse.Milliseconds() + 1000)
	mustPace(t, b, later, 100*ms, 0)
	if got := mustPace(t, b, later, 100*ms, 0); got != reserved(100*ms, 0) {
		t.Errorf("b once a lapsed: %+v, want its own 100 ms", got)
	}
}

// What the pace holds is read as untrusted: a send time or pause beyond MaxPaceWait, or a
// leader's interval that is not a number, is no wait; the key expires PaceTTL after its use.
func TestPaceDamage(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	a := newStore(t, rdb, "a", &Options{Partitions: 8})
	ctx := context.Background()
	const t0 = 1_000_000
	ms := time.Millisecond
	key := a.paceKey(paceGate)
	for _, fields := range [][]any{
		{"next", "1e300", "until", "99999999999999"},
		{"next", "nan", "until", "inf", "lead", "b", "lgap", "x", "lat", "-inf"},
		{"next", "-5", "until", "", "late", "1e18"},
	} {
		rdb.Del(ctx, key)
		rdb.HSet(ctx, key, fields...)
		if got := mustPace(t, a, t0, 100*ms, 0); got.State != PaceReserved || got.Wait != 0 || got.Late > MaxPaceWait {
			t.Errorf("%v: %+v, want reserved at once", fields, got)
		}
	}
	ttl, err := rdb.PTTL(ctx, key).Result()
	if err != nil || ttl <= 0 || ttl > PaceTTL {
		t.Errorf("pace key's TTL %v (%v), want in (0, %v]", ttl, err, PaceTTL)
	}
	// A pause asked for beyond MaxPaceWait is held for MaxPaceWait.
	rdb.Del(ctx, key)
	mustHold(t, a, t0, 0, 10*time.Hour, false)
	if got := mustPace(t, a, t0, 0, 0); got.State != PacePaused || got.Wait != MaxPaceWait {
		t.Errorf("after a 10 h pause: %+v, want paused %v", got, MaxPaceWait)
	}
}

// Store.Pace and PaceHold read Redis' clock.
func TestPaceOnRedisClock(t *testing.T) {
	parallel(t)
	a, b := twoWorkers(t, &Options{Partitions: 8})
	ctx := context.Background()
	if err := a.PaceHold(ctx, paceGate, time.Second, time.Minute, true); err != nil {
		t.Fatal(err)
	}
	got, err := b.Pace(ctx, paceGate, 0, 0)
	if err != nil || got.State != PacePaused || got.Wait < 55*time.Second || got.Wait > time.Minute {
		t.Errorf("b after a's one-minute pause: %+v, %v", got, err)
	}
}
