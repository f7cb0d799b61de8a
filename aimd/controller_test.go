package aimd

import (
	"cmp"
	"encoding/json"
	"math"
	"math/rand"
	"reflect"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// sec converts seconds to a duration.
func sec(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// driver feeds a controller like a host far from its window limit: requests sent as fast as
// the rate allows (and the window permits), each finishing after lat.
type driver struct {
	c       *Controller
	now     time.Time
	lat     time.Duration
	pause   time.Duration    // the Retry-After pause each refusal carries (Outcome.Pause)
	demand  Demand           // what each outcome says of the host's rate (Outcome.Demand)
	stated  float64          // the rate each answer states (Outcome.Stated)
	pending []pendingOutcome // in order of completion (lat is constant)

	delivered []time.Time
	trail     *trail  // if set, notes the controller after every outcome (golden_test.go)
	wantHalf  float64 // a rate a test case's steps note for its check
}

type pendingOutcome struct {
	done time.Time
	o    Outcome
}

// deliver feeds the controller every outcome finished by t.
func (d *driver) deliver(t time.Time) {
	for len(d.pending) > 0 && !d.pending[0].done.After(t) {
		p := d.pending[0]
		d.pending = d.pending[1:]
		d.c.Observe(p.done, p.o)
		d.trail.note(d.c)
		d.delivered = append(d.delivered, p.done)
	}
}

// throughput is the completion rate over the last span.
func (d *driver) throughput(span time.Duration) float64 {
	n := 0
	for i := len(d.delivered) - 1; i >= 0 && d.delivered[i].After(d.now.Add(-span)); i-- {
		n++
	}
	return float64(n) / span.Seconds()
}

// send sends one request (answered with sig) as soon as the window has room, then moves the
// clock on by one sending interval.
func (d *driver) send(sig Signal) {
	d.deliver(d.now)
	for len(d.pending) >= d.c.Window() {
		d.now = d.pending[0].done
		d.deliver(d.now)
	}
	o := Outcome{Signal: sig, Sent: d.now, Latency: d.lat, Demand: d.demand, Stated: d.stated}
	if sig == Overload {
		o.Pause = d.pause
	}
	d.pending = append(d.pending, pendingOutcome{d.now.Add(d.lat), o})
	d.now = d.now.Add(sec(1 / d.c.Rate()))
}

// drain waits for every request in flight.
func (d *driver) drain() {
	if n := len(d.pending); n > 0 {
		d.now = maxTime(d.now, d.pending[n-1].done)
		d.deliver(d.now)
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// run sends successes for dur.
func (d *driver) run(dur time.Duration) {
	end := d.now.Add(dur)
	for d.now.Before(end) {
		d.send(Success)
	}
	d.drain()
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Abs(b) }

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   Config
		want func(Config) bool
	}{
		{"zero", Config{}, func(c Config) bool {
			return c.InitialRate == 2 && c.MinRate == 0.1 && c.MaxRate == 1000 && c.InitialWindow == 2 &&
				c.MaxWindow == 8
		}},
		{"max below min", Config{MinRate: 5, MaxRate: 1}, func(c Config) bool { return c.MaxRate == 5 && c.InitialRate == 5 }},
		{"initial above max", Config{InitialRate: 50, MaxRate: 10}, func(c Config) bool { return c.InitialRate == 10 }},
		{"window clamps", Config{InitialWindow: 20, MaxWindow: 4}, func(c Config) bool { return c.InitialWindow == 4 && c.MaxWindow == 4 }},
		{"NaN rate", Config{InitialRate: math.NaN()}, func(c Config) bool { return c.InitialRate == 2 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in.withDefaults()
			if !tc.want(got) {
				t.Errorf("withDefaults(%+v) = %+v", tc.in, got)
			}
			c := New(tc.in, t0)
			if r := c.Rate(); r != got.InitialRate {
				t.Errorf("Rate() = %v, want %v", r, got.InitialRate)
			}
			if w := c.Window(); w != got.InitialWindow {
				t.Errorf("Window() = %v, want %v", w, got.InitialWindow)
			}
		})
	}
}

func TestSlowStartRate(t *testing.T) {
	t.Parallel()
	// An unlimited host reaches full speed (MaxRate, or MaxWindow requests in flight) within a
	// few seconds, the window following the rate.
	tests := []struct {
		name    string
		lat     time.Duration
		maxRate float64
	}{
		{"fast host, rate-capped", 5 * time.Millisecond, 1000},
		{"20ms host, window-capped", 20 * time.Millisecond, 1000}, // 8 / 20ms = 400 req/s
		{"100ms host, low MaxRate", 100 * time.Millisecond, 30},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Config{MaxRate: tc.maxRate}, t0)
			d := &driver{c: c, now: t0, lat: tc.lat}
			full := min(tc.maxRate, 8/tc.lat.Seconds())
			prev := c.Rate()
			for d.now.Before(t0.Add(4*time.Second)) && d.throughput(500*time.Millisecond) < 0.9*full {
				d.send(Success)
				if r := c.Rate(); r < prev {
					t.Fatalf("rate fell from %v to %v in slow start", prev, r)
				}
				prev = c.Rate()
			}
			got := d.throughput(500 * time.Millisecond)
			t.Logf("%.0f req/s (full speed %.0f) after %v, window %d", got, full, d.now.Sub(t0), c.Window())
			if got < 0.9*full {
				t.Errorf("after %v: %.0f req/s, want 90%% of %.0f", d.now.Sub(t0), got, full)
			}
			if st := c.Stats(); st.Phase != PhaseSlowStart || st.Decreases != 0 {
				t.Errorf("Stats = %+v, want slow start without decreases", st)
			}
		})
	}
}

func TestSlowStartDoublingPace(t *testing.T) {
	t.Parallel()
	// At a high rate the step is SlowStartInterval: ×2 per 125ms of use.
	c := New(Config{InitialRate: 100}, t0)
	d := &driver{c: c, now: t0, lat: time.Millisecond}
	d.run(250 * time.Millisecond)
	if r := c.Rate(); r < 300 || r > 500 {
		t.Errorf("after 250ms from 100 req/s the rate is %.0f, want about 400", r)
	}
}

func TestSlowStartNeedsUse(t *testing.T) {
	t.Parallel()
	// A host we have few URLs for: one request every 2s at an allowed 10 req/s. Nothing tests
	// a higher rate, so nothing may grow.
	c := New(Config{InitialRate: 10}, t0)
	now := t0
	for i := 0; i < 30; i++ {
		c.Observe(now.Add(20*time.Millisecond), Outcome{Signal: Success, Sent: now, Latency: 20 * time.Millisecond})
		now = now.Add(2 * time.Second)
	}
	if r := c.Rate(); r > 10*1.05 {
		t.Errorf("unused rate grew to %.2f", r)
	}
	if w := c.Window(); w != 2 {
		t.Errorf("window grew to %d without ever being full", w)
	}
}

func TestSlowStartWindow(t *testing.T) {
	t.Parallel()
	// Rate far from binding: a closed loop that sends again as soon as a request finishes, so
	// requests find the window full and it grows by one per such success, to MaxWindow within
	// a few round trips.
	c := New(Config{InitialRate: 1000, MaxWindow: 16}, t0)
	var inFlight []time.Time // completion times
	now := t0
	var prev int
	for c.Window() < 16 {
		if now.After(t0.Add(time.Second)) {
			t.Fatalf("window %d after 10 round trips, want 16", c.Window())
		}
		for len(inFlight) < c.Window() {
			inFlight = append(inFlight, now.Add(100*time.Millisecond))
			now = now.Add(time.Millisecond)
		}
		done := inFlight[0]
		inFlight = inFlight[1:]
		now = maxTime(now, done)
		c.Observe(done, Outcome{Signal: Success, Sent: done.Add(-100 * time.Millisecond), Latency: 100 * time.Millisecond})
		if w := c.Window(); w < prev {
			t.Fatalf("window fell from %d to %d", prev, w)
		}
		prev = c.Window()
	}
	t.Logf("window 16 after %v (100ms round trips)", now.Sub(t0))
	if r := c.Rate(); r != 1000 {
		t.Errorf("rate moved to %v while the window was the limit", r)
	}
}

