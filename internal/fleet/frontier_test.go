package fleet

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/redis/go-redis/v9"
)

// runFrontier starts f.Run for the test and stops it (and checks it returned) at cleanup.
func runFrontier(t *testing.T, f *Frontier) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Frontier.Run did not return after its context was cancelled")
		}
	})
}

// crawlLoop does what the crawl loop does with each of fs until all are idle or the deadline:
// takes ready hosts, leases their URLs and completes each (Fetched, with links from links). It
// returns the URLs completed.
func crawlLoop(t *testing.T, fs []*Frontier, links func(url string) []frontier.Entry, deadline time.Duration) []string {
	t.Helper()
	var done []string
	ready := make([]map[string]bool, len(fs))
	for i := range ready {
		ready[i] = map[string]bool{}
	}
	idle := func() bool {
		for _, f := range fs {
			if !f.Idle() {
				return false
			}
		}
		return true
	}
	for end := time.Now().Add(deadline); !idle(); {
		if time.Now().After(end) {
			t.Fatalf("not idle after %v: %+v", deadline, fs[0].Counts())
		}
		now := time.Now()
		for i, f := range fs {
			for _, h := range f.TakeReady(now) {
				ready[i][h] = true
			}
			for h := range ready[i] {
				l, ok, err := f.Lease(now, h)
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					if !f.Ready(h) {
						delete(ready[i], h)
					}
					continue
				}
				if err := f.Complete(l, frontier.Result{Kind: frontier.Fetched, Links: links(l.URL)}); err != nil {
					t.Fatal(err)
				}
				done = append(done, l.URL)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return done
}

// leaseOne waits until f leases a URL of host (leaving TakeReady's news to crawlLoop).
func leaseOne(t *testing.T, f *Frontier, host string) frontier.Lease {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		l, ok, err := f.Lease(time.Now(), host)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return l
		}
	}
	t.Fatalf("no lease of %s", host)
	return frontier.Lease{}
}

// One worker crawls a small link graph through Frontier: each URL once, links forwarded
// between partitions, and Idle once nothing is queued anywhere.
func TestFrontierCrawlsToTheEnd(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	s := newStore(t, rdb, "a", &Options{Partitions: 16, LeaseTTL: 2 * time.Second})
	f := NewFrontier(s.NewKeeper(), FrontierOptions{Refresh: 10 * time.Millisecond})
	runFrontier(t, f)
	hosts := []string{"h0", "h1", "h2", "h3", "h4"}
	if _, err := f.Add([]frontier.Entry{{URL: "http://h0/0", Host: "h0"}}); err != nil {
		t.Fatal(err)
	}
	// page i of host k links to page i+1 of host k and page i of host k+1: 5 hosts × 6 pages
	links := gridLinks(hosts, 6)
	done := crawlLoop(t, []*Frontier{f}, links, 30*time.Second)
	seen := map[string]int{}
	for _, u := range done {
		seen[u]++
	}
	if len(done) != 30 || len(seen) != 30 {
		t.Errorf("completed %d URLs, %d distinct; want 30 once each", len(done), len(seen))
	}
	if c := f.Counts(); c.Fetched != 30 || c.Queued != 0 {
		t.Errorf("counts %+v; want 30 fetched, nothing queued", c)
	}
	if st := f.Stats(); st.Refused != 0 {
		t.Errorf("%d results refused with one worker", st.Refused)
	}
}

// waitOwned waits until f uses n partitions.
func waitOwned(t *testing.T, f *Frontier, n int) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		f.mu.Lock()
		got := 0
		for _, h := range f.parts.inUse {
			if h.use == partActive {
				got++
			}
		}
		f.mu.Unlock()
		if got == n {
			return
		}
	}
	t.Fatalf("frontier never used %d partitions", n)
}

