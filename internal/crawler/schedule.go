package crawler

import (
	"container/heap"
	"time"
)

// schedule is the dispatcher's list of hosts with ready work, so that a pass asks only the
// hosts that may have a job now and never scans every ready host: a queue of hosts to ask; a
// heap of hosts that said when to ask again (a token, a pause, a robots.txt retry); and the
// hosts waiting for one of their gate's jobs to end (a full window, a robots.txt fetch). A
// job's end also asks again the hosts of its gate that wait for a time: the outcome may have
// changed the gate's rate, and with it when a token comes. Hosts come in from
// frontier.TakeReady and leave when the frontier no longer has ready work for them.
//
// Turns follow the hosts' rates (weighted fair queueing): a host entering the queue is tagged
// with the virtual time plus 1 ÷ its rate, the least tag is asked first (equal tags in the
// order they came), and each job started moves the virtual time on by 1 ÷ the rates of the
// hosts in play added up. Hosts of equal rates so take plain turns in the order they came;
// when the workers cannot serve every host at its rate, each host gets turns in proportion to
// its rate, so that hosts put in play at the starting rate do not take the turns of a host
// crawled at hundreds of requests a second.
//
// New hosts wait their turn in pending, oldest first, and are put in play (admit) while fewer
// than maxActive hosts are and the rates of the hosts in play add up to no more than budget;
// when no host in play is queued and a worker is free, next puts one more in play beyond the
// budget, as long as fewer than spareMax such hosts are: so that hosts crawled fast, or
// paused, whose rates fill the budget, leave room for new hosts to go on, but no more than a
// few, which would take the machine's time from the hosts being crawled. So a broad crawl
// finishes hosts before it starts new ones and holds state (gates, robots.txt, records) for
// the hosts it is crawling, not for every host it has seen. The dispatcher goroutine owns it.
type schedule struct {
	maxActive int                       // hosts in play at most (queued, timed, waiting or taken)
	budget    float64                   // req/s: pending hosts are admitted while the hosts in play add up to no more
	spareMax  int                       // hosts in play at most that next put in play beyond the budget
	spare     int                       // hosts in play that next put in play beyond the budget
	rate      func(host string) float64 // a host's rate now, req/s (its gate's): the weight of its turns
	playRate  float64                   // the rates of the hosts in play, as last read (slot.rate), added up
	vtime     float64                   // virtual time: 1 ÷ playRate more for each job started
	seq       uint64                    // how many hosts have entered the queue: the order of equal tags
	pending   []string                  // hosts with ready work waiting to be in play, oldest first
	queue     queuedHosts               // hosts to ask now, least tag first
	timed     timedHosts                // hosts to ask at a time, earliest first; entries of hosts since moved are stale
	byGate    map[string][]string       // gate → its hosts that wait for a time or for one of its jobs to end
	hosts     map[string]slot           // every host the schedule holds, and where
}

// slotKind says where a host is in the schedule.
type slotKind uint8

const (
	slotQueued  slotKind = iota // in queue
	slotTimed                   // in timed at its time, and under its gate in byGate
	slotWaiting                 // under its gate in byGate, until a job of the gate ends
	slotPending                 // in pending, not yet in play
	slotTaken                   // given to the dispatcher by next, until it puts the host back or forgets it
)

// slot is where a host is: its kind, for a timed host its time, and for a host in play the rate
// it was last queued at and whether next put it in play beyond the budget.
type slot struct {
	kind  slotKind
	at    time.Time
	rate  float64
	spare bool
}

// Bounds of a turn's weight, req/s: a rate outside them (none, not a number) is taken as the
// nearest, so that every tag is finite and a host of any rate comes to its turn.
const (
	minTurnRate = 1e-3
	maxTurnRate = 1e6
)