// settled returns a controller that has run at a steady 10 req/s (MaxRate 10 keeps slow start
// there) for 10s, and its driver.
func settled(cfg Config) (*Controller, *driver) {
	cfg.InitialRate, cfg.MaxRate = 10, 10
	c := New(cfg, t0)
	d := &driver{c: c, now: t0, lat: 20 * time.Millisecond, pause: time.Second}
	d.run(10 * time.Second)
	return c, d
}

// refuse sends one request that is refused and waits for its answer.
func (d *driver) refuse(sig Signal) {
	d.send(sig)
	d.drain()
}

func TestOverloadDecrease(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		cfg   Config
		steps func(d *driver)
		want  float64 // rate after the steps; -1: half the rate the steps left in d.wantHalf
		decs  int     // Stats.Decreases
		over  int     // Stats.OverLimit
	}{
		{"first refusal: beta × accepted", Config{}, func(d *driver) {
			d.refuse(Overload)
		}, 9.7, 1, 1},
		{"refusals of the same epoch are one event", Config{}, func(d *driver) {
			// Three requests in flight when the first refusal arrives: all sent before the
			// decrease, so only the first counts.
			sent := d.now
			for i := 0; i < 3; i++ {
				s := sent.Add(time.Duration(i) * 100 * time.Millisecond)
				d.c.Observe(sent.Add(300*time.Millisecond+time.Duration(i)), Outcome{Signal: Overload, Sent: s, Latency: time.Millisecond})
			}
		}, 9.7, 1, 3},
		{"refusal ending an epoch too short to measure: halve", Config{}, func(d *driver) {
			d.refuse(Overload)        // 10 → 9.7
			d.now = d.now.Add(sec(1)) // a Retry-After pause
			d.send(Success)           // first request after the pause passes
			d.refuse(Overload)        // second is refused, 0.1s into the epoch
		}, 0.5 * 9.7, 2, 2},
		{"refusal ending a climb: beta × measured limit", Config{}, func(d *driver) {
			d.refuse(Overload)        // 10 → 9.7, plateau 9.8
			d.now = d.now.Add(sec(1)) // a Retry-After pause
			d.run(sec(2))             // 20 successes sent in 2s, climbing toward 9.8
			d.refuse(Overload)        // refused 2.05s after the epoch's first send
		}, 0.97 * (20 - 1.5) / 2.05, 2, 2}, // beta × (successes − burst allowance) / span
		{"refusal at a level that held 6s: measured over the whole epoch", Config{}, func(d *driver) {
			d.refuse(Overload)        // 10 → 9.7, plateau 9.8, back there at once
			d.now = d.now.Add(sec(1)) // a Retry-After pause
			d.run(sec(6))             // 58 successes sent at 9.7–9.8 req/s
			d.refuse(Overload)
		}, 0.97 * (58 - 1.5) / 5.95, 2, 2},
		{"the limit fell: held level refused, then at once again: halve", Config{}, func(d *driver) {
			d.refuse(Overload)
			d.now = d.now.Add(sec(1))
			d.run(sec(6))
			d.refuse(Overload)        // measured: 0.97 × 9.5 ≈ 9.21
			d.now = d.now.Add(sec(1)) // a Retry-After pause
			d.send(Success)
			d.deliver(d.now)
			d.wantHalf = d.c.Rate()
			d.refuse(Overload) // 0.1s into the epoch: too short to measure
		}, -1, 3, 3},
		{"MinRate floor", Config{MinRate: 8}, func(d *driver) {
			for i := 0; i < 5; i++ {
				d.refuse(Overload)
				d.now = d.now.Add(sec(1))
			}
		}, 8, 5, 5},
		{"failures in a cluster decrease like overload", Config{}, func(d *driver) {
			d.refuse(Failure)
			d.refuse(Failure)
			d.refuse(Failure) // the third of the last 8 outcomes ends slow start:
		}, 0.97 * 8, 1, 0}, // beta × the last second's accepted rate, two of its requests failed
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, d := settled(tc.cfg)
			if c.Rate() != 10 {
				t.Fatalf("setup: rate %v", c.Rate())
			}
			tc.steps(d)
			st := c.Stats()
			want := tc.want
			if want < 0 {
				want = 0.5 * d.wantHalf
			}
			if !near(st.Rate, want, 0.01) {
				t.Errorf("rate = %.3f, want %.3f", st.Rate, want)
			}
			if st.Decreases != tc.decs || st.OverLimit != tc.over {
				t.Errorf("Decreases, OverLimit = %d, %d; want %d, %d", st.Decreases, st.OverLimit, tc.decs, tc.over)
			}
			if st.Phase == PhaseSlowStart {
				t.Errorf("still in slow start after a congestion signal")
			}
			if st.LastDecrease.IsZero() {
				t.Errorf("LastDecrease not set")
			}
		})
	}
}

func TestStaleSignalIgnored(t *testing.T) {
	t.Parallel()
	c, d := settled(Config{})
	d.refuse(Overload)
	r, decs := c.Rate(), c.Stats().Decreases
	// A timeout for a request sent long before the decrease arrives now.
	c.Observe(d.now, Outcome{Signal: Failure, Sent: t0.Add(sec(5))})
	if c.Rate() != r || c.Stats().Decreases != decs {
		t.Errorf("stale failure moved the rate %v → %v (decreases %d → %d)", r, c.Rate(), decs, c.Stats().Decreases)
	}
	if c.Stats().Failures != 1 {
		t.Errorf("stale failure not counted")
	}
}

func TestFailureWithFullWindowShrinksWindow(t *testing.T) {
	t.Parallel()
	c := New(Config{InitialRate: 1000, InitialWindow: 8, MaxWindow: 8}, t0)
	// Eight requests in flight (the window is full), the last three time out.
	for i := 0; i < 5; i++ {
		s := t0.Add(time.Duration(i) * time.Millisecond)
		c.Observe(t0.Add(time.Second+time.Duration(i)), Outcome{Signal: Success, Sent: s, Latency: time.Second})
	}
	for i := 5; i < 8; i++ {
		c.Observe(t0.Add(2*time.Second+time.Duration(i)), Outcome{Signal: Failure, Sent: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	if w := c.Window(); w != 7 {
		t.Errorf("window = %d after a failure with the window full, want 7", w)
	}
}

func TestReturnThenProbe(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		cfg   Config
		probe time.Duration // time from the plateau to +10%
		pause time.Duration // the refusal's Retry-After
		back  time.Duration // time from the refusal to the plateau
	}{
		{"probeRequests at 9.8 req/s", Config{}, sec(probeRequests / 9.8), time.Second, returnTime},
		// A refusal that costs no pause (no Retry-After) may be risked sooner.
		{"no Retry-After: quickShare of returnTime", Config{}, sec(probeRequests / 9.8), 0, 2 * time.Second},
		// A probe that finds the limit where it was costs the pause: probe less often where
		// it is long (the pause ÷ (1 − beta), up to maxPauseProbe).
		{"Retry-After 60s: 33 min", Config{}, sec(60 / (1 - beta)), time.Minute, returnTime},
		{"Retry-After 10 min: capped", Config{}, maxPauseProbe, 10 * time.Minute, returnTime},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, d := settled(tc.cfg)
			c.cfg.MaxRate = 1000 // let it grow again
			d.pause = tc.pause
			d.refuse(Overload)
			st := c.Stats()
			if !near(st.Rate, 9.7, 0.01) || !near(st.Plateau, 9.8, 0.01) {
				t.Fatalf("after the refusal rate %.3f plateau %.3f, want 9.7 and 9.8", st.Rate, st.Plateau)
			}
			d.now = d.now.Add(sec(1)) // pause: must not count toward the curve
			d.run(tc.back - 500*time.Millisecond)
			if r := c.Rate(); r > 9.795 {
				t.Errorf("%v after the refusal the rate is %.3f, want it still returning to 9.8", tc.back-500*time.Millisecond, r)
			}
			d.run(600 * time.Millisecond)
			if r := c.Rate(); !near(r, 9.8, 0.001) {
				t.Errorf("%v after the refusal the rate is %.3f, want the plateau 9.8", tc.back+100*time.Millisecond, r)
			}
			d.run(tc.probe / 2)
			if r := c.Rate(); !near(r, 9.8*1.0125, 0.01) {
				t.Errorf("halfway the rate is %.3f, want about %.3f (+1.25%%)", r, 9.8*1.0125)
			}
			d.run(tc.probe / 2)
			if r := c.Rate(); !near(r, 9.8*1.1, 0.02) {
				t.Errorf("after the probe time the rate is %.3f, want about %.3f (+10%%)", r, 9.8*1.1)
			}
			if p := c.Stats().Phase; p != PhaseProbe {
				t.Errorf("phase %q, want %q", p, PhaseProbe)
			}
			// Far above the plateau with no refusal: the limit has risen, slow start again.
			d.run(tc.probe)
			if p := c.Stats().Phase; p != PhaseSlowStart {
				t.Errorf("phase %q after probing 25%% above the plateau, want %q", p, PhaseSlowStart)
			}
		})
	}
}