// A worker whose partition another worker took over (its lease lapsed) has its result refused
// by fencing: Complete returns nil, counts it, and the URL is the new owner's.
func TestFrontierRefusesAfterTakeover(t *testing.T) {
	rdb := newRedis(t)
	opts := &Options{Partitions: 1, LeaseTTL: 300 * time.Millisecond}
	s := newStore(t, rdb, "a", opts)
	f := NewFrontier(s.NewKeeper(), FrontierOptions{Refresh: 10 * time.Millisecond})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Run(ctx) }()
	if _, err := f.Add(entries("h", 2)); err != nil {
		t.Fatal(err)
	}
	waitOwned(t, f, 1)
	l := leaseOne(t, f, "h")
	// The worker stops (as if SIGSTOPped): Run no longer renews; b takes the partition over.
	stop()
	<-done
	b := newStore(t, rdb, "b", opts)
	waitLeaseEnded(t, s)
	if f.HostContext(context.Background(), "h").Err() == nil {
		t.Error("HostContext of a host whose partition lapsed is not cancelled")
	}
	ob := mustAcquire(t, b, 0)
	if n, err := b.Reclaim(context.Background(), ob); err != nil || n != 1 {
		t.Fatalf("reclaim: %d, %v; want the 1 URL in flight", n, err)
	}
	if err := f.Complete(l, frontier.Result{Kind: frontier.Fetched}); err != nil {
		t.Fatalf("Complete after takeover: %v; want nil (refused)", err)
	}
	if st := f.Stats(); st.Refused != 1 {
		t.Errorf("refused %d results, want 1 (%s)", st.Refused, st.LastRefused)
	}
	if _, ok, err := f.Lease(time.Now(), "h"); ok || err != nil {
		t.Errorf("lease on a lapsed partition: ok %v, err %v; want none", ok, err)
	}
	if c, err := b.Counts(context.Background()); err != nil || c.Fetched != 0 || c.Queued != 2 {
		t.Errorf("counts %+v (%v); want the refused URL still queued, nothing fetched", c, err)
	}
}

// When a second worker joins, the first drains its surplus partitions: the URLs it has in
// flight there complete (not refused), then it releases them and the newcomer takes them.
func TestFrontierDrainsSurplus(t *testing.T) {
	rdb := newRedis(t)
	opts := &Options{Partitions: 2, LeaseTTL: 600 * time.Millisecond}
	a := NewFrontier(newStore(t, rdb, "a", opts).NewKeeper(), FrontierOptions{Refresh: 10 * time.Millisecond})
	runFrontier(t, a)
	var host []string // one host of each partition
	for i := 0; len(host) < 2; i++ {
		h := fmt.Sprintf("h%d", i)
		if PartitionOf(h, 2) == len(host) {
			host = append(host, h)
			if _, err := a.Add(entries(h, 3)); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitOwned(t, a, 2)
	// a's checkpoint before the handover saves a state for each host, as the crawler's
	// registry does; only the partition a still holds may take it.
	states := a.k.HostStates(time.Second)
	var saves atomic.Int32
	a.Join(nil, func() error {
		saves.Add(1)
		return states.SaveHostStates(map[string][]byte{host[0]: []byte("state 0"), host[1]: []byte("state 1")})
	})
	leases := []frontier.Lease{leaseOne(t, a, host[0]), leaseOne(t, a, host[1])}
	b := NewFrontier(newStore(t, rdb, "b", opts).NewKeeper(), FrontierOptions{Refresh: 10 * time.Millisecond})
	runFrontier(t, b)
	// a sees b's heartbeat and drains one partition; its leases there are still good
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		a.mu.Lock()
		draining := 0
		for _, h := range a.parts.inUse {
			if h.use == partDraining {
				draining++
			}
		}
		a.mu.Unlock()
		if draining == 1 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("a never drained a partition")
		}
	}
	for _, l := range leases {
		if err := a.Complete(l, frontier.Result{Kind: frontier.Fetched}); err != nil {
			t.Fatal(err)
		}
	}
	if st := a.Stats(); st.Refused != 0 {
		t.Errorf("a's results refused during the drain: %d (%s)", st.Refused, st.LastRefused)
	}
	waitOwned(t, a, 1)
	waitOwned(t, b, 1)
	if n := saves.Load(); n != 1 {
		t.Errorf("a checkpointed %d times before its one handover, want 1", n)
	}
	for i, h := range host {
		b, ok, err := states.LoadHostState(h)
		if err != nil || !ok || string(b) != fmt.Sprintf("state %d", i) {
			t.Errorf("%s: state %q, %v, %v after the handover; want the checkpoint's, saved while a held it", h, b, ok, err)
		}
	}
	rest := crawlLoop(t, []*Frontier{a, b}, func(string) []frontier.Entry { return nil }, 30*time.Second)
	if len(rest) != 4 {
		t.Errorf("%d URLs completed after the drain, want the 4 left", len(rest))
	}
	if st := a.Stats(); st.Refused != 0 {
		t.Errorf("a's results refused: %d (%s)", st.Refused, st.LastRefused)
	}
	if c := a.Counts(); c.Fetched != 6 || c.Queued != 0 {
		t.Errorf("counts %+v; want 6 fetched once each", c)
	}
}

