package crawler

import (
	"context"
	"time"
)

// jobDone is what a finished job reports to the dispatcher.
type jobDone struct {
	page bool   // it was a page fetch (counts against --max-pages until committed)
	host string // its host
	gate string // the gate of its host: hosts waiting for that gate may go on
	err  error  // a store failure: the crawl must stop
}

// dispatch hands ready work to new jobs, asking the hosts of the schedule in their turns while
// workers are free, at most pages page fetches (-1: any number), and returns how many jobs it started
// and the earliest time a host of the schedule said it may have one.
func (c *Crawler) dispatch(now time.Time, pages int, r *run) (int, time.Time, error) {
	fresh := c.fr.TakeReady(now)
	c.noteReady(now, fresh)
	c.sched.add(fresh, c.warm)
	c.sched.due(now)
	c.sched.admit()
	started := 0
	for c.inflight < c.cfg.Workers && pages != 0 {
		host, ok := c.sched.next()
		if !ok {
			break
		}
		j, readyAt, err := c.nextJob(r.fetchCtx, now, host)
		if err != nil {
			c.sched.requeue(host)
			return started, c.sched.nextAt(), err
		}
		if j.run != nil {
			c.launch(r, j)
			c.sched.served()
			started++
			if j.page {
				pages--
			}
		}
		c.reschedule(host, j, readyAt)
	}
	c.reportHeld(now)
	return started, c.sched.nextAt(), nil
}

// reschedule puts host back in the schedule after nextJob gave it job j or readyAt: after the
// others' turn if it still has ready work and got a job, at readyAt if it said when, or until a
// job of its gate ends; a host the frontier has no ready work for leaves the schedule until it
// has (frontier.TakeReady).
func (c *Crawler) reschedule(host string, j job, readyAt time.Time) {
	gate, _ := c.gates.key(host)
	switch {
	case !c.fr.Ready(host):
		c.noteNotReady(host)
		c.sched.forget(host, gate)
	case j.run != nil:
		c.sched.requeue(host)
	case !readyAt.IsZero():
		c.sched.wakeAt(host, gate, readyAt)
	default:
		c.sched.waitFor(host, gate)
	}
}

// reportHeld tells the gates that refused ready work in this pass that their rate held it
// back, if workers were left free for it: then the host's rate, not the crawl's workers,
// limited its sending, and the rate may grow (hostlimit.Config.DemandByCaller).
func (c *Crawler) reportHeld(now time.Time) {
	if c.inflight < c.cfg.Workers {
		for _, g := range c.held {
			c.reg.Starved(now, g)
		}
	}
	c.held = c.held[:0]
}

// launch hands j to a worker, which reports to r.done; fewer than cfg.Workers jobs run.
func (c *Crawler) launch(r *run, j job) {
	c.inflight++
	c.jobStarted(j.host)
	if j.page {
		c.fetching++
	}
	r.jobs <- j
}

// work runs jobs until r.jobs is closed, reporting each to r.done. Run keeps cfg.Workers of
// them for its whole length, so that a job starts on a goroutine whose stack has already
// grown, not on a new one.
func (r *run) work() {
	for j := range r.jobs {
		r.done <- jobDone{page: j.page, host: j.host, gate: j.gate, err: j.run()}
	}
}

// nextJob returns host's next job, or no job and when host may have one (zero: when a job of
// its ends or its robots.txt arrives). Until host's robots.txt is known, the job is fetching
// it; once it is known, a page. A host given up for not answering (unanswered.go) gets jobs
// that fail its URLs unrequested.
func (c *Crawler) nextJob(fetchCtx context.Context, now time.Time, host string) (job, time.Time, error) {
	gate, ok := c.gates.key(host)
	if !ok { // its address is being looked up (--key-by-ip): look again shortly
		return job{}, now.Add(50 * time.Millisecond), nil
	}
	if given, reason, why := c.givenUp(host); given { // no answer: its URLs fail unrequested
		delete(c.robotsWaiting, host)
		j, readyAt, err := c.unansweredJob(now, host, reason, why)
		j.host, j.gate = host, gate
		return j, readyAt, err
	}
	if c.shared != nil {
		fetchCtx = c.shared.HostContext(fetchCtx, host)
	}
	rs, err := c.robotsFor(host, now)
	if err != nil {
		return job{}, time.Time{}, err
	}
	var j job
	var readyAt time.Time
	st, at := rs.state(now)
	if st == robotsWait {
		c.robotsWaiting[host] = true
		return job{}, at, nil
	}
	delete(c.robotsWaiting, host)
	switch st {
	case robotsPending:
		return job{}, time.Time{}, nil
	case robotsStaged:
		j = c.installRobotsJob(host, rs)
	case robotsGaveUp:
		j, readyAt, err = c.robotsUnreachableJob(now, host, rs)
	case robotsNeeded:
		j, readyAt, err = c.robotsJob(fetchCtx, now, host, gate, rs)
	default:
		j, readyAt, err = c.pageJob(fetchCtx, now, host, gate, rs)
	}
	j.host, j.gate = host, gate
	return j, readyAt, err
}

// turnRate is host's rate now, req/s, the weight of its turns in the schedule: its gate's, or
// --initial-rate while the gate is not in memory (a host not yet in play, or idle long enough
// to leave memory).
func (c *Crawler) turnRate(host string) float64 {
	if r, ok := c.reg.Limit(c.gates.known(host)); ok {
		return r
	}
	return c.cfg.InitialRate
}