func TestPatience(t *testing.T) {
	t.Parallel()
	// Refusals that recur at the same rate stretch the probe time: on a steady token bucket the
	// gaps between refusals grow (after the first ones, which find the limit).
	r := runSim(simConfig{host: simHost{limit: 10}, duration: 600, rtt: 0.01})
	var gaps []float64
	for i := 1; i < len(r.overAt); i++ {
		gaps = append(gaps, r.overAt[i]-r.overAt[i-1])
	}
	t.Logf("seconds between refusals: %.1f", gaps)
	if len(gaps) < 4 {
		t.Fatalf("only %d refusals in 600s", len(r.overAt))
	}
	last := gaps[len(gaps)-3:]
	if !(last[0] >= 60 && last[1] >= 60 && last[2] >= 60) {
		t.Errorf("steady-state gaps %v, want them stretched to at least a minute", last)
	}
}

func TestSearchAfterOvercut(t *testing.T) {
	t.Parallel()
	// Refusals right after each decrease (epochs too short to measure) halve the rate each
	// time, far below the limit; the plateau is then raised by binary search toward the last
	// refused rate, one step per returnTime, until it is within restartFactor of it. The slow cubic
	// probe alone would take minutes to get there.
	c, d := settled(Config{})
	c.cfg.MaxRate = 1000
	for i := 0; i < 3; i++ {
		d.refuse(Overload)
		d.now = d.now.Add(sec(1))
		d.send(Success)
	}
	low := c.Rate()
	hi := c.target.rate
	d.run(time.Minute)
	r := c.Rate()
	t.Logf("rate %.2f after the cascade, %.2f a minute later; last refused %.2f", low, r, hi)
	if low > 0.6*hi {
		t.Fatalf("setup: rate %.2f after the cascade is not an overcut of %.2f", low, hi)
	}
	if r < plateauFactor*hi/restartFactor || r > hi {
		t.Errorf("a minute later the rate is %.2f, want within %.2fx under %.2f × %.2f", r, restartFactor, plateauFactor, hi)
	}
}

// TestSpuriousSlowStartRefusal: a request that reaches a one-token host close behind another
// (network or scheduling jitter) is refused while slow start is still far under the host's
// limit. The climb after it holds just under the refused rate unrefused, so that refusal
// measured nothing: the search goes on above it. Before, the rate stayed under the refused
// 4 req/s for the 30 s that follow (3.3 req/s at the end), held there by the slow probe.
func TestSpuriousSlowStartRefusal(t *testing.T) {
	t.Parallel()
	c := New(Config{}, t0)
	d := &driver{c: c, now: t0, lat: time.Millisecond}
	for range 2 { // robots.txt and a first page: slow start reaches 4 req/s
		d.send(Success)
		d.drain()
	}
	// The next request reaches the host 30 ms behind the last success, and is refused.
	last := d.delivered[len(d.delivered)-1].Add(-d.lat)
	c.Observe(last.Add(31*time.Millisecond), Outcome{Signal: Overload, Sent: last.Add(30 * time.Millisecond), Latency: time.Millisecond})
	d.now = maxTime(d.now, last.Add(31*time.Millisecond))
	rs, _ := c.pace.lastRefusal.get()
	for range 30 { // every request accepted: the host's limit is far above
		d.run(time.Second)
	}
	t.Logf("refused at %.2f req/s; 30 s later the rate is %.2f", rs, c.Rate())
	if rs > 4.5 {
		t.Fatalf("setup: refused at %.2f req/s, want slow start's 4", rs)
	}
	if r := c.Rate(); r < 2*rs {
		t.Errorf("30 s after a refusal at %.2f req/s that the climb never met again, the rate is %.2f, want at least %.2f", rs, r, 2*rs)
	}
}

func TestUnblockAfterRefusalRun(t *testing.T) {
	t.Parallel()
	// A host that refuses whatever is sent for 10 s (a sliding-window quota spent, no
	// Retry-After): each refusal with no success since the last halves the rate, spacing the
	// run's requests out. The first success ends the run: the rate returns to what the host
	// accepted over it, beta × the largest (successes since t0 − burstAllowance) ÷ (t0 to that
	// success), here over all 100 of settled's successes, not to the halved rate; the gap to
	// the refused rate is then searched.
	c, d := settled(Config{})
	c.cfg.MaxRate = 1000
	d.pause = 0
	first := d.now
	end := d.now.Add(sec(10))
	for d.now.Before(end) {
		d.refuse(Overload)
	}
	run := c.Stats()
	if run.OverLimit < 4 || run.Rate > 1 {
		t.Fatalf("setup: %d refusals in the run, rate %.2f after it; want ≥ 4 halvings below 1/s", run.OverLimit, run.Rate)
	}
	// Every success since the start was remembered (ring of 128): 100 in settled's 10 s.
	sends := c.sends.successSends(never, toNanos(first))
	sent := d.now
	d.send(Success)
	d.drain()
	span := time.Duration(toNanos(sent) - sends[0]).Seconds()
	want := beta * (float64(len(sends)+1) - burstAllowance) / span
	got := c.Rate()
	t.Logf("rate %.2f at the end of the run (%d refusals), %.2f after its first success (want %.2f over %.1fs)",
		run.Rate, run.OverLimit, got, want, span)
	if !near(got, want, 0.05) {
		t.Errorf("rate after the run %.2f, want %.2f", got, want)
	}
	d.run(time.Minute)
	if r := c.Rate(); r < plateauFactor*10/restartFactor {
		t.Errorf("a minute later the rate is %.2f, want searched up to within %.2fx of %.2f", r, restartFactor, plateauFactor*10)
	}
}

func TestResumedRefusalRunIsOneEpisode(t *testing.T) {
	t.Parallel()
	// A sliding window that has slid only a little lets one request through and blocks
	// again. The second run is the same episode: at its end the rate is measured from where
	// the first run's epoch began (settled's 100 successes), not from the first run's last
	// refusal, which leaves only the one success in between and a few seconds of backoff.
	c, d := settled(Config{})
	c.cfg.MaxRate = 1000
	d.pause = 0
	block := func(dur time.Duration) {
		for end := d.now.Add(dur); d.now.Before(end); {
			d.refuse(Overload)
		}
	}
	block(3 * time.Second)
	d.send(Success)
	d.now = d.pending[len(d.pending)-1].done // the next request leaves at the new rate, not the run's
	d.drain()
	from, first := c.ep.from, c.Rate()
	block(2 * time.Second) // sooner after the first run ended than that run lasted
	if c.ep.from != from {
		t.Errorf("the resumed run's episode begins at %v, want the first run's %v", c.ep.from, from)
	}
	d.send(Success)
	d.drain()
	got := c.Rate()
	t.Logf("rate %.2f after the first run, %.2f after the resumed one", first, got)
	if got < 0.5*first {
		t.Errorf("rate %.2f after the resumed run, want at least half of %.2f (measured over the episode)", got, first)
	}
}

