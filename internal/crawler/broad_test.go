package crawler

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/simweb"
)

// budgetWatch is an Observer that counts retries and empty-budget deferrals.
type budgetWatch struct {
	mu        sync.Mutex
	retries   map[string]int // by reason
	exhausted map[string]int // by scope ("host", "global")
}

func (w *budgetWatch) Request(RequestEvent) {}
func (w *budgetWatch) Retry(host, reason string) {
	w.mu.Lock()
	w.retries[reason]++
	w.mu.Unlock()
}
func (w *budgetWatch) BudgetExhausted(host, scope string) {
	w.mu.Lock()
	w.exhausted[scope]++
	w.mu.Unlock()
}
func (w *budgetWatch) LimiterWait(string, time.Duration) {}
func (w *budgetWatch) Tick(Tick)                         {}

// lockedBuffer is an io.Writer safe for the crawl's concurrent log writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestBroadRefuseOnceDrawsNoRetryBudget is "a broad simulated web where every host
// refuses once": 300 hosts (one loopback listener, names from an in-process DNS server), every
// one of them seeded, each answering its first page request 429 + "Retry-After: 1" and serving
// normally after that. A retry the host asked for with Retry-After is paid for by the host's
// pause and draws on no retry budget, so none of the 300 retries is deferred by an empty budget
// (the crawl's global budget holds 100 tokens, 20 retries at 5 each, and would be empty after
// the first 20 refusals, deferring each later retry by the retry cap of 60 s, with nothing else
// to do meanwhile). The crawl completes every page and every host is refused exactly once, as
// the servers count.
//
// Nothing here is timed. DeferAfter is lowered to 10 s (ten times the hosts' 1 s Retry-After)
// only so that a crawl whose retries were deferred by the 60 s cap stops "deferred" at once
// instead of running for a minute: that crawl fails the test either way.
func TestBroadRefuseOnceDrawsNoRetryBudget(t *testing.T) {
	t.Parallel()
	const hosts, pages = 300, 3
	specs := simweb.Broad(hosts, pages, 0, 21)
	for i := range specs {
		specs[i].RefuseFirst = true // 429 + Retry-After: 1 (Broad's Reply429Seconds), once
	}
	web, dns := startBroadWeb(t, specs, 21)

	cfg := testConfig(t, web) // every host's root is a seed: all hosts are met at once
	cfg.DNSServer = dns.Addr()
	cfg.AllowPrivate = true
	cfg.DeferAfter = 10 * time.Second
	logs := &lockedBuffer{}
	cfg.Log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	watch := &budgetWatch{retries: map[string]int{}, exhausted: map[string]int{}}
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.SetObserver(watch)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute) // a safety net, not a bound
	defer cancel()
	sum, err := c.Run(ctx)
	if cerr := c.Close(); cerr != nil {
		t.Errorf("Close: %v", cerr)
	}
	if err != nil {
		t.Fatalf("Run: %v", err)
	}

	// The crawl completes every page, each fetched once.
	if sum.StopReason != "done" || sum.Queued != 0 || sum.InFlight != 0 {
		t.Errorf("stop %q with %d queued, %d in flight; want done, 0, 0", sum.StopReason, sum.Queued, sum.InFlight)
	}
	checkComplete(t, web, cfg.Dir, 0)

	// Every host was refused exactly once, its first page request.
	refused, inWindow := 0, 0
	for name, s := range web.Stats() {
		if s.OverLimit != 1 {
			t.Errorf("host %s: refused %d times, want 1", name, s.OverLimit)
		}
		refused += s.OverLimit
		inWindow += s.InRetryAfter
	}

	// Seconds in which no request reached any host, logged only: a noisy machine may have some.
	_, perSecond := web.Arrivals()
	idle := 0
	for _, n := range perSecond {
		if n == 0 {
			idle++
		}
	}
	t.Logf("requests reached the web in %d seconds, %d of them idle (informative, not asserted)", len(perSecond), idle)

	// No retry was deferred by an empty retry budget, by any count the crawl keeps.
	watch.mu.Lock()
	exhausted, retries := watch.exhausted["host"]+watch.exhausted["global"], watch.retries["status-429"]
	t.Logf("%d hosts refused %d times (%d requests inside a Retry-After window); retries by reason %v; "+
		"budget exhaustions by scope %v; elapsed %v", hosts, refused, inWindow, watch.retries, watch.exhausted, sum.Elapsed)
	watch.mu.Unlock()
	if exhausted != 0 {
		t.Errorf("Observer saw %d retries deferred by an empty retry budget, want 0", exhausted)
	}
	if retries != hosts {
		t.Errorf("Observer saw %d status-429 retries, want %d (one per host)", retries, hosts)
	}
	if sum.Run == nil {
		t.Fatal("summary has no run counters")
	}
	if sum.Run.BudgetExhausted != 0 {
		t.Errorf("Status.Run.BudgetExhausted = %d, want 0", sum.Run.BudgetExhausted)
	}
	if sum.Run.OverLimit != hosts {
		t.Errorf("Status.Run.OverLimit = %d, want %d", sum.Run.OverLimit, hosts)
	}
	// The deferral's reason ("… (retry budget empty: deferred)") goes to the frontier with the
	// retry and is not stored; it must not show in anything the crawl writes either.
	status, err := os.ReadFile(filepath.Join(cfg.Dir, "status.json"))
	if err != nil {
		t.Fatal(err)
	}
	for what, text := range map[string]string{"status.json": string(status), "the log": logs.String()} {
		if strings.Contains(text, "retry budget empty") {
			t.Errorf("%s mentions an empty retry budget", what)
		}
	}
}
