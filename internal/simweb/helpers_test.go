package simweb

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock returns t on every read, then moves it on by step (0: frozen).
type fakeClock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func newFakeClock(t time.Time, step time.Duration) *fakeClock { return &fakeClock{t: t, step: step} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.t
	c.t = c.t.Add(c.step)
	return now
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// t0 is a fake-clock start 300 ms past a whole second, so rounding to whole seconds shows.
var t0 = time.Date(2025, 1, 1, 12, 0, 0, 300e6, time.UTC)

// startWeb starts specs and closes the Web (and the returned client's connections) at cleanup.
func startWeb(t *testing.T, specs []HostSpec, opts *Options) (*Web, *http.Client) {
	t.Helper()
	w, err := Start(specs, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		w.Close()
	})
	return w, c
}

type reply struct {
	status int
	header http.Header
	body   string
}

func get(t *testing.T, c *http.Client, url string) reply {
	t.Helper()
	return getWith(t, c, url, nil)
}