// blockedHost returns a settled host (10 req/s, free to grow) that has refused every request,
// without Retry-After, for dur: a refusal run.
func blockedHost(dur time.Duration) (*Controller, *driver) {
	c, d := settled(Config{})
	c.cfg.MaxRate = 1000
	d.pause = 0
	for end := d.now.Add(dur); d.now.Before(end); {
		d.refuse(Overload)
	}
	return c, d
}

func TestResumedRefusalEndsBelowItsRate(t *testing.T) {
	t.Parallel()
	// After a run, a single refusal soon after (the rate the run ended with is a little too
	// high for the window) resumes the episode: the next success ends it like a run, with the
	// rate measured over the episode, but Beta under the rate just refused, not halved and
	// left there (the halved rate used to hold for minutes).
	c, d := blockedHost(3 * time.Second)
	d.send(Success)
	d.now = d.pending[len(d.pending)-1].done
	d.drain()
	refused := c.Rate()
	d.refuse(Overload) // one refusal, at once
	halved := c.Rate()
	d.send(Success)
	d.now = d.pending[len(d.pending)-1].done
	d.drain()
	got := c.Rate()
	t.Logf("refused at %.2f, halved to %.2f, %.2f after the next success", refused, halved, got)
	if halved > 0.6*refused {
		t.Fatalf("setup: the refusal did not halve the rate (%.2f from %.2f)", halved, refused)
	}
	if got > beta*refused*1.001 || got < 0.9*beta*refused {
		t.Errorf("rate %.2f after the resumed refusal's success, want just under beta × %.2f", got, refused)
	}
}

func TestRunWithNothingAcceptedRestartsSlowStart(t *testing.T) {
	t.Parallel()
	// A host whose limit someone else has spent (another client, or another of our names for
	// the same server) refuses from our first page on. When it finally accepts one, the episode
	// holds nothing to measure: slow start begins again from the initial rate instead of the
	// halvings leaving the rate at the floor for good (0.1/s: 150 pages took 25 minutes).
	c := New(Config{}, t0)
	d := &driver{c: c, now: t0, lat: 2 * time.Millisecond}
	d.send(Success) // robots.txt
	d.drain()
	for end := d.now.Add(20 * time.Second); d.now.Before(end); {
		d.refuse(Overload)
	}
	if r := c.Rate(); r > 0.2 {
		t.Fatalf("setup: rate %.2f after 20 s of refusals, want the floor", r)
	}
	d.send(Success)
	d.now = d.pending[len(d.pending)-1].done
	d.drain()
	if st := c.Stats(); st.Phase != PhaseSlowStart || st.Rate < DefaultInitialRate {
		t.Fatalf("after the first success: phase %s, rate %.2f; want slow start from %.0f", st.Phase, st.Rate, DefaultInitialRate)
	}
	d.run(2 * time.Second)
	if r := c.Rate(); r < 8*DefaultInitialRate {
		t.Errorf("rate %.2f two seconds later, want slow start's growth (≥ %.0f)", r, 8*DefaultInitialRate)
	}
}

func TestSearchAfterSlowStartRunIsBounded(t *testing.T) {
	t.Parallel()
	// A window limiter lets its whole quota through at any speed: slow start climbs to
	// hundreds of req/s inside one burst, then the host refuses whatever is sent until the
	// window has slid. The rate that drew the run's first refusal says nothing of the limit,
	// so the search after the run aims at no more than twice the rate the episode measured.
	c := New(Config{MaxRate: 1000}, t0)
	d := &driver{c: c, now: t0, lat: 2 * time.Millisecond}
	for range 100 {
		d.send(Success)
	}
	d.drain()
	burst := c.Rate()
	for end := d.now.Add(10 * time.Second); d.now.Before(end); {
		d.refuse(Overload)
	}
	refused := c.ep.refused
	d.send(Success)
	d.drain()
	r := c.Rate()
	t.Logf("slow start reached %.0f req/s, refused at %.0f; after the run the rate is %.2f, search toward %.2f", burst, refused, r, c.target.rate)
	if refused < 50 {
		t.Fatalf("setup: slow start refused at %.0f req/s, want a burst far above 10/s", refused)
	}
	if c.target.rate > 2*r*1.001 {
		t.Errorf("search toward %.2f, want at most twice the measured rate %.2f", c.target.rate, r)
	}
}

func latencyRound(c *Controller, start time.Time, n int, base time.Duration, workers int) time.Time {
	// n requests sent 1ms apart to a host with the given workers and service time base: the
	// ones beyond the workers wait one service time.
	for i := 0; i < n; i++ {
		sent := start.Add(time.Duration(i) * time.Millisecond)
		lat := base
		if i >= workers {
			lat = 2 * base
		}
		c.Observe(sent.Add(lat), Outcome{Signal: Success, Sent: sent, Latency: lat})
	}
	return start.Add(2*base + 10*time.Millisecond)
}

func TestLatencySignal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		rounds     int // loaded rounds of 8 requests
		workers    int
		wantWindow int
		wantDecs   int
	}{
		{"queueing beyond 4 workers", 4, 4, 4, 1},
		{"queueing beyond 6 workers", 4, 6, 6, 1},
		{"too few samples", 1, 4, 8, 0}, // 10 + 8 samples < 20
		{"no queueing", 6, 8, 8, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Config{InitialRate: 1000, InitialWindow: 8, MaxWindow: 8}, t0)
			now := t0
			for i := 0; i < 10; i++ { // baseline at low load: one request at a time
				now = latencyRound(c, now, 1, 100*time.Millisecond, 1)
			}
			if b := c.Stats().Baseline; b != 100*time.Millisecond {
				t.Fatalf("baseline %v", b)
			}
			for i := 0; i < tc.rounds; i++ {
				now = latencyRound(c, now, 8, 100*time.Millisecond, tc.workers)
			}
			st := c.Stats()
			if st.Window != tc.wantWindow || st.Decreases != tc.wantDecs {
				t.Errorf("window %d, decreases %d; want %d, %d (p95 %v)", st.Window, st.Decreases, tc.wantWindow, tc.wantDecs, st.P95)
			}
			if tc.wantDecs > 0 && (st.Phase == PhaseSlowStart || st.Rate != 1000) {
				t.Errorf("phase %q rate %v: a latency signal ends slow start and leaves the rate", st.Phase, st.Rate)
			}
		})
	}
}

func TestLatencyAloneIsNoSignal(t *testing.T) {
	t.Parallel()
	// Slow answers to requests sent alone cannot be our queueing.
	c := New(Config{InitialRate: 1000}, t0)
	now := t0
	for i := 0; i < 10; i++ {
		now = latencyRound(c, now, 1, 100*time.Millisecond, 1)
	}
	for i := 0; i < 40; i++ {
		now = latencyRound(c, now, 1, 400*time.Millisecond, 1)
	}
	if st := c.Stats(); st.Decreases != 0 {
		t.Errorf("decreases %d on latency of lone requests", st.Decreases)
	}
}

func TestBaselineRisesOnlyFromLoneRequests(t *testing.T) {
	t.Parallel()
	// MaxWindow 1: no window to shrink, so loaded latency is observed but not acted on.
	cfg := Config{InitialRate: 1000, MaxWindow: 1}
	c := New(cfg, t0)
	now := t0
	for i := 0; i < 10; i++ {
		now = latencyRound(c, now, 1, 100*time.Millisecond, 1)
	}
	for i := 0; i < 100; i++ { // loaded rounds at 2x latency for all, the first sent included
		now = latencyRound(c, now, 4, 200*time.Millisecond, 0)
	}
	if b := c.Stats().Baseline; b != 100*time.Millisecond {
		t.Errorf("baseline drifted to %v under our own load", b)
	}
	for i := 0; i < 300; i++ { // the host itself got slower
		now = latencyRound(c, now, 1, 200*time.Millisecond, 1)
	}
	if b := c.Stats().Baseline; b < 190*time.Millisecond {
		t.Errorf("baseline %v, want it to follow a slower host up", b)
	}
	for i := 0; i < 10; i++ {
		now = latencyRound(c, now, 1, 50*time.Millisecond, 1)
	}
	if b := c.Stats().Baseline; b != 50*time.Millisecond {
		t.Errorf("baseline %v, want it to follow down at once to 50ms", b)
	}
}

