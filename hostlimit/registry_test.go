package hostlimit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/crawl-project/crawl/aimd"
)

func TestPacing(t *testing.T) {
	for _, rate := range []float64{0.5, 1, 3, 7.5, 50} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			r, _ := newTestRegistry(t, Config{AIMD: testAIMD(rate, 4)}, nil)
			got := admitAll(t, r, "a.test", t0, t0.Add(time.Minute), neutral)
			// The bucket starts with its one token, then refills at rate.
			want := 1 + rate*60
			if math.Abs(float64(len(got))-want) > 1 {
				t.Errorf("admitted %d in a simulated minute at %v/s, want %v±1", len(got), rate, want)
			}
			interval := time.Duration(float64(time.Second) / rate)
			for i := 1; i < len(got); i++ {
				if gap := got[i].Sub(got[i-1]); gap < interval || gap > interval+time.Nanosecond {
					t.Fatalf("gap %d is %v, want %v (+1ns rounding)", i, gap, interval)
				}
			}
			if s := mustHost(t, r, t0, "a.test"); s.Limit != rate || s.Admitted != uint64(len(got)) {
				t.Errorf("stats: Limit %v Admitted %d, want %v %d", s.Limit, s.Admitted, rate, len(got))
			}
		})
	}
}

func TestTryAdmitReadyAtIsExact(t *testing.T) {
	r, _ := newTestRegistry(t, Config{AIMD: testAIMD(4, 4)}, nil)
	tk, _ := r.TryAdmit(t0, "a.test")
	if tk == nil {
		t.Fatal("first request refused")
	}
	tk.Done(t0, neutral)
	_, ready := r.TryAdmit(t0.Add(100*time.Millisecond), "a.test")
	if want := t0.Add(250 * time.Millisecond); !ready.Equal(want) {
		t.Fatalf("readyAt %v, want %v", ready.Sub(t0), want.Sub(t0))
	}
	if tk, _ := r.TryAdmit(ready.Add(-time.Nanosecond), "a.test"); tk != nil {
		t.Fatal("admitted a nanosecond before readyAt")
	}
	if tk, _ := r.TryAdmit(ready, "a.test"); tk == nil {
		t.Fatal("refused at readyAt")
	}
}

// TestLateAdmissionCredit: a dispatcher whose timer wakes δ after readyAt (Go's timers on Linux
// fire up to 1 ms late) still sends at the rate on average when δ is within the credit, and no
// gap is ever shorter than the interval less the credit (min(1 ms, 2.5% of it)).
func TestLateAdmissionCredit(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	tests := []struct {
		name     string
		rate     float64
		late     []time.Duration // lateness of successive admissions, cycled
		wantMean time.Duration   // mean gap over the run
	}{
		{"50/s, 0.4 ms late", 50, []time.Duration{ms(0.4)}, ms(20)},
		{"50/s, 0.5 ms then on time", 50, []time.Duration{ms(0.5), 0}, ms(20)},
		{"50/s, 2 ms late: 0.5 ms credited", 50, []time.Duration{ms(2)}, ms(21.5)},
		{"10/s, 0.9 ms late", 10, []time.Duration{ms(0.9)}, ms(100)},
		{"10/s, 3 ms late: 1 ms credited", 10, []time.Duration{ms(3)}, ms(102)},
		{"1000/s, 0.01 ms late", 1000, []time.Duration{ms(0.01)}, ms(1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := newTestRegistry(t, Config{AIMD: testAIMD(tc.rate, 4)}, nil)
			interval := time.Duration(float64(time.Second) / tc.rate)
			credit := min(time.Millisecond, time.Duration(0.025*float64(interval)))
			now := t0
			var got []time.Time
			for len(got) < 401 {
				tk, ready := r.TryAdmit(now, "a.test")
				if tk == nil {
					now = ready.Add(tc.late[len(got)%len(tc.late)])
					continue
				}
				got = append(got, now)
				tk.Done(now, neutral)
			}
			for i := 1; i < len(got); i++ {
				if gap := got[i].Sub(got[i-1]); gap < interval-credit-time.Nanosecond {
					t.Fatalf("gap %d is %v, want at least %v − %v", i, gap, interval, credit)
				}
			}
			const gaps = 396 // whole cycles of lateness, from the first late admission
			mean := got[1+gaps].Sub(got[1]) / gaps
			if d := mean - tc.wantMean; d < -time.Microsecond || d > time.Microsecond {
				t.Errorf("mean gap %v, want %v", mean, tc.wantMean)
			}
		})
	}
}

