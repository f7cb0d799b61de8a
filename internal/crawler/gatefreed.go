package crawler

import "sync"

// freedGates tells the dispatcher that requests made outside its jobs (the sub-requests of
// rendered pages) ended on some gates: the hosts the schedule holds until a job of such a gate
// ends (a full window: schedule.waitFor) are asked again, as when one of its own jobs ends.
// Without it a host whose window sub-requests filled would wait for a job that never comes.
// Safe for concurrent use; the zero value holds nothing and signals nothing until made.
type freedGates struct {
	mu     sync.Mutex
	gates  map[string]bool
	signal chan struct{} // capacity 1: gates holds something; nil until made
}

func (f *freedGates) make() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.signal == nil {
		f.gates, f.signal = map[string]bool{}, make(chan struct{}, 1)
	}
}

// add notes that a request on gate ended.
func (f *freedGates) add(gate string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.signal == nil {
		return
	}
	f.gates[gate] = true
	select {
	case f.signal <- struct{}{}:
	default:
	}
}

// poke wakes the dispatcher without a gate: links were queued outside its jobs' commits (a
// rendered page's early links).
func (f *freedGates) poke() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.signal == nil {
		return
	}
	select {
	case f.signal <- struct{}{}:
	default:
	}
}

// take returns the gates noted since the last take.
func (f *freedGates) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.gates) == 0 {
		return nil
	}
	out := make([]string, 0, len(f.gates))
	for g := range f.gates {
		out = append(out, g)
		delete(f.gates, g)
	}
	return out
}

// wakeFreed asks again the hosts waiting for a job of a gate on which a sub-request ended. It
// runs on the dispatcher's goroutine.
func (c *Crawler) wakeFreed() {
	if c.renders.freed.signal == nil { // no page is rendered: nothing to take
		return
	}
	for _, g := range c.renders.freed.take() {
		c.sched.ended(g)
	}
}