func TestRateNotGrownWhenWindowBound(t *testing.T) {
	t.Parallel()
	// Window 2, 500ms per request: 4 req/s get through while the rate allows 10. Every request
	// is sent the moment a slot frees, so the window, not the rate, is the limit: the rate must
	// not grow untested, in slow start or after.
	for _, slowStart := range []bool{true, false} {
		c := New(Config{InitialRate: 10, InitialWindow: 2, MaxWindow: 2}, t0)
		if !slowStart {
			c.phase, c.curve.plateau, c.curve.from = PhaseProbe, 10, 10
		}
		done := []time.Time{t0.Add(500 * time.Millisecond), t0.Add(750 * time.Millisecond)}
		for i := 0; i < 200; i++ {
			d := done[0]
			done = append(done[1:], d.Add(500*time.Millisecond))
			c.Observe(d, Outcome{Signal: Success, Sent: d.Add(-500 * time.Millisecond), Latency: 500 * time.Millisecond})
		}
		if r := c.Rate(); r != 10 {
			t.Errorf("slow start %v: rate moved from 10 to %v while the window was the limit", slowStart, r)
		}
	}
}

func TestFloorsAndCeilings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
		do   func(c *Controller, d *driver)
		want float64
	}{
		{"ceiling applies at once", Config{InitialRate: 10}, func(c *Controller, d *driver) { c.SetCeiling(4) }, 4},
		{"ceiling holds in slow start", Config{InitialRate: 10}, func(c *Controller, d *driver) {
			c.SetCeiling(4)
			d.run(10 * time.Second)
		}, 4},
		{"ceiling removed", Config{InitialRate: 10}, func(c *Controller, d *driver) {
			c.SetCeiling(4)
			c.SetCeiling(0)
		}, 4},
		{"ceiling below MinRate wins", Config{InitialRate: 10, MinRate: 1}, func(c *Controller, d *driver) { c.SetCeiling(0.05) }, 0.05},
		{"negative ceiling is none", Config{InitialRate: 10}, func(c *Controller, d *driver) { c.SetCeiling(-3) }, 10},
		{"MaxRate", Config{InitialRate: 10, MaxRate: 12}, func(c *Controller, d *driver) { d.run(10 * time.Second) }, 12},
		{"MinRate", Config{InitialRate: 10, MinRate: 3}, func(c *Controller, d *driver) {
			for i := 0; i < 20; i++ {
				d.refuse(Overload)
			}
		}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New(tc.cfg, t0)
			d := &driver{c: c, now: t0, lat: 10 * time.Millisecond}
			tc.do(c, d)
			if r := c.Rate(); !near(r, tc.want, 1e-9) {
				t.Errorf("Rate() = %v, want %v", r, tc.want)
			}
			if w, cfg := c.Window(), c.cfg; w < 1 || w > cfg.MaxWindow {
				t.Errorf("Window() = %d outside [1, %d]", w, cfg.MaxWindow)
			}
		})
	}
}

func TestNeutralMovesNothing(t *testing.T) {
	t.Parallel()
	c, d := settled(Config{})
	before := c.Stats()
	for i := 0; i < 50; i++ {
		c.Observe(d.now, Outcome{Signal: Neutral, Sent: d.now})
		c.Observe(d.now, Outcome{Signal: Signal(99), Sent: d.now}) // unknown signals are neutral too
		d.now = d.now.Add(time.Millisecond)
	}
	after := c.Stats()
	if after.Rate != before.Rate || after.Window != before.Window || after.Decreases != before.Decreases {
		t.Errorf("neutral outcomes moved the controller: %+v → %+v", before, after)
	}
	if after.Neutral != 100 {
		t.Errorf("Neutral = %d, want 100", after.Neutral)
	}
}

func TestOutOfOrderTimes(t *testing.T) {
	t.Parallel()
	c := New(Config{}, t0)
	c.Observe(t0.Add(time.Second), Outcome{Signal: Success, Sent: t0, Latency: time.Second})
	// Earlier completion time, zero Sent, Sent in the future, negative latency: clamped.
	c.Observe(t0, Outcome{Signal: Success, Latency: 10 * time.Millisecond})
	c.Observe(t0, Outcome{Signal: Overload, Sent: t0.Add(time.Hour), Latency: -time.Second})
	if st := c.Stats(); st.OverLimit != 1 || st.Rate <= 0 || math.IsNaN(st.Rate) {
		t.Errorf("Stats = %+v", st)
	}
}

func TestStateRoundTrip(t *testing.T) {
	t.Parallel()
	c, d := settled(Config{})
	d.refuse(Overload)
	d.run(3 * time.Second)
	s := c.State()
	back, _ := jsonRoundTrip(t, s)
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("JSON round trip: %+v != %+v", back, s)
	}
	r := Restore(Config{MaxRate: 10}, back, t0.Add(time.Hour))
	st := r.Stats()
	if st.Rate != c.Rate() || st.Window != c.Window() || st.Phase != c.Stats().Phase || st.Plateau != s.Plateau {
		t.Errorf("restored %+v from %+v", st, s)
	}
	if st.OverLimit != 1 || st.Decreases != 1 {
		t.Errorf("restored counters %+v", st)
	}
	// The p95 a stopped crawl's status shows is the one last measured, not 0.
	if p := c.Stats().P95; p <= 0 || st.P95 != p {
		t.Errorf("restored p95 %v, want the saved %v (> 0)", st.P95, p)
	}
	d.pause = time.Minute // and a long Retry-After, which spaces the probe
	d.refuse(Overload)
	if s := c.State(); s.RefusalPause != time.Minute || Restore(Config{}, s, t0).State().RefusalPause != time.Minute {
		t.Errorf("refusal pause not kept: saved %v", s.RefusalPause)
	}

	tests := []struct {
		name      string
		s         State
		wantRate  float64
		wantPhase Phase
	}{
		{"zero state is fresh", State{}, 2, PhaseSlowStart},
		{"still in slow start", State{Rate: 50, Window: 4, SlowStart: true}, 50, PhaseSlowStart},
		{"learned, probing", State{Rate: 50, Window: 4, Plateau: 49}, 50, PhaseProbe},
		{"learned, returning", State{Rate: 50, Window: 4, Plateau: 51}, 50, PhaseReturn},
		{"clamped to config", State{Rate: 5000, Window: 99}, 1000, PhaseProbe},
		{"garbage", State{Rate: math.NaN(), Window: -3, Plateau: math.Inf(1), Baseline: -time.Second}, 2, PhaseSlowStart},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Restore(Config{}, tc.s, t0)
			st := r.Stats()
			if st.Rate != tc.wantRate || st.Phase != tc.wantPhase || st.Window < 1 || st.Window > 8 {
				t.Errorf("Restore(%+v) = %+v", tc.s, st)
			}
		})
	}
}

func TestRestoredBaselineIsProvisional(t *testing.T) {
	t.Parallel()
	r := Restore(Config{}, State{Rate: 10, Window: 2, Baseline: 10 * time.Millisecond}, t0)
	now := t0
	for i := 0; i < 12; i++ {
		now = latencyRound(r, now, 1, 80*time.Millisecond, 1)
	}
	if b := r.Stats().Baseline; b != 80*time.Millisecond {
		t.Errorf("baseline %v, want the new measurement 80ms", b)
	}
}

