package hostlimit

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/crawl-project/crawl/aimd"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeClock is Config.Now and Config.After for tests: time moves only when Advance is called.
// Every After call is reported on armed, so a test knows when Wait has gone to sleep and for
// how long.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []fakeTimer
	armed  chan time.Duration
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock(now time.Time) *fakeClock {
	return &fakeClock{now: now, armed: make(chan time.Duration, 1024)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	if d <= 0 {
		ch <- c.now
	} else {
		c.timers = append(c.timers, fakeTimer{c.now.Add(d), ch})
	}
	c.mu.Unlock()
	c.armed <- d
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if tm.at.After(c.now) {
			kept = append(kept, tm)
			continue
		}
		tm.ch <- c.now
	}
	c.timers = kept
}

// nextArmed returns the duration of the next timer Wait arms, failing the test if none comes.
func (c *fakeClock) nextArmed(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-c.armed:
		return d
	case <-time.After(5 * time.Second): // guard against a hang, not a wait for time to pass
		t.Fatal("Wait never armed a timer")
		return 0
	}
}

// fakeStore is a StateStore in memory that counts calls and can be told to fail.
type fakeStore struct {
	mu      sync.Mutex
	m       map[string][]byte
	loads   map[string]int
	saves   int
	saveErr error
	onSave  func() // called (without locks held) at the start of SaveHostStates
	onLoad  func(host string)
}

func newFakeStore() *fakeStore {
	return &fakeStore{m: make(map[string][]byte), loads: make(map[string]int)}
}

func (s *fakeStore) LoadHostState(host string) ([]byte, bool, error) {
	s.mu.Lock()
	s.loads[host]++
	onLoad := s.onLoad
	b, ok := s.m[host]
	s.mu.Unlock()
	if onLoad != nil {
		onLoad(host)
	}
	return b, ok, nil
}

func (s *fakeStore) SaveHostStates(states map[string][]byte) error {
	s.mu.Lock()
	onSave := s.onSave
	s.mu.Unlock()
	if onSave != nil {
		onSave()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.saves++
	if s.saveErr != nil {
		return s.saveErr
	}
	maps.Copy(s.m, states)
	return nil
}

func (s *fakeStore) get(host string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[host]
	return b, ok
}

var errDisk = errors.New("disk full")

// testAIMD is a controller config with a rate and window that only outcomes move.
func testAIMD(rate float64, window int) aimd.Config {
	return aimd.Config{
		InitialRate: rate, MinRate: 0.01, MaxRate: 1000,
		InitialWindow: window, MaxWindow: 16,
	}
}

// newTestRegistry returns a registry on a fake clock and checks its invariants when the test
// ends: no host has a negative count in flight or more in flight than its window allows after
// all tickets are done.
func newTestRegistry(t *testing.T, cfg Config, store StateStore) (*Registry, *fakeClock) {
	t.Helper()
	clk := newFakeClock(t0)
	if cfg.Now == nil {
		cfg.Now = clk.Now
	}
	if cfg.After == nil {
		cfg.After = clk.After
	}
	r := New(cfg, store)
	t.Cleanup(func() { checkInvariants(t, r) })
	return r, clk
}

func checkInvariants(t *testing.T, r *Registry) {
	t.Helper()
	r.mu.RLock()
	defer r.mu.RUnlock()
	for key, h := range r.hosts {
		h.mu.Lock()
		if h.key != key {
			t.Errorf("host stored under %q has key %q", key, h.key)
		}
		if h.inFlight < 0 {
			t.Errorf("host %s: %d in flight", key, h.inFlight)
		}
		if h.evicted {
			t.Errorf("host %s is in the map but marked evicted", key)
		}
		if want := h.effectiveRateLocked(); h.limit != want || float64(h.lim.Limit()) != want {
			t.Errorf("host %s: bucket paces at %v (recorded %v), controller says %v", key, h.lim.Limit(), h.limit, want)
		}
		h.mu.Unlock()
	}
}

func mustHost(t *testing.T, r *Registry, now time.Time, key string) HostStats {
	t.Helper()
	s, ok := r.Host(now, key)
	if !ok {
		t.Fatalf("host %s not in memory", key)
	}
	return s
}

var neutral = aimd.Outcome{Signal: aimd.Neutral}

// pauseUntil pauses host until until without a request, for tests that need a paused host
// (a request's Done pauses it through its outcome's Pause).
func pauseUntil(r *Registry, host string, until time.Time) {
	now := r.cfg.Now()
	h := r.lockedHost(now, host)
	defer h.mu.Unlock()
	h.lastActive = h.clockLocked(now)
	h.pauseLocked(until)
}

// admitAll takes every admission host gives over [start, end), asking again exactly at each
// readyAt, finishing each ticket at once with o. It returns the admission times.
func admitAll(t *testing.T, r *Registry, host string, start, end time.Time, o aimd.Outcome) []time.Time {
	t.Helper()
	var got []time.Time
	for now := start; now.Before(end); {
		tk, ready := r.TryAdmit(now, host)
		if tk != nil {
			got = append(got, now)
			tk.Done(now, o)
			continue
		}
		if !ready.After(now) {
			t.Fatalf("refused at %v with readyAt %v", now.Sub(t0), ready)
		}
		now = ready
	}
	return got
}

// recv receives from ch, failing the test instead of hanging if nothing comes.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second): // hang guard, not a wait for time to pass
		t.Fatal("nothing received within 5s")
		var zero T
		return zero
	}
}

// watchedCtx reports each call of Done, which Wait makes just before it blocks.
type watchedCtx struct {
	context.Context
	selecting chan struct{}
}

func newWatchedCtx() watchedCtx {
	return watchedCtx{context.Background(), make(chan struct{}, 1)}
}

func (c watchedCtx) Done() <-chan struct{} {
	select {
	case c.selecting <- struct{}{}:
	default:
	}
	return c.Context.Done()
}