// TestLateCreditNotBeforeItCouldSend: the credit never reaches back to before the request
// could have been admitted: before a pause ended, or before a Done freed a window slot.
func TestLateCreditNotBeforeItCouldSend(t *testing.T) {
	late := 300 * time.Microsecond
	t.Run("pause", func(t *testing.T) {
		r, _ := newTestRegistry(t, Config{AIMD: testAIMD(50, 4)}, nil)
		tk, _ := r.TryAdmit(t0, "a.test")
		tk.Done(t0, aimd.Outcome{Signal: aimd.Neutral, Pause: time.Second})
		end := t0.Add(time.Second)
		if tk, _ = r.TryAdmit(end.Add(late), "a.test"); tk == nil {
			t.Fatal("refused after the pause")
		}
		tk.Done(end.Add(late), neutral)
		if _, ready := r.TryAdmit(end.Add(late), "a.test"); !ready.Equal(end.Add(20 * time.Millisecond)) {
			t.Fatalf("next readyAt %v after the pause's end, want 20ms", ready.Sub(end))
		}
	})
	t.Run("window", func(t *testing.T) {
		r, _ := newTestRegistry(t, Config{AIMD: testAIMD(50, 1)}, nil)
		tk, _ := r.TryAdmit(t0, "a.test")
		done := t0.Add(100 * time.Millisecond) // the token was whole at +20ms; the slot at +100ms
		tk.Done(done, neutral)
		if tk, _ = r.TryAdmit(done.Add(late), "a.test"); tk == nil {
			t.Fatal("refused after the slot was freed")
		}
		tk.Done(done.Add(late), neutral)
		if _, ready := r.TryAdmit(done.Add(late), "a.test"); !ready.Equal(done.Add(20 * time.Millisecond)) {
			t.Fatalf("next readyAt %v after the Done, want 20ms", ready.Sub(done))
		}
	})
}

// TestWroteLatePushesTheNext: a request that reached the wire late (a busy machine, a dial
// first) leaves the next one at least an interval less the late credit behind it at the
// server, not an interval behind its admission; one written on time changes nothing.
func TestWroteLatePushesTheNext(t *testing.T) {
	r, _ := newTestRegistry(t, Config{AIMD: testAIMD(10, 4)}, nil)
	tk, _ := r.TryAdmit(t0, "a.test")
	tk.Wrote(t0.Add(60 * time.Millisecond))
	_, ready := r.TryAdmit(t0.Add(100*time.Millisecond), "a.test")
	if want := t0.Add(159 * time.Millisecond); !ready.Equal(want) { // 60 + 100 − 1 ms credit
		t.Fatalf("readyAt %v after a write at +60ms, want %v", ready.Sub(t0), want.Sub(t0))
	}
	if tk, _ := r.TryAdmit(ready.Add(-time.Nanosecond), "a.test"); tk != nil {
		t.Fatal("admitted a nanosecond before readyAt")
	}
	tk2, _ := r.TryAdmit(ready, "a.test")
	if tk2 == nil {
		t.Fatal("refused at readyAt")
	}
	// held back past its token, tk2 took it with the 1 ms late credit: the bucket's next
	// token is 99 ms on, and a write on time does not move it
	tk2.Wrote(ready)
	if _, next := r.TryAdmit(ready.Add(time.Millisecond), "a.test"); !next.Equal(ready.Add(99 * time.Millisecond)) {
		t.Fatalf("after a write on time: readyAt %v later, want 99ms", next.Sub(ready))
	}
	tk.Done(ready, neutral)
	tk.Wrote(ready.Add(time.Hour)) // after Done: no effect
	tk2.Done(ready, neutral)
	if _, next := r.TryAdmit(ready.Add(time.Millisecond), "a.test"); !next.Equal(ready.Add(99 * time.Millisecond)) {
		t.Fatalf("a Wrote after Done moved readyAt to %v later", next.Sub(ready))
	}
}

func TestWindow(t *testing.T) {
	r, _ := newTestRegistry(t, Config{AIMD: testAIMD(1000, 3)}, nil)
	now := t0
	w := 0
	var tickets []*Ticket
	for {
		tk, ready := r.TryAdmit(now, "a.test")
		if tk == nil {
			if !ready.IsZero() {
				t.Fatalf("refused after %d with readyAt %v, want zero (window full)", w, ready)
			}
			break
		}
		tickets = append(tickets, tk)
		w++
		now = now.Add(time.Second) // plenty of tokens: only the window can refuse
		if w > 100 {
			t.Fatal("window never filled")
		}
	}
	s := mustHost(t, r, now, "a.test")
	if w != s.Window || s.InFlight != w {
		t.Fatalf("admitted %d; stats Window %d InFlight %d", w, s.Window, s.InFlight)
	}
	if tk, ready := r.TryAdmit(now.Add(time.Hour), "a.test"); tk != nil || !ready.IsZero() {
		t.Fatalf("(window+1)th admitted (or readyAt %v) while the window is full", ready)
	}
	tickets[0].Done(now, neutral)
	tk, _ := r.TryAdmit(now, "a.test")
	if tk == nil {
		t.Fatal("refused after a Done freed a slot")
	}
	if tk, ready := r.TryAdmit(now.Add(time.Hour), "a.test"); tk != nil || !ready.IsZero() {
		t.Fatal("admitted beyond the window after one Done")
	}
	for _, tk := range append(tickets[1:], tk) {
		tk.Done(now, neutral)
	}
	if s := mustHost(t, r, now, "a.test"); s.InFlight != 0 {
		t.Fatalf("InFlight %d after all Done", s.InFlight)
	}
}