func TestRandomOutcomesStayInBounds(t *testing.T) {
	t.Parallel()
	const seed = 42
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewSource(seed))
	cfgs := []Config{{}, {MinRate: 0.5, MaxRate: 50, MaxWindow: 4}, {InitialRate: 1000, MaxWindow: 32}}
	for ci, cfg := range cfgs {
		c := New(cfg, t0)
		lim := c.cfg
		now := t0
		for i := 0; i < 6000; i++ {
			now = now.Add(time.Duration(rnd.Int63n(int64(50 * time.Millisecond))))
			if rnd.Intn(50) == 0 {
				now = now.Add(-time.Second) // out of order
			}
			lat := time.Duration(rnd.Int63n(int64(2 * time.Second)))
			o := Outcome{Signal: Signal(rnd.Intn(5)), Sent: now.Add(-lat), Latency: lat}
			switch rnd.Intn(20) {
			case 0:
				o.Sent = time.Time{}
			case 1:
				o.Latency = 0
			case 2:
				o.Sent = now.Add(time.Hour)
			}
			c.Observe(now, o)
			if rnd.Intn(500) == 0 {
				c.SetCeiling(rnd.Float64() * 20)
			}
			if rnd.Intn(700) == 0 {
				c.SetCeiling(0)
			}
			r, w := c.Rate(), c.Window()
			if math.IsNaN(r) || r <= 0 || r > lim.MaxRate || r > c.capRate() || (c.capRate() >= lim.MinRate && r < lim.MinRate) {
				t.Fatalf("config %d step %d: rate %v out of bounds (cap %v)", ci, i, r, c.capRate())
			}
			if w < 1 || w > lim.MaxWindow {
				t.Fatalf("config %d step %d: window %d out of bounds", ci, i, w)
			}
			if i%1000 == 0 {
				st := c.Stats()
				if math.IsNaN(st.AcceptedRate) || math.IsInf(st.AcceptedRate, 0) || st.AcceptedRate < 0 || st.P95 < 0 || st.Baseline < 0 {
					t.Fatalf("config %d step %d: Stats %+v", ci, i, st)
				}
				s, _ := jsonRoundTrip(t, c.State())
				if r := Restore(cfg, s, now); r.Rate() <= 0 || r.Window() < 1 {
					t.Fatalf("restored %+v", r.Stats())
				}
			}
		}
	}
}

// TestSingleTokenLimit covers the gap rule: a host that refuses a request sent sooner after the
// previous success than any accepted one behaves like a one-token bucket, whose limit the
// shortest accepted gap measures.
func TestSingleTokenLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		gaps   []float64 // s between consecutive successes (by send time)
		refuse float64   // s from the last success to the refused send
		want   float64   // limit; 0 = not a one-token host
	}{
		{"climb refused at a shorter gap", []float64{0.25, 0.24, 0.22, 0.21, 0.2}, 0.19, 5},
		{"an earlier success came sooner: a burst", []float64{0.25, 0.1, 0.22, 0.21, 0.2}, 0.19, 0},
		{"refused at a gap that was accepted before", []float64{0.25, 0.2, 0.22}, 0.2, 0},
		{"too few successes", []float64{0.25}, 0.19, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Config{}, t0)
			at := t0
			for _, g := range tc.gaps {
				c.Observe(at.Add(10*time.Millisecond), Outcome{Signal: Success, Sent: at, Latency: 5 * time.Millisecond})
				at = at.Add(sec(g))
			}
			c.Observe(at.Add(10*time.Millisecond), Outcome{Signal: Success, Sent: at, Latency: 5 * time.Millisecond})
			ts := toNanos(at.Add(sec(tc.refuse)))
			got, ok := c.singleTokenLimit(ts)
			if ok != (tc.want > 0) || (ok && !near(got, tc.want, 1e-9)) {
				t.Errorf("singleTokenLimit = %v, %v; want %v", got, ok, tc.want)
			}
		})
	}
}

// spreadRound sends len(lats) requests at now, the i-th with busy+i others of ours in flight
// (busy > 0: a steady pipeline, no request alone), each answered after lats[i], and feeds the
// outcomes in completion order. It returns when the last one finished.
func spreadRound(c *Controller, now time.Time, busy int, lats []time.Duration) time.Time {
	order := make([]int, len(lats))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(lats[a], lats[b]) })
	end := now
	for _, i := range order {
		end = now.Add(lats[i])
		c.Observe(end, Outcome{Signal: Success, Sent: now, Latency: lats[i], InFlight: busy + i + 1})
	}
	return end
}

func logNormal(rnd *rand.Rand, median time.Duration, sigma float64) time.Duration {
	return time.Duration(float64(median) * math.Exp(sigma*rnd.NormFloat64()))
}

func TestLatencySpreadIsNoSignal(t *testing.T) {
	t.Parallel()
	// A host whose latency spreads (p95 ≈ 2.3 × the median) the same at 8 requests in flight as
	// at one: no latency decrease, for any of 20 seeds.
	for seed := int64(1); seed <= 20; seed++ {
		rnd := rand.New(rand.NewSource(seed))
		c := New(Config{InitialRate: 1000, InitialWindow: 8, MaxWindow: 8}, t0)
		now := t0
		for i := 0; i < 8; i++ { // the reference: one request at a time
			now = spreadRound(c, now, 0, []time.Duration{logNormal(rnd, 100*time.Millisecond, 0.5)})
		}
		for i := 0; i < 100; i++ {
			lats := make([]time.Duration, 8)
			for j := range lats {
				lats[j] = logNormal(rnd, 100*time.Millisecond, 0.5)
			}
			now = spreadRound(c, now, 1, lats)
		}
		if st := c.Stats(); st.Window != 8 {
			t.Errorf("seed %d: window %d after 800 requests whose latency does not depend on load (decreases %d)", seed, st.Window, st.Decreases)
		}
	}
}

func TestLatencyQueueingAmidSpread(t *testing.T) {
	t.Parallel()
	// Two workers, service times spread as above, 8 requests at a time: six queue, the last
	// two behind three others each. With the reference slow start's first requests give (32
	// sent alone), the window comes down to twice the workers or less. (Milder queueing on a
	// spread host, two or four requests waiting for four workers, is within what the host's own
	// spread explains at 32 samples, and is not caught: the price of not mistaking spread for
	// load. A tight host is held at its workers: TestLatencySignal.)
	rnd := rand.New(rand.NewSource(1))
	c := New(Config{InitialRate: 1000, InitialWindow: 8, MaxWindow: 8}, t0)
	now := t0
	for i := 0; i < 32; i++ {
		now = spreadRound(c, now, 0, []time.Duration{logNormal(rnd, 100*time.Millisecond, 0.5)})
	}
	for i := 0; i < 40; i++ {
		lats := make([]time.Duration, c.Window())
		for j := range lats {
			lats[j] = logNormal(rnd, 100*time.Millisecond, 0.5)
			if j >= 2 {
				lats[j] += lats[j-2] // waited for a worker
			}
		}
		now = spreadRound(c, now, 1, lats)
	}
	if st := c.Stats(); st.Window > 4 || st.Decreases == 0 {
		t.Errorf("window %d, decreases %d: want at most twice the 2 workers", st.Window, st.Decreases)
	}
}

func TestLowPlateauStillProbes(t *testing.T) {
	t.Parallel()
	// probeRequests stretches the probe at a low plateau, but to no more than maxStretch ×
	// probeTime: a host cut to 1 req/s is probed above it within minutes, not 400 requests.
	c := New(Config{InitialRate: 1, MaxRate: 1}, t0)
	d := &driver{c: c, now: t0, lat: 20 * time.Millisecond, pause: time.Second}
	d.run(60 * time.Second)
	c.cfg.MaxRate = 1000
	d.refuse(Overload)
	k := c.Stats().Plateau
	if k > 1 || k < 0.5 {
		t.Fatalf("plateau %.3f after the refusal at 1 req/s, want within [0.5, 1]", k)
	}
	d.now = d.now.Add(time.Second) // the pause
	d.run(returnTime + maxStretch*probeTime)
	if r := c.Rate(); !near(r, k*1.1, 0.03) {
		t.Errorf("%v after returning to the plateau %.3f the rate is %.3f, want about %.3f (+10%%)",
			maxStretch*probeTime, k, r, k*1.1)
	}
	d.run(maxStretch * probeTime)
	if p := c.Stats().Phase; p != PhaseSlowStart {
		t.Errorf("phase %q after probing twice the probe time, want %q", p, PhaseSlowStart)
	}
}

