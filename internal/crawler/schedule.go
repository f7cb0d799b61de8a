package crawler

import (
	"container/heap"
	"time"
)

// schedule is the dispatcher's list of hosts with ready work, so that a pass asks only the
// hosts that may have a job now and never scans every ready host: a queue of hosts to ask, in
// turn; a heap of hosts that said when to ask again (a token, a pause, a robots.txt retry); and
// the hosts waiting for one of their gate's jobs to end (a full window, a robots.txt fetch).
// A job's end also asks again the hosts of its gate that wait for a time: the outcome may have
// changed the gate's rate, and with it when a token comes. Hosts come in from
// frontier.TakeReady and leave when the frontier no longer has ready work for them. At most
// maxActive hosts are in play at once; the others wait their turn in pending, so that a broad
// crawl finishes hosts before it starts new ones and holds state (gates, robots.txt, records)
// for the hosts it is crawling, not for every host it has seen. The dispatcher goroutine owns
// it.
type schedule struct {
	maxActive int                 // hosts in play at most (queued, timed or waiting)
	pending   []string            // hosts with ready work waiting to be in play, oldest first
	queue     []string            // hosts to ask now, oldest first
	timed     timedHosts          // hosts to ask at a time, earliest first; entries of hosts since moved are stale
	byGate    map[string][]string // gate → its hosts that wait for a time or for one of its jobs to end
	hosts     map[string]slot     // every host the schedule holds, and where
}

// slotKind says where a host is in the schedule.
type slotKind uint8

const (
	slotQueued  slotKind = iota // in queue
	slotTimed                   // in timed at its time, and under its gate in byGate
	slotWaiting                 // under its gate in byGate, until a job of the gate ends
	slotPending                 // in pending, not yet in play
)

// slot is where a host is: its kind, and for a timed host its time.
type slot struct {
	kind slotKind
	at   time.Time
}

func newSchedule(maxActive int) *schedule {
	return &schedule{maxActive: maxActive, byGate: map[string][]string{}, hosts: map[string]slot{}}
}

// add takes hosts that became ready. A warm host (one the crawl is still crawling: its
// record is in memory) is queued at once, so that a host is finished before new ones start;
// the others wait in pending for their turn to be in play. Hosts already held stay where they
// are.
func (s *schedule) add(hosts []string, warm func(host string) bool) {
	for _, h := range hosts {
		if _, ok := s.hosts[h]; ok {
			continue
		}
		if warm(h) {
			s.enqueue(h)
			continue
		}
		s.hosts[h] = slot{kind: slotPending}
		s.pending = append(s.pending, h)
	}
}

// admit puts pending hosts in play, oldest first, while fewer than maxActive are.
func (s *schedule) admit() {
	n := 0
	for n < len(s.pending) && len(s.hosts)-len(s.pending)+n < s.maxActive {
		s.enqueue(s.pending[n])
		s.pending[n] = ""
		n++
	}
	s.pending = s.pending[n:]
	if len(s.pending) == 0 {
		s.pending = nil
	}
}

func (s *schedule) enqueue(h string) {
	s.hosts[h] = slot{kind: slotQueued}
	s.queue = append(s.queue, h)
}

// due moves the timed hosts whose time has come at now to the queue.
func (s *schedule) due(now time.Time) {
	for s.timed.Len() > 0 && !s.timed[0].at.After(now) {
		t := heap.Pop(&s.timed).(timedHost)
		if sl, ok := s.hosts[t.host]; ok && sl.kind == slotTimed && sl.at.Equal(t.at) {
			s.enqueue(t.host)
		}
	}
}

// next takes the first queued host; ok is false when the queue is empty. The host leaves the
// schedule until it is put back (requeue, wakeAt, waitFor).
func (s *schedule) next() (host string, ok bool) {
	if len(s.queue) == 0 {
		return "", false
	}
	host, s.queue[0] = s.queue[0], ""
	s.queue = s.queue[1:]
	if len(s.queue) == 0 {
		s.queue = nil // let the backing array go
	}
	delete(s.hosts, host)
	return host, true
}

// requeue puts host at the back of the queue: it has more work, after the others' turn.
func (s *schedule) requeue(host string) { s.enqueue(host) }

// wake queues host now if the schedule holds it waiting (for a time, or for a job of its gate).
func (s *schedule) wake(host string) {
	if sl, ok := s.hosts[host]; ok && sl.kind != slotQueued && sl.kind != slotPending {
		s.enqueue(host) // a timed host's heap entry goes stale
	}
}

// wakeAt holds host, of gate, until at or until a job of gate ends.
func (s *schedule) wakeAt(host, gate string, at time.Time) {
	s.hosts[host] = slot{kind: slotTimed, at: at}
	heap.Push(&s.timed, timedHost{at: at, host: host})
	s.underGate(host, gate)
}

// waitFor holds host until a job of gate ends.
func (s *schedule) waitFor(host, gate string) {
	s.hosts[host] = slot{kind: slotWaiting}
	s.underGate(host, gate)
}

// underGate lists host under gate, once, dropping the hosts listed there that no longer wait.
func (s *schedule) underGate(host, gate string) {
	list := s.byGate[gate][:0]
	for _, h := range s.byGate[gate] {
		if sl, ok := s.hosts[h]; ok && sl.kind != slotQueued && h != host {
			list = append(list, h)
		}
	}
	s.byGate[gate] = append(list, host)
}

// forget drops host, which has left the schedule (next) and has no ready work, from gate's
// list.
func (s *schedule) forget(host, gate string) {
	list := s.byGate[gate][:0]
	for _, h := range s.byGate[gate] {
		if h != host {
			list = append(list, h)
		}
	}
	if len(list) == 0 {
		delete(s.byGate, gate)
	} else {
		s.byGate[gate] = list
	}
}

// waiting reports whether hosts of gate wait for a time or for one of its jobs to end (a
// pause, a token, a full window): the gate holds work, however long it has been idle.
func (s *schedule) waiting(gate string) bool { return len(s.byGate[gate]) > 0 }

// ended queues the hosts of gate that wait, for a time or for a job of it: one has just ended.
func (s *schedule) ended(gate string) {
	for _, h := range s.byGate[gate] {
		if sl, ok := s.hosts[h]; ok && sl.kind != slotQueued {
			s.enqueue(h) // a timed host's heap entry goes stale
		}
	}
	delete(s.byGate, gate)
}

// nextAt is when the earliest timed host is due (or a stale entry, which wakes the dispatcher
// for nothing); zero if none is.
func (s *schedule) nextAt() time.Time {
	if s.timed.Len() == 0 {
		return time.Time{}
	}
	return s.timed[0].at
}

type timedHost struct {
	at   time.Time
	host string
}

// timedHosts is a min-heap of timedHost by at (container/heap).
type timedHosts []timedHost

func (t timedHosts) Len() int           { return len(t) }
func (t timedHosts) Less(i, j int) bool { return t[i].at.Before(t[j].at) }
func (t timedHosts) Swap(i, j int)      { t[i], t[j] = t[j], t[i] }
func (t *timedHosts) Push(x any)        { *t = append(*t, x.(timedHost)) }
func (t *timedHosts) Pop() any {
	old := *t
	x := old[len(old)-1]
	*t = old[:len(old)-1]
	return x
}