// A URL completed as Retry waits for its time, on Redis' clock: its host is not ready before,
// TakeReady names it again after, and the lease then counts the attempt.
func TestFrontierRetryWaits(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	s := newStore(t, rdb, "a", &Options{Partitions: 4, LeaseTTL: 2 * time.Second})
	f := NewFrontier(s.NewKeeper(), FrontierOptions{Refresh: 10 * time.Millisecond})
	runFrontier(t, f)
	if _, err := f.Add(entries("h", 1)); err != nil {
		t.Fatal(err)
	}
	waitOwned(t, f, 4)
	l := leaseOne(t, f, "h")
	f.TakeReady(time.Now()) // the news of h so far
	const wait = 400 * time.Millisecond
	if err := f.Complete(l, frontier.Result{Kind: frontier.Retry, NotBefore: time.Now().Add(wait)}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, ok, err := f.Lease(time.Now(), "h"); ok || err != nil {
		t.Fatalf("leased a URL waiting for its retry: ok %v, err %v", ok, err)
	}
	if f.Ready("h") {
		t.Error("host ready while its only URL waits")
	}
	for {
		now := time.Now()
		if slices.Contains(f.TakeReady(now), "h") {
			if now.Sub(start) < wait-100*time.Millisecond {
				t.Errorf("host ready again after %v, before its retry time (%v)", now.Sub(start), wait)
			}
			break
		}
		if now.Sub(start) > 10*time.Second {
			t.Fatal("host never ready again")
		}
		time.Sleep(5 * time.Millisecond)
	}
	l2 := leaseOne(t, f, "h")
	if l2.URL != l.URL || l2.Attempts != 1 {
		t.Errorf("lease after the retry: %s attempts %d; want %s attempts 1", l2.URL, l2.Attempts, l.URL)
	}
}

// A host whose only URL waits for a distant retry is ready again as soon as a new URL of it
// is queued: the retry does not hold the host's other URLs back.
func TestFrontierNewURLOvertakesRetry(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	s := newStore(t, rdb, "a", &Options{Partitions: 4, LeaseTTL: 2 * time.Second})
	f := NewFrontier(s.NewKeeper(), FrontierOptions{Refresh: 10 * time.Millisecond})
	runFrontier(t, f)
	if _, err := f.Add(entries("h", 1)); err != nil {
		t.Fatal(err)
	}
	waitOwned(t, f, 4)
	l := leaseOne(t, f, "h")
	if err := f.Complete(l, frontier.Result{Kind: frontier.Retry, NotBefore: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := f.Lease(time.Now(), "h"); ok || err != nil {
		t.Fatalf("leased a URL waiting an hour for its retry: ok %v, err %v", ok, err)
	}
	f.TakeReady(time.Now())
	if _, err := f.Add([]frontier.Entry{{URL: "http://h/new", Host: "h", Depth: 1}}); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); !slices.Contains(f.TakeReady(time.Now()), "h"); time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatal("a host waiting for a retry is not ready when a new URL of it is queued")
		}
	}
	if l := leaseOne(t, f, "h"); l.URL != "http://h/new" {
		t.Errorf("leased %s, want the new URL", l.URL)
	}
}

