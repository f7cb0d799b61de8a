package crawler

import (
	"context"
	"sync"
	"time"

	"github.com/crawl-project/crawl/hostlimit"
)

// subGates admits the sub-requests of rendered pages to their hosts' gates: per gate, one
// FIFO queue of waiting sub-requests and at most one goroutine (its server) blocked in
// hostlimit.Registry.Wait on the head's behalf, handing each admitted Ticket to the head. So a
// gate has at most two askers, the dispatcher (TryAdmit, for the pages of the frontier) and
// this one waiter, however many tabs wait on it, and the tabs' sub-requests to one host are
// admitted in the order they were asked (docs/render.md "Sub-requests and the gates").
//
// subGates is safe for concurrent use.
type subGates struct {
	wait  func(ctx context.Context, gate string) (*hostlimit.Ticket, error) // Registry.Wait
	freed func(gate string)                                                 // told of a ticket given back unused

	mu     sync.Mutex
	queues map[string]*subQueue // gate -> its waiting sub-requests; a queue is dropped when empty
}

// subQueue is one gate's waiting sub-requests, oldest first. Its server runs while it is not
// empty.
type subQueue struct {
	waiters []*subWaiter
}

// subWaiter is one sub-request waiting for its gate: its context (the page's) and where its
// ticket goes. got is buffered for the one answer it gets.
type subWaiter struct {
	ctx context.Context
	got chan subAdmitted
}

type subAdmitted struct {
	t   *hostlimit.Ticket
	err error
}

func newSubGates(wait func(ctx context.Context, gate string) (*hostlimit.Ticket, error), freed func(gate string)) *subGates {
	return &subGates{wait: wait, freed: freed, queues: map[string]*subQueue{}}
}

// admit waits for gate to admit one request, behind the sub-requests that asked before, and
// returns its Ticket, which the caller must end (Done). It returns ctx.Err() when ctx ends
// first, and the gate's error (hostlimit.PausedError) when the gate refuses to wait.
func (s *subGates) admit(ctx context.Context, gate string) (*hostlimit.Ticket, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := &subWaiter{ctx: ctx, got: make(chan subAdmitted, 1)}
	s.mu.Lock()
	q := s.queues[gate]
	start := q == nil
	if start {
		q = &subQueue{}
		s.queues[gate] = q
	}
	q.waiters = append(q.waiters, w)
	s.mu.Unlock()
	if start {
		go s.serve(gate, q)
	}
	select {
	case a := <-w.got:
		return a.t, a.err
	case <-ctx.Done():
		// The server may be handing this waiter a ticket right now: take it back.
		s.mu.Lock()
		removed := q.remove(w)
		s.mu.Unlock()
		if !removed {
			if a := <-w.got; a.t != nil {
				giveBack(a.t, time.Now())
				s.freed(gate)
			}
		}
		return nil, ctx.Err()
	}
}

// serve admits q's waiters one at a time, oldest first, until q is empty, then drops it. A
// waiter whose context ends while it is the head ends the wait for it; the next one is served.
func (s *subGates) serve(gate string, q *subQueue) {
	for {
		s.mu.Lock()
		if len(q.waiters) == 0 {
			delete(s.queues, gate)
			s.mu.Unlock()
			return
		}
		head := q.waiters[0]
		s.mu.Unlock()
		t, err := s.wait(head.ctx, gate)
		s.mu.Lock()
		if q.remove(head) {
			head.got <- subAdmitted{t: t, err: err}
			s.mu.Unlock()
		} else {
			s.mu.Unlock()
			if t != nil { // head gave up meanwhile; nobody holds the ticket
				giveBack(t, time.Now())
				s.freed(gate)
			}
		}
	}
}

// remove takes w out of q, reporting whether it was there. remove requires subGates.mu to be
// held.
func (q *subQueue) remove(w *subWaiter) bool {
	for i, x := range q.waiters {
		if x == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			return true
		}
	}
	return false
}

// waiting returns how many sub-requests wait on gate.
func (s *subGates) waiting(gate string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.queues[gate]; q != nil {
		return len(q.waiters)
	}
	return 0
}