func TestIsolatedFailureMovesNothing(t *testing.T) {
	t.Parallel()
	// A page that always fails (a broken endpoint's 502, a timeout) among pages that succeed is
	// the page's fault: counted, and nothing cut. A third failure among the last 8 outcomes is
	// the host's.
	c, d := settled(Config{})
	for i := 0; i < 3; i++ {
		d.refuse(Failure)
		d.run(time.Second) // 10 successes between
	}
	st := c.Stats()
	if st.Decreases != 0 || st.Rate != 10 || st.Failures != 3 {
		t.Fatalf("after 3 isolated failures: %d decreases, rate %.2f, %d failures; want 0, 10, 3", st.Decreases, st.Rate, st.Failures)
	}
	d.refuse(Failure)
	d.send(Success)
	d.refuse(Failure)
	if st := c.Stats(); st.Decreases != 0 {
		t.Fatalf("2 failures among the last 8 outcomes cut the rate")
	}
	d.refuse(Failure)
	if st := c.Stats(); st.Decreases != 1 || st.Rate >= 10 {
		t.Errorf("3 failures among the last 8 outcomes: %d decreases, rate %.2f; want a cut", st.Decreases, st.Rate)
	}
}

func TestFailuresUnderTheServedRateStop(t *testing.T) {
	t.Parallel()
	// A crawl's last URLs are pages that fail, answered in a row just after the host served
	// 10 req/s. The first cuts answer them; once the rate is under half of what the host has
	// just served, slowing down cannot relieve them and they move nothing. A peak older than
	// returnTime protects nothing: an outage's failures halve the rate on toward the floor.
	c, d := settled(Config{})
	for i := 0; i < 12; i++ {
		d.refuse(Failure)
	}
	st := c.Stats()
	if st.Rate < minBeta*minBeta*10 || st.Rate > minBeta*10 || st.Decreases > 3 {
		t.Fatalf("12 failures after the host served 10 req/s: rate %.2f after %d decreases; want within [%.2f, %.2f] after at most 3",
			st.Rate, st.Decreases, minBeta*minBeta*10, minBeta*10)
	}
	d.now = d.now.Add(returnTime)
	for i := 0; i < 4; i++ {
		d.refuse(Failure)
	}
	if after := c.Stats(); after.Decreases == st.Decreases || after.Rate >= st.Rate {
		t.Errorf("failures %v after the host last served moved nothing (rate %.2f); want cuts", returnTime, after.Rate)
	}
}

// failingHost drives c for dur like a host that answers each request with a Failure with
// probability fail(rate) (the controller's rate when it is sent), a Success otherwise. It
// returns the successes per second over the last third of dur and the decreases in that third.
func failingHost(c *Controller, d *driver, rnd *rand.Rand, dur time.Duration, fail func(rate float64) float64) (okRate float64, lateDecreases int) {
	return badHost(c, d, rnd, dur, Failure, fail)
}

// badHost is failingHost answering sig instead of Failure.
func badHost(c *Controller, d *driver, rnd *rand.Rand, dur time.Duration, sig Signal, fail func(rate float64) float64) (okRate float64, lateDecreases int) {
	end := d.now.Add(dur)
	late := d.now.Add(dur * 2 / 3)
	ok, before := 0, -1
	for d.now.Before(end) {
		if before < 0 && !d.now.Before(late) {
			before = c.Stats().Decreases
		}
		answer := Success
		if rnd.Float64() < fail(c.Rate()) {
			answer = sig
		} else if before >= 0 {
			ok++
		}
		d.send(answer)
	}
	d.drain()
	return float64(ok) / (dur / 3).Seconds(), c.Stats().Decreases - before
}

// randomFailureSeeds drives a new controller (MaxRate 50) for dur on each of seeds 1–12
// against a host that fails a share p of its requests at random, and counts the seeds whose
// successes over the last third of dur reach 80% of the (1−p)·50/s the host can give, with at
// most maxLate decreases in that third.
func randomFailureSeeds(t *testing.T, p float64, dur time.Duration, maxLate int) int {
	t.Helper()
	good, most := 0, (1-p)*50
	for seed := int64(1); seed <= 12; seed++ {
		c := New(Config{MaxRate: 50}, t0)
		d := &driver{c: c, now: t0, lat: 20 * time.Millisecond}
		okRate, late := failingHost(c, d, rand.New(rand.NewSource(seed)), dur, func(float64) float64 { return p })
		t.Logf("seed %2d: %4.1f successes/s in the last third (of at most %.0f), %d decreases there, %d in all", seed, okRate, most, late, c.Stats().Decreases)
		if okRate >= 0.8*most && late <= maxLate {
			good++
		}
	}
	return good
}

func TestBackgroundFailuresAreNotCongestion(t *testing.T) {
	t.Parallel()
	// A host that fails a tenth of its requests whatever the rate (a flaky backend, one bad node
	// behind a balancer), from its first request on: once its background share is known, the
	// cuts its first clusters drew are undone and its later clusters are not cut at. Before,
	// the rate fell with every cluster and stayed down (0.6–6.8 successes/s in the last 30 s
	// here, 0 of 12 seeds passing). All 12 seeds pass today (38–46/s); 10 are required, since
	// a seed whose early cuts reach a cluster the share does not explain keeps them.
	if good := randomFailureSeeds(t, 0.1, 90*time.Second, 1); good < 10 {
		t.Errorf("%d of 12 seeds reached 36 successes/s with at most 1 decrease in the last 30 s, want at least 10", good)
	}
}

func TestHeavyBackgroundFailures(t *testing.T) {
	t.Parallel()
	// A fifth of the requests failing at random from the first: most seeds learn the share and
	// undo the early cuts; a seed whose early cuts took the rate very low needs minutes to see
	// the 48 outcomes that teach it, and ends low here.
	if good := randomFailureSeeds(t, 0.2, 60*time.Second, math.MaxInt); good < 9 {
		t.Errorf("%d of 12 seeds reached 32 successes/s in the last 20 s, want at least 9", good)
	}
}

func TestLoadFailuresStillCut(t *testing.T) {
	t.Parallel()
	// A host that holds 20 req/s and fails the excess (a proxy answering 502 or 504 for what
	// its backend cannot take): its failures come only near the rate its clusters were cut at,
	// teach no background share, and are cut at as before (the successes and failure shares
	// are the same as before the share existed). Teaching the share from every outcome held at
	// the plateau let such a host teach it to tolerate more of the excess: up to 29 req/s with
	// 30% of requests failing. The rate is a snapshot of the sawtooth: seed 12 ends in a probe
	// at 23.3 req/s, and at 24.3 since a run's end returns to the rate held before it.
	for seed := int64(1); seed <= 12; seed++ {
		c := New(Config{MaxRate: 200}, t0)
		d := &driver{c: c, now: t0, lat: 20 * time.Millisecond}
		okRate, _ := failingHost(c, d, rand.New(rand.NewSource(seed)), 90*time.Second, func(r float64) float64 { return max(0, 1-20/r) })
		st := c.Stats()
		share := float64(st.Failures) / float64(len(d.delivered))
		t.Logf("seed %2d: %4.1f successes/s in the last 30 s, rate %4.1f, failures %.1f%% of requests, %d decreases", seed, okRate, st.Rate, 100*share, st.Decreases)
		if okRate < 10 || st.Rate > 25 || share > 0.06 {
			t.Errorf("seed %d: %.1f successes/s, rate %.1f, %.1f%% failures; want at least 10/s, rate ≤ 25, ≤ 6%%", seed, okRate, st.Rate, 100*share)
		}
	}
}