func TestWindowCappedByMaxWindow(t *testing.T) {
	cfg := testAIMD(1000, 8)
	r, _ := newTestRegistry(t, Config{AIMD: cfg}, nil)
	h := r.lockedHost(t0, "a.test")
	h.maxWindow = 2 // as if Config.AIMD.MaxWindow were below the controller's window
	h.mu.Unlock()
	now := t0
	for i := range 2 {
		if tk, _ := r.TryAdmit(now, "a.test"); tk == nil {
			t.Fatalf("request %d refused", i)
		}
		now = now.Add(time.Second)
	}
	if tk, ready := r.TryAdmit(now, "a.test"); tk != nil || !ready.IsZero() {
		t.Fatal("admitted beyond MaxWindow")
	}
}

// TestMaxWindowOf: a host named in Config.MaxWindowOf gets that window cap, below
// AIMD.MaxWindow, and keeps it after Evict drops and remakes its gate; other hosts do not.
func TestMaxWindowOf(t *testing.T) {
	r, _ := newTestRegistry(t, Config{AIMD: testAIMD(1000, 8), MaxWindowOf: map[string]int{"a.test": 1}}, nil)
	admitted := func(host string, now time.Time) int {
		n := 0
		for i := range 4 {
			if tk, _ := r.TryAdmit(now.Add(time.Duration(i)*time.Second), host); tk != nil {
				n++
				defer tk.Done(now.Add(time.Minute), neutral)
			}
		}
		return n
	}
	if n := admitted("a.test", t0); n != 1 {
		t.Errorf("a.test: %d requests in flight, want 1", n)
	}
	if n := admitted("b.test", t0); n < 2 {
		t.Errorf("b.test: %d requests in flight, want more than a.test's cap", n)
	}
	later := t0.Add(time.Hour)
	if err := r.Evict(later); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Host(later, "a.test"); ok {
		t.Fatal("a.test was not evicted")
	}
	if n := admitted("a.test", later); n != 1 {
		t.Errorf("a.test after eviction: %d requests in flight, want 1", n)
	}
}

func TestDoneIsIdempotent(t *testing.T) {
	r, _ := newTestRegistry(t, Config{AIMD: testAIMD(1000, 2)}, nil)
	a, _ := r.TryAdmit(t0, "a.test")
	b, _ := r.TryAdmit(t0.Add(time.Second), "a.test")
	if a == nil || b == nil {
		t.Fatal("refused within the window")
	}
	now := t0.Add(2 * time.Second)
	a.Done(now, neutral)
	a.Done(now, neutral) // must not free b's slot too
	if s := mustHost(t, r, now, "a.test"); s.InFlight != 1 {
		t.Fatalf("InFlight %d after double Done, want 1", s.InFlight)
	}
	c, _ := r.TryAdmit(now, "a.test")
	if c == nil {
		t.Fatal("refused with a free slot")
	}
	if tk, _ := r.TryAdmit(now.Add(time.Second), "a.test"); tk != nil {
		t.Fatal("a second Done freed a second slot")
	}
	b.Done(now, neutral)
	c.Done(now, neutral)
	c.Done(now, neutral)
	if s := mustHost(t, r, now, "a.test"); s.InFlight != 0 {
		t.Fatalf("InFlight %d, want 0", s.InFlight)
	}
}

func TestDoneFeedsController(t *testing.T) {
	r, _ := newTestRegistry(t, Config{AIMD: testAIMD(8, 4)}, nil)
	tk, _ := r.TryAdmit(t0, "a.test")
	tk.Done(t0.Add(time.Second), aimd.Outcome{Signal: aimd.Overload, Latency: time.Second})
	s := mustHost(t, r, t0, "a.test")
	if s.Limit >= 8 || s.Rate != s.Limit {
		t.Fatalf("after a 429: Limit %v Rate %v, want both below 8", s.Limit, s.Rate)
	}
	// The bucket must already pace at the new rate: one token is there (burst 1), then the
	// next gap is 1/rate, not 1/8 s.
	now := t0.Add(time.Second)
	tk, _ = r.TryAdmit(now, "a.test")
	if tk == nil {
		t.Fatal("refused with a full bucket")
	}
	tk.Done(now, neutral)
	_, ready := r.TryAdmit(now, "a.test")
	if want := time.Duration(math.Ceil(float64(time.Second) / s.Limit)); ready.Sub(now) != want {
		t.Fatalf("next readyAt +%v at rate %v, want +%v", ready.Sub(now), s.Limit, want)
	}
}

