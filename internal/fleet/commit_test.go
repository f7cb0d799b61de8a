package fleet

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/redis/go-redis/v9"
)

// completeHook counts the complete scripts sent to Redis (EVALSHA; a NOSCRIPT's EVAL
// fallback is not counted), and holds each until release is closed.
type completeHook struct {
	calls   atomic.Int32
	release chan struct{}
}

func (h *completeHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *completeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *completeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) > 1 && cmd.Name() == "evalsha" && args[1] == completeScript.Hash() {
			h.calls.Add(1)
			<-h.release
		}
		return next(ctx, cmd)
	}
}

// Results completed while one is being committed wait for it and then go to Redis together,
// one script per partition: 16 results of two partitions (whose ownerships have the same
// epoch), the first of each held in flight, take four complete scripts, and all are recorded.
func TestFrontierGroupsCompletes(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	hook := &completeHook{release: make(chan struct{})}
	rdb.AddHook(hook)
	s := newStore(t, rdb, "a", &Options{Partitions: 2, LeaseTTL: 5 * time.Second})
	f := NewFrontier(s.NewKeeper(), FrontierOptions{Refresh: 10 * time.Millisecond})
	runFrontier(t, f)
	var hosts []string // one of each partition
	for i := 0; len(hosts) < 2; i++ {
		if h := fmt.Sprintf("h%d.example", i); PartitionOf(h, 2) == len(hosts) {
			hosts = append(hosts, h)
		}
	}
	const n = 16
	var ls []frontier.Lease
	for _, h := range hosts {
		if _, err := f.Add(entries(h, n/2)); err != nil {
			t.Fatal(err)
		}
		for range n / 2 {
			ls = append(ls, leaseOne(t, f, h))
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	complete := func(l frontier.Lease) {
		defer wg.Done()
		errs <- f.Complete(l, frontier.Result{Kind: frontier.Fetched, Links: entries("b.example", 2)})
	}
	wg.Add(2)
	go complete(ls[0])
	go complete(ls[n/2])
	for hook.calls.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	for i, l := range ls {
		if i != 0 && i != n/2 {
			wg.Add(1)
			go complete(l)
		}
	}
	for { // the others queue behind the first
		f.commits.mu.Lock()
		queued := 0
		for _, q := range f.commits.queue {
			queued += len(q)
		}
		f.commits.mu.Unlock()
		if queued == n-2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(hook.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := hook.calls.Load(); got != 4 {
		t.Errorf("%d complete scripts for %d results of 2 partitions, want 4", got, n)
	}
	if st := f.Stats(); st.Refused != 0 {
		t.Errorf("%d results refused (%s)", st.Refused, st.LastRefused)
	}
	if c, _ := s.Counts(context.Background()); c.Fetched != n {
		t.Errorf("counts %+v, want %d fetched", c, n)
	}
}

// A result waits for the results of the other URLs of its partition being fetched, up to
// CommitLinger: eight results completed together go to Redis in one script; a result whose
// partition's other lease never completes goes alone once the linger has passed.
func TestFrontierCommitLingers(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	hook := &completeHook{release: make(chan struct{})}
	close(hook.release)
	rdb.AddHook(hook)
	s := newStore(t, rdb, "a", &Options{Partitions: 1, LeaseTTL: 5 * time.Second})
	f := NewFrontier(s.NewKeeper(), FrontierOptions{Refresh: 10 * time.Millisecond, CommitLinger: time.Minute})
	runFrontier(t, f)
	const n = 8
	if _, err := f.Add(entries("a.example", n+2)); err != nil {
		t.Fatal(err)
	}
	var ls []frontier.Lease
	for range n {
		ls = append(ls, leaseOne(t, f, "a.example"))
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- f.Complete(l, frontier.Result{Kind: frontier.Fetched, Links: entries("b.example", 2)})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := hook.calls.Load(); got != 1 {
		t.Errorf("%d complete scripts for %d results completed together, want 1", got, n)
	}

	f.opts.CommitLinger = 100 * time.Millisecond
	a, b := leaseOne(t, f, "a.example"), leaseOne(t, f, "a.example")
	start := time.Now()
	if err := f.Complete(a, frontier.Result{Kind: frontier.Fetched}); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 100*time.Millisecond || waited > 30*time.Second {
		t.Errorf("a result whose partition's other lease is still out waited %v, want the linger (100ms)", waited)
	}
	if err := f.Complete(b, frontier.Result{Kind: frontier.Fetched}); err != nil {
		t.Fatal(err)
	}
	if got := hook.calls.Load(); got != 3 {
		t.Errorf("%d complete scripts in all, want 3", got)
	}
}