func TestFailureLog(t *testing.T) {
	t.Parallel()
	var f failureLog
	for i := 0; i < 16+recent-1; i++ {
		f.add(i%10 == 0, true)
	}
	if f.known() || f.need() != 0 {
		t.Fatalf("after %d held outcomes: known %v, need %.1f; want unknown, 0", 16+recent-1, f.known(), f.need())
	}
	f.add(false, true)
	if !f.known() || !near(f.base, 0.1, 0.35) {
		t.Fatalf("known %v, base %.3f; want known, about 0.1", f.known(), f.base)
	}
	if n := f.need(); n < 7 || n > 9 {
		t.Errorf("need %.1f at base %.3f, want 16b + 4σ + 1 ≈ 7.4–8.5", n, f.base)
	}
	// Outcomes that are not held teach nothing (once the held ones before them have left the 16).
	for i := 0; i < 16; i++ {
		f.add(true, false)
	}
	base, older := f.base, f.older
	for i := 0; i < 100; i++ {
		f.add(true, false)
	}
	if f.base != base || f.older != older {
		t.Errorf("100 failures not held moved the base from %.3f to %.3f (older %d → %d)", base, f.base, older, f.older)
	}
	// A host failing everything is never explained by its base.
	f = failureLog{base: 0.9, older: memory, fresh: 16, bits: 0xFFFF}
	if !f.signal(false) {
		t.Errorf("16 failures of 16 at base 0.9 are no signal; base counts up to %.2f", failureBaseMax)
	}
	// Only failures after the last decrease count, unless in a refusal run.
	f = failureLog{fresh: 2, bits: 0b111}
	if f.signal(false) || !f.signal(true) {
		t.Errorf("3 failures, 2 of them after the decrease: signal %v (want false), in a run %v (want true)", f.signal(false), f.signal(true))
	}
}

func TestFailuresBeforeADecreaseCountOnce(t *testing.T) {
	t.Parallel()
	// The failures that drew a cut were answered by it: one more failure after it is not a new
	// cluster with two of the old ones.
	c, d := settled(Config{})
	for i := 0; i < 3; i++ {
		d.send(Success)
		d.refuse(Failure)
	}
	if st := c.Stats(); st.Decreases != 1 {
		t.Fatalf("3 failures among the last 8 outcomes: %d decreases, want 1", st.Decreases)
	}
	d.send(Success)
	d.refuse(Failure)
	if st := c.Stats(); st.Decreases != 1 {
		t.Errorf("a failure after the cut with two before it cut again: %d decreases, want 1", st.Decreases)
	}
	d.send(Success)
	d.refuse(Failure)
	d.refuse(Failure)
	if st := c.Stats(); st.Decreases != 2 {
		t.Errorf("3 failures among the 5 outcomes after the cut: %d decreases, want 2", st.Decreases)
	}
}

func TestBackgroundShareSurvivesRestore(t *testing.T) {
	t.Parallel()
	// A resumed crawl keeps what the host taught about its own failures: restored at the rate
	// it had learned, a host failing a tenth of its requests at random is not cut again while
	// the share is relearned. Without the share in State, the restored controller had no rate
	// to learn it under (FailCut) and cut at the first clusters, as a new one does.
	good, tried := 0, 0
	for seed := int64(1); seed <= 12; seed++ {
		c := New(Config{MaxRate: 50}, t0)
		d := &driver{c: c, now: t0, lat: 20 * time.Millisecond}
		rnd := rand.New(rand.NewSource(seed))
		ten := func(float64) float64 { return 0.1 }
		if ok, _ := failingHost(c, d, rnd, 90*time.Second, ten); ok < 36 {
			continue // this seed never learned the share; covered by TestBackgroundFailuresAreNotCongestion
		}
		tried++
		s := c.State()
		if s.FailureSamples < recent || s.FailCut <= 0 || s.FailureShare < 0.05 || s.FailureShare > 0.2 {
			t.Errorf("seed %d: saved share %.3f of %d outcomes, fail cut %.1f; want 0.05–0.2 of ≥ %d, cut > 0", seed, s.FailureShare, s.FailureSamples, s.FailCut, recent)
		}
		start := d.now.Add(time.Hour)
		r := Restore(Config{MaxRate: 50}, s, start)
		rd := &driver{c: r, now: start, lat: 20 * time.Millisecond}
		okRate, _ := failingHost(r, rd, rnd, 15*time.Second, ten)
		t.Logf("seed %2d: restored at %.1f req/s, share %.3f: %4.1f successes/s in the last 5 s, %d decreases", seed, s.Rate, s.FailureShare, okRate, r.Stats().Decreases-s.Decreases)
		if okRate >= 0.8*45 && r.Stats().Decreases-s.Decreases <= 1 {
			good++
		}
	}
	if tried < 10 || good < tried-1 {
		t.Errorf("%d of %d restored seeds held 36 successes/s with at most 1 decrease, want all but one (and ≥ 10 seeds)", good, tried)
	}
}

func TestStateOfLaterVersionIgnored(t *testing.T) {
	t.Parallel()
	// A State written by a later build may mean its fields otherwise: it is not understood, and
	// the host starts fresh rather than obey it.
	c, _ := blockedHost(3 * time.Second)
	s, _ := jsonRoundTrip(t, c.State())
	if r := Restore(Config{}, s, t0); r.Rate() != c.Rate() {
		t.Fatalf("a state of this version restored at %.3f req/s, want the saved %.3f", r.Rate(), c.Rate())
	}
	s.Version = StateVersion + 1
	if st := Restore(Config{}, s, t0).Stats(); st.Rate != DefaultInitialRate || st.Phase != PhaseSlowStart || st.Decreases != 0 {
		t.Errorf("a state of a later version restored to %+v, want a fresh controller", st)
	}
}

func TestGrowthFollowsUse(t *testing.T) {
	t.Parallel()
	// A rate grows only while it limits sending. A host whose requests each went as soon as
	// they were ready (DemandSpare: a broad crawl bound by its workers, not by the host) keeps
	// the rate it used, in slow start and after; one whose rate held ready requests back
	// (DemandHeld) grows exactly as one that says nothing (DemandUnknown).
	for _, slowStart := range []bool{true, false} {
		rates := map[Demand]float64{}
		for _, dm := range []Demand{DemandUnknown, DemandHeld, DemandSpare} {
			c := New(Config{InitialRate: 2, MaxRate: 1000}, t0)
			if !slowStart {
				c.phase, c.curve.plateau, c.curve.from = PhaseProbe, 2, 2
			}
			d := &driver{c: c, now: t0, lat: 20 * time.Millisecond, demand: dm}
			d.run(time.Minute)
			rates[dm] = c.Rate()
		}
		t.Logf("slow start %v: a minute at the allowed rate: %.2f req/s unknown, %.2f held, %.2f spare",
			slowStart, rates[DemandUnknown], rates[DemandHeld], rates[DemandSpare])
		if rates[DemandSpare] != 2 {
			t.Errorf("slow start %v: a host with room to spare went from 2 to %.2f req/s, want 2", slowStart, rates[DemandSpare])
		}
		if rates[DemandHeld] != rates[DemandUnknown] || rates[DemandHeld] <= 2 {
			t.Errorf("slow start %v: a held host reached %.2f req/s, want it to grow as an unknown one (%.2f)", slowStart, rates[DemandHeld], rates[DemandUnknown])
		}
	}
}

func TestRingGrowsToItsCapacity(t *testing.T) {
	t.Parallel()
	// A ring's buffer grows with use; what it holds is always the latest cap elements in order.
	for _, capacity := range []int{1, 5, 8, 20} {
		r := ring[int]{cap: capacity}
		for v := 0; v < 3*capacity+3; v++ {
			r.push(v)
			if want := min(v+1, capacity); r.n != want || len(r.buf) > capacity {
				t.Fatalf("cap %d after %d pushes: n %d, buffer %d", capacity, v+1, r.n, len(r.buf))
			}
			for i := 0; i < r.n; i++ {
				if got, want := *r.back(i), v-i; got != want {
					t.Fatalf("cap %d after %d pushes: back(%d) = %d, want %d", capacity, v+1, i, got, want)
				}
			}
		}
	}
}

// jsonRoundTrip encodes s as JSON and decodes it back, as a store does; size is the encoding's.
func jsonRoundTrip(t *testing.T, s State) (back State, size int) {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	return back, len(b)
}