// TestDonePauses: an outcome's Pause pauses the whole host from its Done on, in the step that
// frees the window slot, and a later, shorter pause never shortens it.
func TestDonePauses(t *testing.T) {
	r, _ := newTestRegistry(t, Config{AIMD: testAIMD(10, 2)}, nil)
	first, _ := r.TryAdmit(t0, "a.test")
	second, _ := r.TryAdmit(t0.Add(100*time.Millisecond), "a.test")
	if first == nil || second == nil {
		t.Fatal("refused a request the window and the bucket allow")
	}
	now := t0.Add(200 * time.Millisecond)
	until := now.Add(30 * time.Second)
	first.Done(now, aimd.Outcome{Signal: aimd.Neutral, Pause: 30 * time.Second})
	if tk, ready := r.TryAdmit(now, "a.test"); tk != nil || !ready.Equal(until) {
		t.Fatalf("after the Done that paused: ticket %v readyAt %v, want nil and %v", tk != nil, ready, until)
	}
	second.Done(now, aimd.Outcome{Signal: aimd.Neutral, Pause: time.Second}) // shorter: no effect
	if tk, ready := r.TryAdmit(now, "a.test"); tk != nil || !ready.Equal(until) {
		t.Fatalf("paused host: ticket %v readyAt %v, want nil and %v", tk != nil, ready, until)
	}
	if tk, ready := r.TryAdmit(until.Add(-time.Nanosecond), "a.test"); tk != nil || !ready.Equal(until) {
		t.Fatal("admitted a nanosecond before the pause ends")
	}
	if s := mustHost(t, r, until.Add(-1), "a.test"); !s.PausedUntil.Equal(until) {
		t.Fatalf("stats PausedUntil %v, want %v", s.PausedUntil, until)
	}
	tk, _ := r.TryAdmit(until, "a.test")
	if tk == nil {
		t.Fatal("refused when the pause ended")
	}
	tk.Done(until, neutral)
	if s := mustHost(t, r, until, "a.test"); !s.PausedUntil.IsZero() {
		t.Fatalf("stats PausedUntil %v after the pause", s.PausedUntil)
	}
	// Burst 1: after the pause, one request, then pacing resumes at the rate.
	if _, ready := r.TryAdmit(until, "a.test"); !ready.Equal(until.Add(100 * time.Millisecond)) {
		t.Fatalf("after the pause readyAt %v, want +100ms", ready.Sub(until))
	}
}

func TestWaitPauseEndsExactly(t *testing.T) {
	r, clk := newTestRegistry(t, Config{AIMD: testAIMD(10, 4)}, nil)
	pauseUntil(r, "a.test", t0.Add(30*time.Second))
	got := make(chan *Ticket)
	go func() {
		tk, err := r.Wait(context.Background(), "a.test")
		if err != nil {
			t.Error(err)
		}
		got <- tk
	}()
	if d := clk.nextArmed(t); d != 30*time.Second {
		t.Fatalf("Wait slept %v, want exactly 30s", d)
	}
	clk.Advance(30 * time.Second)
	tk := recv(t, got)
	if tk == nil || !tk.Sent().Equal(t0.Add(30*time.Second)) {
		t.Fatalf("ticket %v", tk)
	}
	tk.Done(clk.Now(), neutral)
}

func TestWaitPacesWithTryAdmit(t *testing.T) {
	// A dispatcher's TryAdmit and a worker's Wait share one bucket.
	r, clk := newTestRegistry(t, Config{AIMD: testAIMD(2, 4)}, nil)
	tk, _ := r.TryAdmit(t0, "a.test")
	got := make(chan *Ticket)
	go func() {
		tk, err := r.Wait(context.Background(), "a.test")
		if err != nil {
			t.Error(err)
		}
		got <- tk
	}()
	if d := clk.nextArmed(t); d != 500*time.Millisecond {
		t.Fatalf("Wait slept %v, want 500ms", d)
	}
	clk.Advance(500 * time.Millisecond)
	tk2 := recv(t, got)
	if s := mustHost(t, r, clk.Now(), "a.test"); s.InFlight != 2 {
		t.Fatalf("InFlight %d, want 2", s.InFlight)
	}
	tk.Done(clk.Now(), neutral)
	tk2.Done(clk.Now(), neutral)
}

func TestWaitWindowFullUntilDone(t *testing.T) {
	r, clk := newTestRegistry(t, Config{AIMD: testAIMD(1000, 1)}, nil)
	w := mustWindowOne(t, r)
	clk.Advance(time.Hour) // tokens plenty: only the window holds Wait back
	ctx := newWatchedCtx()
	got := make(chan *Ticket)
	go func() {
		tk, err := r.Wait(ctx, "a.test")
		if err != nil {
			t.Error(err)
		}
		got <- tk
	}()
	recv(t, ctx.selecting) // Wait is about to block
	select {
	case <-got:
		t.Fatal("Wait admitted while the window was full")
	default:
	}
	w.Done(clk.Now(), neutral) // must wake Wait: no timer is armed
	tk := recv(t, got)
	if s := mustHost(t, r, clk.Now(), "a.test"); s.InFlight != 1 {
		t.Fatalf("InFlight %d", s.InFlight)
	}
	tk.Done(clk.Now(), neutral)
}

// mustWindowOne admits the only slot of a window-1 host.
func mustWindowOne(t *testing.T, r *Registry) *Ticket {
	t.Helper()
	tk, _ := r.TryAdmit(t0, "a.test")
	if tk == nil {
		t.Fatal("refused")
	}
	if s := mustHost(t, r, t0, "a.test"); s.Window != 1 {
		t.Fatalf("window %d, want 1", s.Window)
	}
	return tk
}

