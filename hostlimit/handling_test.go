package hostlimit

import (
	"testing"
	"time"

	"github.com/crawl-project/crawl/aimd"
)

// handlingHost drives one host of a fresh registry on fake time: each request is written when
// admitted and answered after its latency.
type handlingHost struct {
	t   *testing.T
	r   *Registry
	now time.Time
}

func newHandlingHost(t *testing.T) *handlingHost {
	r, _ := newTestRegistry(t, Config{AIMD: testAIMD(10, 1)}, nil)
	return &handlingHost{t: t, r: r, now: t0}
}

// send admits the next request as soon as the gate allows, writes it then, and answers it sig
// after latency; it returns when it was written.
func (h *handlingHost) send(sig aimd.Signal, latency time.Duration) time.Time {
	h.t.Helper()
	for range 1000 {
		tk, ready := h.r.TryAdmit(h.now, "a.test")
		if tk == nil {
			if ready.IsZero() {
				h.t.Fatal("window full with nothing in flight")
			}
			h.now = ready
			continue
		}
		wrote := h.now
		tk.Wrote(wrote)
		h.now = h.now.Add(latency)
		tk.Done(h.now, aimd.Outcome{Signal: sig, Sent: wrote, Latency: latency})
		return wrote
	}
	h.t.Fatal("never admitted")
	return time.Time{}
}

// next is when the gate next admits, asked from when the latest answer arrived on, and the
// interval at the host's rate then (plus a nanosecond: readyAt is rounded up to it).
func (h *handlingHost) next() (time.Time, time.Duration) {
	h.t.Helper()
	iv := time.Duration(float64(time.Second)/mustHost(h.t, h.r, h.now, "a.test").Limit) + time.Nanosecond
	for range 1000 {
		tk, ready := h.r.TryAdmit(h.now, "a.test")
		if tk != nil {
			tk.Done(h.now, neutral)
			return h.now, iv
		}
		h.now = ready
	}
	h.t.Fatal("never admitted")
	return time.Time{}, 0
}

// TestLateHandlingPushesTheNext: once a burst-1 host has said "slow down", a success answered
// 13 ms later than the host's base latency (a handler that ran late) leaves the next request
// one interval, less the late credit, after the request's write plus those 13 ms; answers at
// the base latency, a host that never refused, and a one-off fast answer change nothing; the
// added delay is at most one interval.
func TestLateHandlingPushesTheNext(t *testing.T) {
	const base = 30 * time.Millisecond // a host with real latency, under its 100 ms interval
	credit := func(iv time.Duration) time.Duration { return min(maxLateCredit, time.Duration(lateShare*float64(iv))) }
	warm := func(h *handlingHost, refuse bool) {
		h.t.Helper()
		if refuse {
			h.send(aimd.Overload, base)
		}
		for range 8 {
			h.send(aimd.Success, base)
		}
	}
	// pushed sends one success 13 ms late and checks that it pushes the next request.
	pushed := func(h *handlingHost, what string) {
		h.t.Helper()
		wrote := h.send(aimd.Success, base+13*time.Millisecond)
		ready, iv := h.next()
		if want := wrote.Add(13*time.Millisecond + iv - credit(iv)); ready.Sub(want).Abs() > time.Nanosecond {
			h.t.Fatalf("%sreadyAt %v after the write, want %v (13 ms + interval %v − credit)", what, ready.Sub(wrote), want.Sub(wrote), iv)
		}
	}
	// notPushed sends one success at the base latency and checks that the next request waits
	// at most one interval after it.
	notPushed := func(h *handlingHost, what string) {
		h.t.Helper()
		wrote := h.send(aimd.Success, base)
		ready, iv := h.next()
		if ready.After(wrote.Add(iv)) {
			h.t.Fatalf("readyAt %v after the write %s, want at most the interval %v", ready.Sub(wrote), what, iv)
		}
	}
	t.Run("late after a refusal", func(t *testing.T) {
		h := newHandlingHost(t)
		warm(h, true)
		pushed(h, "")
	})
	t.Run("late after a restored refusal", func(t *testing.T) {
		store := newFakeStore()
		r, _ := newTestRegistry(t, Config{AIMD: testAIMD(10, 1)}, store)
		h := &handlingHost{t: t, r: r, now: t0}
		h.send(aimd.Overload, base)
		if err := r.Flush(); err != nil {
			t.Fatal(err)
		}
		r2, _ := newTestRegistry(t, Config{AIMD: testAIMD(10, 1)}, store)
		h = &handlingHost{t: t, r: r2, now: h.now.Add(time.Minute)}
		warm(h, false)
		pushed(h, "restored host: ")
	})
	t.Run("steady after a refusal", func(t *testing.T) {
		h := newHandlingHost(t)
		warm(h, true)
		notPushed(h, "at the base latency")
	})
	t.Run("one fast answer", func(t *testing.T) {
		h := newHandlingHost(t)
		warm(h, true)
		h.send(aimd.Success, time.Millisecond) // a cached answer: base stays 30 ms
		notPushed(h, "after one fast answer")
	})
	t.Run("never refused", func(t *testing.T) {
		h := newHandlingHost(t)
		for range 8 {
			h.send(aimd.Success, time.Millisecond) // under the interval: a late answer could push the next
		}
		wrote := h.send(aimd.Success, 14*time.Millisecond)
		answered := h.now
		ready, iv := h.next()
		if pushed := wrote.Add(7*time.Millisecond + iv); !ready.Before(pushed) { // pushed by the 13 ms excess: 13 ms + interval − credit
			t.Fatalf("readyAt %v after a late answer (at %v) from a host that never refused, want before %v", ready.Sub(wrote), answered.Sub(wrote), pushed.Sub(wrote))
		}
	})
	t.Run("capped at one interval", func(t *testing.T) {
		h := newHandlingHost(t)
		warm(h, true)
		_, iv := h.next()
		wrote := h.send(aimd.Success, base+3*iv) // excess 3 intervals: uncapped, the next waits past the answer
		answered := h.now
		ready, iv := h.next()
		if want := later(answered, wrote.Add(2*iv-credit(iv))); ready.After(want) {
			t.Fatalf("readyAt %v after a write answered %v later, want at most %v (the answer, or two intervals − credit)", ready.Sub(wrote), answered.Sub(wrote), want.Sub(wrote))
		}
	})
}
