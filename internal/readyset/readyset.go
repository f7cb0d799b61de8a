// Package readyset is the readiness bookkeeping both frontiers (package frontier's bbolt one
// and internal/fleet's shared one) keep for the crawl loop's TakeReady, Ready and NextAt:
// which hosts have work ready, which became ready since the loop last took them, and which
// wait until a time. It takes the time as an argument and never blocks.
package readyset

import (
	"container/heap"
	"iter"
	"time"
)

// State is what a Set knows of a host.
type State uint8

const (
	Unknown State = iota // not in the set
	Ready                // may have work ready now
	Waiting              // nothing ready before a time (Wait)
	Idle                 // known, with nothing ready (drained); only Ready or Wait bring it back
)

// Set is the readiness of a frontier's hosts. A host comes out of Take once each time it
// becomes ready (Ready from another state, or a Wait whose time came), in the order it did, so
// a caller that takes hosts this way keeps its own list of those that stay ready (State tells)
// and never scans every ready host. Set is not safe for concurrent use: its owner's lock
// guards it. The zero value is an empty Set.
type Set struct {
	hosts   map[string]entry
	fresh   []string // hosts that became ready since the last Take, in order
	waiting waitHeap // waiting hosts, earliest first; entries of hosts since changed are stale
	gen     uint64   // stamps each Wait, so that a stale heap entry is told from the live one
}

type entry struct {
	state State
	gen   uint64 // Waiting: the stamp of its heap entry
}

// Ready marks host ready; if it was not, the next Take returns it.
func (s *Set) Ready(host string) {
	if s.hosts == nil {
		s.hosts = map[string]entry{}
	}
	if e, ok := s.hosts[host]; ok && e.state == Ready {
		return
	}
	s.hosts[host] = entry{state: Ready}
	s.fresh = append(s.fresh, host)
}

// Wait marks host as having nothing ready before at; the first Take at or after at makes it
// ready again.
func (s *Set) Wait(host string, at time.Time) {
	if s.hosts == nil {
		s.hosts = map[string]entry{}
	}
	s.gen++
	s.hosts[host] = entry{state: Waiting, gen: s.gen}
	heap.Push(&s.waiting, waitEntry{at: at, host: host, gen: s.gen})
}

// Idle marks host as known with nothing ready.
func (s *Set) Idle(host string) {
	if s.hosts == nil {
		s.hosts = map[string]entry{}
	}
	s.hosts[host] = entry{state: Idle}
}

// Forget drops host from the set.
func (s *Set) Forget(host string) { delete(s.hosts, host) }

// State returns what the set knows of host.
func (s *Set) State(host string) State { return s.hosts[host].state }

// IsReady reports whether host is ready.
func (s *Set) IsReady(host string) bool { return s.hosts[host].state == Ready }

// Take makes ready the waiting hosts whose time came at now, and returns the hosts that became
// ready since the last Take.
func (s *Set) Take(now time.Time) []string {
	for len(s.waiting) > 0 && !now.Before(s.waiting[0].at) {
		w := heap.Pop(&s.waiting).(waitEntry)
		if s.live(w) {
			s.hosts[w.host] = entry{state: Ready}
			s.fresh = append(s.fresh, w.host)
		}
	}
	out := s.fresh
	s.fresh = nil
	return out
}

// TakeAll returns every ready host, in no order, and forgets which became ready since the last
// Take: a Take after it returns only the hosts that become ready later.
func (s *Set) TakeAll() []string {
	s.fresh = nil
	out := make([]string, 0, len(s.hosts))
	for h, e := range s.hosts {
		if e.state == Ready {
			out = append(out, h)
		}
	}
	return out
}

// NextWait returns when the earliest waiting host's wait ends (zero: none waits).
func (s *Set) NextWait() time.Time {
	for len(s.waiting) > 0 {
		if w := s.waiting[0]; s.live(w) {
			return w.at
		}
		heap.Pop(&s.waiting) // stale
	}
	return time.Time{}
}

// All yields every host the set knows and its state, in no order. The set must not be changed
// meanwhile, but for Forget of the host yielded.
func (s *Set) All() iter.Seq2[string, State] {
	return func(yield func(string, State) bool) {
		for h, e := range s.hosts {
			if !yield(h, e.state) {
				return
			}
		}
	}
}

// Len is the number of hosts the set knows.
func (s *Set) Len() int { return len(s.hosts) }

// live reports whether w is the wait its host is in now.
func (s *Set) live(w waitEntry) bool {
	e, ok := s.hosts[w.host]
	return ok && e.state == Waiting && e.gen == w.gen
}

// waitEntry is a host waiting until at.
type waitEntry struct {
	at   time.Time
	host string
	gen  uint64
}

// waitHeap is a min-heap of waiting hosts by time (container/heap).
type waitHeap []waitEntry

func (h waitHeap) Len() int           { return len(h) }
func (h waitHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h waitHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *waitHeap) Push(x any)        { *h = append(*h, x.(waitEntry)) }
func (h *waitHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