func TestWaitPausedBeyondMaxPause(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pause   time.Duration
		errWant bool
	}{
		{"just beyond", 10*time.Minute + time.Nanosecond, true},
		{"an hour", time.Hour, true},
		{"exactly MaxPause blocks", 10 * time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, clk := newTestRegistry(t, Config{AIMD: testAIMD(10, 4), MaxPause: 10 * time.Minute}, nil)
			until := t0.Add(tc.pause)
			pauseUntil(r, "a.test", until)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type result struct {
				tk  *Ticket
				err error
			}
			got := make(chan result, 1)
			go func() {
				tk, err := r.Wait(ctx, "a.test")
				got <- result{tk, err}
			}()
			if tc.errWant {
				res := recv(t, got) // without any clock advance: at once
				var pe *PausedError
				if !errors.Is(res.err, ErrPaused) || !errors.As(res.err, &pe) || !pe.Until.Equal(until) || pe.Host != "a.test" {
					t.Fatalf("Wait = %v, %v; want PausedError until %v", res.tk, res.err, until)
				}
				return
			}
			if d := clk.nextArmed(t); d != tc.pause {
				t.Fatalf("slept %v want %v", d, tc.pause)
			}
			clk.Advance(tc.pause)
			res := recv(t, got)
			if res.err != nil {
				t.Fatal(res.err)
			}
			res.tk.Done(clk.Now(), neutral)
		})
	}
}

func TestWaitHonoursContext(t *testing.T) {
	t.Run("cancel while blocked", func(t *testing.T) {
		r, clk := newTestRegistry(t, Config{AIMD: testAIMD(10, 4)}, nil)
		pauseUntil(r, "a.test", t0.Add(time.Minute))
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error)
		go func() {
			tk, err := r.Wait(ctx, "a.test")
			if tk != nil {
				t.Error("ticket despite cancel")
			}
			errc <- err
		}()
		clk.nextArmed(t)
		cancel()
		if err := recv(t, errc); !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
	})
	t.Run("already cancelled takes no token", func(t *testing.T) {
		r, _ := newTestRegistry(t, Config{AIMD: testAIMD(10, 4)}, nil)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if tk, err := r.Wait(ctx, "a.test"); tk != nil || !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait = %v, %v", tk, err)
		}
		if tk, _ := r.TryAdmit(t0, "a.test"); tk == nil {
			t.Fatal("the cancelled Wait used the token")
		}
	})
	t.Run("cancel while window full", func(t *testing.T) {
		r, _ := newTestRegistry(t, Config{AIMD: testAIMD(10, 1)}, nil)
		w := mustWindowOne(t, r)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error)
		go func() {
			_, err := r.Wait(ctx, "a.test")
			errc <- err
		}()
		cancel()
		if err := recv(t, errc); !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v", err)
		}
		w.Done(t0, neutral)
	})
}

func TestSetCeiling(t *testing.T) {
	cfg := testAIMD(10, 4)
	cfg.MaxRate = 20
	r, _ := newTestRegistry(t, Config{AIMD: cfg}, nil)
	r.SetCeiling("a.test", 0.5) // Crawl-delay: 2
	got := admitAll(t, r, "a.test", t0, t0.Add(time.Minute), neutral)
	if len(got) < 30 || len(got) > 31 {
		t.Errorf("admitted %d in a minute under a 0.5/s ceiling, want 30-31", len(got))
	}
	s := mustHost(t, r, t0, "a.test")
	if s.Limit != 0.5 || s.Ceiling != 0.5 {
		t.Errorf("Limit %v Ceiling %v", s.Limit, s.Ceiling)
	}
	// Successes must not lift the rate past the ceiling.
	admitAll(t, r, "a.test", t0.Add(time.Minute), t0.Add(2*time.Minute), aimd.Outcome{Signal: aimd.Success, Latency: 10 * time.Millisecond})
	if s := mustHost(t, r, t0, "a.test"); s.Limit > 0.5 {
		t.Errorf("Limit %v above the ceiling after successes", s.Limit)
	}
	r.SetCeiling("a.test", 0)
	admitAll(t, r, "a.test", t0.Add(2*time.Minute), t0.Add(2*time.Minute+10*time.Second), aimd.Outcome{Signal: aimd.Success, Latency: 10 * time.Millisecond})
	if s := mustHost(t, r, t0, "a.test"); s.Ceiling != 0 || s.Limit <= 0.5 {
		t.Errorf("after removing the ceiling and 10s of successes: Limit %v Ceiling %v", s.Limit, s.Ceiling)
	}
}

func TestHostsAreIsolated(t *testing.T) {
	// B's admissions over a minute are the same whether or not A is in a 429 storm.
	run := func(storm bool) (b []time.Time, aAdmitted int, aRate float64) {
		r, _ := newTestRegistry(t, Config{AIMD: testAIMD(5, 4)}, nil)
		end := t0.Add(time.Minute)
		for now := t0; now.Before(end); now = now.Add(10 * time.Millisecond) {
			if storm {
				if tk, _ := r.TryAdmit(now, "a.test"); tk != nil {
					aAdmitted++
					tk.Done(now.Add(time.Millisecond), aimd.Outcome{Signal: aimd.Overload, Latency: time.Millisecond, Pause: 5 * time.Second})
				}
			}
			if tk, _ := r.TryAdmit(now, "b.test"); tk != nil {
				b = append(b, now)
				tk.Done(now, neutral)
			}
		}
		if storm {
			aRate = mustHost(t, r, end, "a.test").Limit
		}
		return b, aAdmitted, aRate
	}
	quiet, _, _ := run(false)
	stormy, aAdmitted, aRate := run(true)
	if aRate >= 5 || aAdmitted == 0 || aAdmitted > 13 {
		t.Fatalf("the storm did not slow A: %d admitted, rate %v", aAdmitted, aRate)
	}
	if len(quiet) != len(stormy) {
		t.Fatalf("B admitted %d during A's storm, %d without", len(stormy), len(quiet))
	}
	for i := range quiet {
		if !quiet[i].Equal(stormy[i]) {
			t.Fatalf("B's admission %d at %v during the storm, %v without", i, stormy[i], quiet[i])
		}
	}
}