// newSchedule returns an empty schedule that holds at most maxActive hosts in play, admits
// pending hosts within budget req/s and spare more (see schedule); rate gives a host's rate.
func newSchedule(maxActive int, budget float64, spare int, rate func(host string) float64) *schedule {
	return &schedule{maxActive: maxActive, budget: budget, spareMax: spare, rate: rate, byGate: map[string][]string{}, hosts: map[string]slot{}}
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

// inPlay is how many hosts are in play.
func (s *schedule) inPlay() int { return len(s.hosts) - len(s.pending) }

// admit puts pending hosts in play, oldest first, while fewer than maxActive are and the
// rates of those in play, the next one's included, add up to no more than budget (one host at
// least is in play whatever its rate).
func (s *schedule) admit() {
	for len(s.pending) > 0 && s.inPlay() < s.maxActive {
		if s.inPlay() > 0 && s.playRate+turnRate(s.rate(s.pending[0])) > s.budget {
			return
		}
		s.admitOldest()
	}
}

// admitOldest puts the oldest pending host in play.
func (s *schedule) admitOldest() {
	h := s.pending[0]
	s.pending[0] = ""
	s.pending = s.pending[1:]
	if len(s.pending) == 0 {
		s.pending = nil // let the backing array go
	}
	s.enqueue(h)
}

// turnRate is r within [minTurnRate, maxTurnRate].
func turnRate(r float64) float64 {
	if !(r >= minTurnRate) { // NaN too
		return minTurnRate
	}
	return min(r, maxTurnRate)
}

// enqueue queues h, tagged with the virtual time plus 1 ÷ its rate now.
func (s *schedule) enqueue(h string) {
	r := turnRate(s.rate(h))
	sl := s.hosts[h]
	s.playRate += r - sl.rate // a pending or new host's is 0
	tag := s.vtime + 1/r
	s.hosts[h] = slot{kind: slotQueued, rate: r, spare: sl.spare}
	heap.Push(&s.queue, queuedHost{tag: tag, seq: s.seq, host: h})
	s.seq++
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

// next takes the queued host with the least tag or, when none is queued, puts the oldest
// pending host in play beyond the budget (if fewer than maxActive are in play and fewer than
// spareMax are so) and takes it: the caller has a worker free. ok is false when it can do
// neither. The host is taken until the caller puts it back (requeue, wakeAt, waitFor) or
// forgets it, and served says it was given a job.
func (s *schedule) next() (host string, ok bool) {
	if s.queue.Len() == 0 {
		if len(s.pending) == 0 || s.inPlay() >= s.maxActive || s.spare >= s.spareMax {
			return "", false
		}
		h := s.pending[0]
		s.admitOldest()
		sl := s.hosts[h]
		sl.spare = true
		s.hosts[h] = sl
		s.spare++
	}
	q := heap.Pop(&s.queue).(queuedHost)
	sl := s.hosts[q.host]
	sl.kind = slotTaken
	s.hosts[q.host] = sl
	return q.host, true
}

// served tells the schedule that the taken host was given a job: the virtual time moves on.
func (s *schedule) served() {
	if s.playRate > 0 {
		s.vtime += 1 / s.playRate
	}
}

// requeue queues the taken host again: it has more work, after the turns of hosts tagged before it.
func (s *schedule) requeue(host string) { s.enqueue(host) }

// wake queues host now if the schedule holds it waiting (for a time, or for a job of its gate).
func (s *schedule) wake(host string) {
	if s.holds(host) {
		s.enqueue(host) // a timed host's heap entry goes stale
	}
}

// wakeAt holds the taken host, of gate, until at or until a job of gate ends.
func (s *schedule) wakeAt(host, gate string, at time.Time) {
	sl := s.hosts[host]
	sl.kind, sl.at = slotTimed, at
	s.hosts[host] = sl
	heap.Push(&s.timed, timedHost{at: at, host: host})
	s.underGate(host, gate)
}

// waitFor holds the taken host until a job of gate ends.
func (s *schedule) waitFor(host, gate string) {
	sl := s.hosts[host]
	sl.kind = slotWaiting
	s.hosts[host] = sl
	s.underGate(host, gate)
}

// underGate lists host under gate, once, dropping the hosts listed there that no longer wait.
func (s *schedule) underGate(host, gate string) {
	list := s.byGate[gate][:0]
	for _, h := range s.byGate[gate] {
		if s.holds(h) && h != host {
			list = append(list, h)
		}
	}
	s.byGate[gate] = append(list, host)
}

// holds reports whether host waits in the schedule for a time or for a job of its gate.
func (s *schedule) holds(host string) bool {
	sl, ok := s.hosts[host]
	return ok && (sl.kind == slotTimed || sl.kind == slotWaiting)
}

// forget drops the taken host, which has no ready work, from the schedule and from gate's
// list.
func (s *schedule) forget(host, gate string) {
	if sl, ok := s.hosts[host]; ok {
		s.playRate -= sl.rate
		if sl.spare {
			s.spare--
		}
		delete(s.hosts, host)
	}
	if s.inPlay() == 0 {
		s.playRate = 0 // no float residue once none is in play
	}
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
		if s.holds(h) {
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

type queuedHost struct {
	tag  float64
	seq  uint64
	host string
}

// queuedHosts is a min-heap of queuedHost by tag, then seq (container/heap).
type queuedHosts []queuedHost

func (q queuedHosts) Len() int { return len(q) }
func (q queuedHosts) Less(i, j int) bool {
	return q[i].tag < q[j].tag || (q[i].tag == q[j].tag && q[i].seq < q[j].seq)
}
func (q queuedHosts) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queuedHosts) Push(x any)   { *q = append(*q, x.(queuedHost)) }
func (q *queuedHosts) Pop() any {
	old := *q
	x := old[len(old)-1]
	old[len(old)-1] = queuedHost{}
	*q = old[:len(old)-1]
	return x
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
