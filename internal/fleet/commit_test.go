package fleet

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/redis/go-redis/v9"
)

// completeHook counts the complete scripts sent to Redis (EVALSHA; a NOSCRIPT's EVAL
// fallback is not counted), and holds the first one until release is closed.
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
			if h.calls.Add(1) == 1 {
				<-h.release
			}
		}
		return next(ctx, cmd)
	}
}

// Results completed while one is being committed wait for it and then go to Redis together:
// 16 results, the first held in flight, take two complete scripts, and all are recorded.
func TestFrontierGroupsCompletes(t *testing.T) {
	rdb := newRedis(t)
	hook := &completeHook{release: make(chan struct{})}
	rdb.AddHook(hook)
	s := newStore(t, rdb, "a", &Options{Partitions: 1, LeaseTTL: 5 * time.Second})
	f := NewFrontier(s.NewKeeper(), FrontierOptions{Refresh: 10 * time.Millisecond})
	runFrontier(t, f)
	const n = 16
	if _, err := f.Add(entries("a.example", n)); err != nil {
		t.Fatal(err)
	}
	var ls []frontier.Lease
	for len(ls) < n {
		ls = append(ls, leaseOne(t, f, "a.example"))
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	complete := func(l frontier.Lease) {
		defer wg.Done()
		errs <- f.Complete(l, frontier.Result{Kind: frontier.Fetched, Links: entries("b.example", 2)})
	}
	wg.Add(1)
	go complete(ls[0])
	for hook.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	for _, l := range ls[1:] {
		wg.Add(1)
		go complete(l)
	}
	token := ownershipToken(f)
	for { // the others queue behind the first
		f.commits.mu.Lock()
		queued := len(f.commits.queue[token])
		f.commits.mu.Unlock()
		if queued == n-1 {
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
	if got := hook.calls.Load(); got != 2 {
		t.Errorf("%d complete scripts for %d results, want 2", got, n)
	}
	if st := f.Stats(); st.Refused != 0 {
		t.Errorf("%d results refused (%s)", st.Refused, st.LastRefused)
	}
	if c, _ := s.Counts(context.Background()); c.Fetched != n {
		t.Errorf("counts %+v, want %d fetched", c, n)
	}
}

// ownershipToken is the token of f's one ownership.
func ownershipToken(f *Frontier) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range f.parts {
		return h.o.token
	}
	return ""
}
