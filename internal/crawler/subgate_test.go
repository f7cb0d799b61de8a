package crawler

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/crawl-project/crawl/hostlimit"
)

// fakeGate stands for Registry.Wait: each wait blocks until the test releases one admission,
// and the most waits ever in flight at once is kept.
type fakeGate struct {
	release  chan struct{}
	inWait   atomic.Int32
	maxWait  atomic.Int32
	mu       sync.Mutex
	admitted []context.Context
}

func (f *fakeGate) wait(ctx context.Context, gate string) (*hostlimit.Ticket, error) {
	n := f.inWait.Add(1)
	defer f.inWait.Add(-1)
	for m := f.maxWait.Load(); n > m && !f.maxWait.CompareAndSwap(m, n); m = f.maxWait.Load() {
	}
	select {
	case <-f.release:
		f.mu.Lock()
		f.admitted = append(f.admitted, ctx)
		f.mu.Unlock()
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// queueUp starts admit for ctx and returns once it waits in the gate's queue, n waiting in all.
func queueUp(s *subGates, ctx context.Context, n int, done chan<- context.Context) {
	go func() {
		s.admit(ctx, "api")
		done <- ctx
	}()
	for s.waiting("api") < n {
		runtime.Gosched()
	}
}

// TestSubGatesFIFO: sub-requests waiting on one gate are admitted in the order they asked, by
// one waiter in the gate at a time; one that gives up while queued is skipped.
func TestSubGatesFIFO(t *testing.T) {
	f := &fakeGate{release: make(chan struct{})}
	s := newSubGates(f.wait, func(string) {})
	done := make(chan context.Context, 4)
	ctxs := make([]context.Context, 4)
	cancels := make([]context.CancelFunc, 4)
	for i := range ctxs {
		ctxs[i], cancels[i] = context.WithCancel(context.Background())
		defer cancels[i]()
		queueUp(s, ctxs[i], i+1, done)
	}
	cancels[2]() // the third gives up while queued
	if got := <-done; got != ctxs[2] {
		t.Fatalf("the cancelled waiter did not return first")
	}
	for range 3 {
		f.release <- struct{}{}
		<-done
	}
	want := []context.Context{ctxs[0], ctxs[1], ctxs[3]}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, c := range f.admitted {
		if c != want[i] {
			t.Errorf("admission %d went to waiter %v, want FIFO order", i, c)
		}
	}
	if m := f.maxWait.Load(); m != 1 {
		t.Errorf("%d waits in the gate at once, want 1", m)
	}
	if n := s.waiting("api"); n != 0 {
		t.Errorf("%d still waiting", n)
	}
}