// The last report a worker's Run makes holds every page it completed, however the stop
// falls: while Run waits between rounds or in the middle of one.
func TestFrontierLastReportHoldsEveryPage(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	for i := range 20 {
		crawl := fmt.Sprintf("last%d", i)
		s, err := Open(context.Background(), rdb, crawl, "w", &Options{Partitions: 1, LeaseTTL: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		f := NewFrontier(s.NewKeeper(), FrontierOptions{Refresh: time.Millisecond})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); f.Run(ctx) }()
		host := "h" + crawl
		if _, err := f.Add(entries(host, 1)); err != nil {
			t.Fatal(err)
		}
		l := leaseOne(t, f, host)
		if err := f.Complete(l, frontier.Result{Kind: frontier.Fetched}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(i%5) * time.Millisecond) // the stop lands at various points of a round
		cancel()
		<-done
		v, err := ReadView(context.Background(), rdb, crawl)
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Workers) != 1 || v.Workers[0].Pages != 1 {
			t.Fatalf("stop %d: the workers' last reports %+v; want one of 1 page", i, v.Workers)
		}
	}
}

// A host leased before a round listed it is still named by TakeReady, so a caller that learns
// its hosts from TakeReady comes back for the rest of its URLs.
func TestFrontierLeaseBeforeListingIsAnnounced(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	s := newStore(t, rdb, "a", &Options{Partitions: 1, LeaseTTL: 2 * time.Second})
	f := NewFrontier(s.NewKeeper(), FrontierOptions{Refresh: time.Hour}) // one round, then none
	runFrontier(t, f)
	waitOwned(t, f, 1)
	if _, err := f.Add(entries("h", 2)); err != nil {
		t.Fatal(err)
	}
	l := leaseOne(t, f, "h")
	if err := f.Complete(l, frontier.Result{Kind: frontier.Fetched}); err != nil {
		t.Fatal(err)
	}
	if got := f.TakeReady(time.Now()); !slices.Contains(got, "h") {
		t.Errorf("TakeReady = %q after a lease of h; want h named (it has another URL)", got)
	}
	l = leaseOne(t, f, "h")
	if err := f.Complete(l, frontier.Result{Kind: frontier.Fetched}); err != nil {
		t.Fatal(err)
	}
}

// failFirstCounts fails the first read of partition counters (a pipeline of HGETALLs), as a
// timeout on a loaded machine does.
type failFirstCounts struct{ failed atomic.Bool }

func (h *failFirstCounts) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *failFirstCounts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}
func (h *failFirstCounts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && cmds[0].Name() == "hgetall" && h.failed.CompareAndSwap(false, true) {
			return context.DeadlineExceeded
		}
		return next(ctx, cmds)
	}
}

// A worker joining a crawl asks its counts before anything was read: a failed first read is
// retried, not answered with zeros (which the crawler reads as "nothing to resume").
func TestFrontierFirstCountsRetried(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	s := newStore(t, rdb, "a", &Options{Partitions: 4})
	mustAcquire(t, s, PartitionOf("a.example", 4))
	if _, err := s.Add(context.Background(), entries("a.example", 3)); err != nil {
		t.Fatal(err)
	}
	hook := &failFirstCounts{}
	rdb.AddHook(hook)
	f := NewFrontier(s.NewKeeper(), FrontierOptions{})
	if c := f.Counts(); c.Queued != 3 {
		t.Errorf("counts %+v, want 3 queued", c)
	}
	if !hook.failed.Load() {
		t.Error("the first read did not fail: the test tested nothing")
	}
}

// holdHook holds each SMEMBERS (the active set, which every read of the counts begins with)
// while hold is set, until release is closed; reading reports each one held.
type holdHook struct {
	hold    atomic.Bool
	reading chan struct{}
	release chan struct{}
}