func TestHostLockDoesNotBlockOthers(t *testing.T) {
	r, clk := newTestRegistry(t, Config{AIMD: testAIMD(5, 4)}, nil)
	a := r.lockedHost(t0, "a.test") // A's lock held, as by a slow operation
	done := make(chan struct{})
	go func() {
		defer close(done)
		if tk, _ := r.TryAdmit(t0, "b.test"); tk == nil {
			t.Error("B refused")
		} else {
			tk.Done(t0, neutral)
		}
		if tk, err := r.Wait(context.Background(), "c.test"); err != nil {
			t.Error(err)
		} else {
			tk.Done(clk.Now(), neutral)
		}
		pauseUntil(r, "d.test", t0.Add(time.Second))
		r.SetCeiling("e.test", 1)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second): // hang guard
		t.Fatal("other hosts blocked behind A's lock")
	}
	a.mu.Unlock()
}

func TestStateRoundTrip(t *testing.T) {
	store := newFakeStore()
	r, _ := newTestRegistry(t, Config{AIMD: testAIMD(8, 4)}, store)
	now := t0
	for range 3 { // a 429 storm, one decrease per epoch
		tk, ready := r.TryAdmit(now, "a.test")
		if tk == nil {
			now = ready
			tk, _ = r.TryAdmit(now, "a.test")
		}
		now = now.Add(time.Second)
		tk.Done(now, aimd.Outcome{Signal: aimd.Overload, Latency: time.Second})
	}
	until := now.Add(5 * time.Minute)
	pauseUntil(r, "a.test", until)
	r.SetCeiling("a.test", 7)
	before := mustHost(t, r, now, "a.test")
	if before.Limit >= 8 {
		t.Fatalf("the storm did not lower the rate: %v", before.Limit)
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	b, ok := store.get("a.test")
	if !ok {
		t.Fatal("Flush saved nothing")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatalf("saved state is not JSON: %v", err)
	}
	for _, k := range []string{"aimd", "paused_until", "saved_at", "ceiling"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("saved state %s lacks %q", b, k)
		}
	}

	// A resumed crawl: new registry, same store, host loaded lazily.
	r2, _ := newTestRegistry(t, Config{AIMD: testAIMD(8, 4)}, store)
	later := now.Add(time.Minute)
	if tk, ready := r2.TryAdmit(later, "a.test"); tk != nil || !ready.Equal(until) {
		t.Fatalf("restored host: ticket %v readyAt %v, want the running pause until %v", tk != nil, ready, until)
	}
	after := mustHost(t, r2, later, "a.test")
	if after.Limit != before.Limit || after.Rate != before.Rate || after.Window != before.Window || after.Ceiling != 7 {
		t.Fatalf("restored Limit %v Rate %v Window %v Ceiling %v, want %v %v %v 7",
			after.Limit, after.Rate, after.Window, after.Ceiling, before.Limit, before.Rate, before.Window)
	}
	if after.StateError != "" {
		t.Fatal(after.StateError)
	}
}

func TestCorruptStateStartsFresh(t *testing.T) {
	store := newFakeStore()
	store.m["a.test"] = []byte("{not json")
	r, _ := newTestRegistry(t, Config{AIMD: testAIMD(8, 4)}, store)
	tk, _ := r.TryAdmit(t0, "a.test")
	if tk == nil {
		t.Fatal("refused")
	}
	tk.Done(t0, neutral)
	if s := mustHost(t, r, t0, "a.test"); s.StateError == "" || s.Limit != 8 {
		t.Fatalf("StateError %q Limit %v", s.StateError, s.Limit)
	}
}