func (h *holdHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *holdHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *holdHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "smembers" && h.hold.Load() {
			h.reading <- struct{}{}
			<-h.release
		}
		return next(ctx, cmd)
	}
}

// Counts read before an Add do not say the crawl is idle while the read that follows the Add
// is in flight: until that read is in, the worker's own write may be missing from them.
func TestFrontierNotIdleWhileCountsAreRead(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	hook := &holdHook{reading: make(chan struct{}), release: make(chan struct{})}
	rdb.AddHook(hook)
	s := newStore(t, rdb, "a", &Options{Partitions: 4})
	f := NewFrontier(s.NewKeeper(), FrontierOptions{})
	ctx := context.Background()
	if err := f.readCounts(ctx); err != nil {
		t.Fatal(err)
	}
	if !f.Idle() {
		t.Fatal("an empty crawl is not idle")
	}
	if _, err := f.Add([]frontier.Entry{{URL: "http://h0/0", Host: "h0"}}); err != nil {
		t.Fatal(err)
	}
	if f.Idle() {
		t.Fatal("idle right after an Add")
	}
	hook.hold.Store(true)
	read := make(chan error, 1)
	go func() { read <- f.readCounts(ctx) }()
	<-hook.reading
	if f.Idle() {
		t.Error("idle while the counts after the Add are being read, from the counts before it")
	}
	hook.hold.Store(false)
	close(hook.release)
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	if f.Idle() {
		t.Errorf("idle with a URL queued: %+v", f.Counts())
	}
}

// A partition whose lease may have run out is dropped when it does, its hosts' requests
// cancelled and Holds false, even while Run's round waits on a Redis that stopped answering
// (held up for the call's Timeout).
func TestFrontierDropsALapsedPartitionOnTime(t *testing.T) {
	rdb, srv := newRedisServer(t)
	opts := &Options{Partitions: 1, LeaseTTL: 300 * time.Millisecond}
	s := newStore(t, rdb, "a", opts)
	const timeout = 10 * time.Second
	f := NewFrontier(s.NewKeeper(), FrontierOptions{Refresh: 10 * time.Millisecond, Timeout: timeout})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Run(ctx) }()
	defer func() { stop(); <-done }()
	if _, err := f.Add(entries("h", 1)); err != nil {
		t.Fatal(err)
	}
	waitOwned(t, f, 1)
	hctx := f.HostContext(context.Background(), "h")
	if !f.Holds("h", time.Now()) || hctx.Err() != nil {
		t.Fatal("a host of the partition in use is not held")
	}
	stopped := time.Now()
	if err := syscall.Kill(srv.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(srv.PID(), syscall.SIGCONT)
	select {
	case <-hctx.Done():
	case <-time.After(timeout / 2):
		t.Fatalf("the host's requests were not cancelled %v after Redis stopped answering (lease TTL %v)", timeout/2, opts.LeaseTTL)
	}
	t.Logf("cancelled %v after Redis stopped answering (lease TTL %v)", time.Since(stopped).Round(time.Millisecond), opts.LeaseTTL)
	if f.Holds("h", time.Now()) {
		t.Error("Holds is true for a host whose partition was dropped")
	}
}

// gridLinks gives the links of a web of len(hosts) hosts × pages pages, URLs http://hK/I:
// page I of host K links to page I+1 of host K and to page I of host K+1.
func gridLinks(hosts []string, pages int) func(u string) []frontier.Entry {
	return func(u string) []frontier.Entry {
		var k, i int
		fmt.Sscanf(u, "http://h%d/%d", &k, &i)
		var out []frontier.Entry
		if i+1 < pages {
			out = append(out, frontier.Entry{URL: fmt.Sprintf("http://h%d/%d", k, i+1), Host: hosts[k], Depth: 1})
		}
		if k+1 < len(hosts) {
			out = append(out, frontier.Entry{URL: fmt.Sprintf("http://h%d/%d", k+1, i), Host: hosts[k+1], Depth: 1})
		}
		return out
	}
}