func TestEvict(t *testing.T) {
	store := newFakeStore()
	r, _ := newTestRegistry(t, Config{AIMD: testAIMD(8, 4), IdleEvict: time.Minute}, store)
	tk, _ := r.TryAdmit(t0, "idle.test")
	tk.Done(t0, aimd.Outcome{Signal: aimd.Overload})
	pauseUntil(r, "idle.test", t0.Add(time.Hour))
	busy, _ := r.TryAdmit(t0, "busy.test") // in flight: never evicted
	idleRate := mustHost(t, r, t0, "idle.test").Limit

	if err := r.Evict(t0.Add(time.Minute - time.Nanosecond)); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Host(t0, "idle.test"); !ok {
		t.Fatal("evicted before IdleEvict")
	}
	keep := func(h string) bool { return h == "idle.test" }
	if err := r.EvictUnless(t0.Add(time.Hour), keep); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Host(t0, "idle.test"); !ok {
		t.Fatal("a host the caller keeps was evicted")
	}
	if err := r.Evict(t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Host(t0, "idle.test"); ok {
		t.Fatal("idle host still in memory")
	}
	if _, ok := r.Host(t0, "busy.test"); !ok {
		t.Fatal("host with a request in flight was evicted")
	}
	if _, ok := store.get("idle.test"); !ok {
		t.Fatal("evicted host not saved")
	}
	if _, ok := store.get("busy.test"); ok {
		t.Fatal("busy host saved by Evict")
	}
	if got := len(r.Stats(t0)); got != 1 {
		t.Fatalf("%d hosts in Stats, want 1", got)
	}
	// Next use restores it, pause and learned rate included.
	if tk, ready := r.TryAdmit(t0.Add(time.Minute), "idle.test"); tk != nil || !ready.Equal(t0.Add(time.Hour)) {
		t.Fatalf("restored host: ticket %v readyAt %v", tk != nil, ready)
	}
	if s := mustHost(t, r, t0, "idle.test"); s.Limit != idleRate {
		t.Fatalf("restored rate %v, want %v", s.Limit, idleRate)
	}
	busy.Done(t0, neutral)
}

func TestEvictSaveFailureKeepsHosts(t *testing.T) {
	store := newFakeStore()
	store.saveErr = errDisk
	r, _ := newTestRegistry(t, Config{AIMD: testAIMD(8, 4)}, store)
	pauseUntil(r, "a.test", t0.Add(time.Hour))
	if err := r.Evict(t0.Add(time.Hour)); !errors.Is(err, errDisk) {
		t.Fatalf("Evict err %v, want disk full", err)
	}
	if _, ok := r.Host(t0, "a.test"); !ok {
		t.Fatal("host dropped though its state was not saved")
	}
	if err := r.Flush(); !errors.Is(err, errDisk) {
		t.Fatalf("Flush err %v", err)
	}
}

func TestEvictCancelledByUseDuringSave(t *testing.T) {
	store := newFakeStore()
	r, _ := newTestRegistry(t, Config{AIMD: testAIMD(8, 4)}, store)
	tk, _ := r.TryAdmit(t0, "a.test")
	tk.Done(t0, neutral)
	var used *Ticket
	store.onSave = func() { // the dispatcher admits a request while Evict is writing
		used, _ = r.TryAdmit(t0.Add(time.Hour), "a.test")
	}
	if err := r.Evict(t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if used == nil {
		t.Fatal("refused during Evict")
	}
	s, ok := r.Host(t0, "a.test")
	if !ok || s.InFlight != 1 {
		t.Fatalf("host used during Evict was dropped (ok %v, InFlight %d)", ok, s.InFlight)
	}
	used.Done(t0.Add(time.Hour), neutral)
}

func TestLoadRacingEvictReloads(t *testing.T) {
	store := newFakeStore()
	r, _ := newTestRegistry(t, Config{AIMD: testAIMD(8, 4)}, store)
	pauseUntil(r, "a.test", t0.Add(time.Hour))
	store.onLoad = func(host string) {
		if host == "b.test" {
			store.mu.Lock()
			store.onLoad = nil
			store.mu.Unlock()
			if err := r.Evict(t0.Add(time.Hour)); err != nil { // drops a.test while b.test loads
				t.Error(err)
			}
		}
	}
	if tk, _ := r.TryAdmit(t0.Add(time.Hour), "b.test"); tk == nil {
		t.Fatal("refused")
	} else {
		tk.Done(t0.Add(time.Hour), neutral)
	}
	store.mu.Lock()
	loads := store.loads["b.test"]
	store.mu.Unlock()
	if loads != 2 {
		t.Fatalf("b.test loaded %d times, want 2 (a load overlapping an eviction is repeated)", loads)
	}
}

func TestNilStoreKeepsEvictedState(t *testing.T) {
	r, _ := newTestRegistry(t, Config{AIMD: testAIMD(8, 4)}, nil)
	until := t0.Add(time.Hour)
	pauseUntil(r, "a.test", until)
	if err := r.Evict(t0.Add(time.Hour - time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Host(t0, "a.test"); ok {
		t.Fatal("not evicted")
	}
	if _, ready := r.TryAdmit(t0.Add(time.Minute), "a.test"); !ready.Equal(until) {
		t.Fatalf("pause lost across eviction without a store: readyAt %v", ready)
	}
}

func TestClockRunningBackwardsGivesNoExtraTokens(t *testing.T) {
	r, _ := newTestRegistry(t, Config{AIMD: testAIMD(1, 4)}, nil)
	at := t0.Add(10 * time.Second)
	tk, _ := r.TryAdmit(at, "a.test")
	// A worker reports with an older timestamp, and the outcome changes the rate: the bucket's
	// clock must not run back to t0 (that would credit ten seconds of tokens).
	tk.Done(t0, aimd.Outcome{Signal: aimd.Overload, Sent: t0})
	rate := mustHost(t, r, at, "a.test").Limit
	if rate >= 1 {
		t.Fatalf("rate %v did not fall", rate)
	}
	interval := time.Duration(math.Ceil(float64(time.Second) / rate))
	if tk, _ := r.TryAdmit(at.Add(interval/2), "a.test"); tk != nil {
		t.Fatal("an out-of-order timestamp credited extra tokens")
	}
	if tk, _ := r.TryAdmit(at.Add(interval), "a.test"); tk == nil {
		t.Fatal("refused after a full interval")
	}
}

func TestStatsSorted(t *testing.T) {
	r, _ := newTestRegistry(t, Config{AIMD: testAIMD(8, 4)}, nil)
	for _, h := range []string{"c.test", "a.test", "b.test"} {
		tk, _ := r.TryAdmit(t0, h)
		defer tk.Done(t0, neutral)
	}
	var got []string
	for _, s := range r.Stats(t0) {
		got = append(got, s.Host)
		if s.InFlight != 1 || s.Admitted != 1 {
			t.Errorf("%s: InFlight %d Admitted %d", s.Host, s.InFlight, s.Admitted)
		}
	}
	if fmt.Sprint(got) != "[a.test b.test c.test]" {
		t.Fatalf("hosts %v", got)
	}
}

func TestEvictMarksDroppedHost(t *testing.T) {
	r, _ := newTestRegistry(t, Config{AIMD: testAIMD(8, 4)}, nil)
	old := r.lookup(t0, "a.test") // a caller that looked the host up but has not locked it yet
	if err := r.Evict(t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	old.mu.Lock()
	evicted := old.evicted
	old.mu.Unlock()
	if !evicted {
		t.Fatal("dropped host not marked: a caller holding it would use a host no longer in the registry")
	}
	h := r.lockedHost(t0, "a.test")
	h.mu.Unlock()
	if h == old {
		t.Fatal("lockedHost returned the dropped host")
	}
}

func TestDemandByCaller(t *testing.T) {
	// With DemandByCaller, a ticket says whether its host's rate held it back: only if the
	// caller reported the host starved (a request ready, a worker free, no token) since the
	// previous admission. A pause or a full window is no rate's doing.
	r, _ := newTestRegistry(t, Config{AIMD: testAIMD(10, 2), DemandByCaller: true}, nil)
	first, _ := r.TryAdmit(t0, "a.test")
	if first == nil || first.demand != aimd.DemandSpare {
		t.Fatalf("first request: ticket %v, want one with room to spare", first)
	}
	if tk, ready := r.TryAdmit(t0, "a.test"); tk != nil || !ready.After(t0) {
		t.Fatal("the bucket's one token was taken; want the second refused until it refills")
	}
	r.Starved(t0, "a.test")
	second, _ := r.TryAdmit(t0.Add(100*time.Millisecond), "a.test")
	if second == nil || second.demand != aimd.DemandHeld {
		t.Fatalf("after Starved: ticket %v, want one held back by the rate", second)
	}
	// The window (2) is full now: starving it says nothing of the rate.
	r.Starved(t0.Add(150*time.Millisecond), "a.test")
	first.Done(t0.Add(200*time.Millisecond), neutral)
	if tk, _ := r.TryAdmit(t0.Add(200*time.Millisecond), "a.test"); tk == nil || tk.demand != aimd.DemandSpare {
		t.Fatalf("after a Starved with the window full: ticket %v, want room to spare", tk)
	} else {
		tk.Done(t0.Add(200*time.Millisecond), neutral)
	}
	second.Done(t0.Add(200*time.Millisecond), neutral)
	// Without DemandByCaller the controller judges by itself.
	r2, _ := newTestRegistry(t, Config{AIMD: testAIMD(10, 2)}, nil)
	if tk, _ := r2.TryAdmit(t0, "a.test"); tk == nil || tk.demand != aimd.DemandUnknown {
		t.Fatalf("default registry: ticket %v, want demand unknown", tk)
	} else {
		tk.Done(t0, neutral)
	}
}

// TestLimitReadsWithoutLoading: Limit gives the rate a gate in memory paces at, and never
// loads or creates a gate (a host not in play has none).
func TestLimitReadsWithoutLoading(t *testing.T) {
	r, _ := newTestRegistry(t, Config{AIMD: testAIMD(3, 4)}, nil)
	if l, ok := r.Limit("a.test"); ok || l != 0 {
		t.Fatalf("Limit of a host never used = %v %v, want 0 false", l, ok)
	}
	if n := len(r.Stats(t0)); n != 0 {
		t.Fatalf("Limit created %d hosts", n)
	}
	tk, _ := r.TryAdmit(t0, "a.test")
	if tk == nil {
		t.Fatal("first request refused")
	}
	tk.Done(t0, neutral)
	if l, ok := r.Limit("a.test"); !ok || l != mustHost(t, r, t0, "a.test").Limit || l != 3 {
		t.Fatalf("Limit = %v %v, want the gate's 3 true", l, ok)
	}
	if err := r.Evict(t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if l, ok := r.Limit("a.test"); ok {
		t.Fatalf("Limit of an evicted host = %v true, want false", l)
	}
}
