package crawler

import (
	"context"
	"sync"
	"time"
)

// Summary is what Run reports at the end.
type Summary struct {
	Status
	Start      RunStart // what the run started from (Status holds the crawl's figures at its end)
	ThisRun    RunTally // what this run's page fetches came to
	Elapsed    time.Duration
	StopReason string // "done", "max-pages", "deferred", "interrupted", "error"
	// DeferredUntil is when the earliest deferred URL may be fetched (StopReason "deferred").
	DeferredUntil time.Time
}

// run is one call of Run: its jobs, its timers and why it stopped. It is owned by the
// dispatcher goroutine (Run's), as are Crawler.inflight, fetching and rr.
type run struct {
	start         time.Time
	fetchCtx      context.Context // the jobs' context, cancelled when the grace period ends
	cancelFetches context.CancelFunc
	done          chan jobDone
	jobs          chan job       // to the workers; buffered for all of them, so a send never waits
	wg            sync.WaitGroup // the workers
	statusTick    *time.Ticker
	timer         *time.Timer // wakes the dispatcher when work may become ready

	fatal         error  // the first store failure
	reason        string // Summary.StopReason
	deferredUntil time.Time
	lastFlush     time.Time
}

// Run crawls until nothing in scope is left, --max-pages is reached, ctx is cancelled or the
// store fails. When ctx is cancelled it stops taking new work and lets requests in flight
// finish for up to cfg.Grace, then cancels them; their URLs stay queued. It returns
// ErrInterrupted in that case.
func (c *Crawler) Run(ctx context.Context) (*Summary, error) {
	if err := c.countRequisites(); err != nil {
		return nil, err
	}
	if err := c.startBrowser(); err != nil {
		return nil, err
	}
	defer c.closeBrowser() // after the jobs ended (finishInFlight)
	r := c.startRun()
	defer r.close()
	c.publishStatus(true)
	for c.pass(ctx, r) {
	}
	c.finishInFlight(r)
	return c.summary(r)
}

// startRun starts Run's timers, its workers and the context its jobs run under.
func (c *Crawler) startRun() *run {
	start := time.Now()
	fetchCtx, cancel := context.WithCancel(context.Background())
	r := &run{
		start: start, fetchCtx: fetchCtx, cancelFetches: cancel,
		jobs:       make(chan job, c.cfg.Workers),
		done:       make(chan jobDone, c.cfg.Workers+1),
		statusTick: time.NewTicker(c.cfg.StatusEvery),
		timer:      time.NewTimer(time.Hour),
		reason:     "done",
		lastFlush:  start,
	}
	for range c.cfg.Workers {
		r.wg.Go(r.work)
	}
	return r
}

// close stops r's timers and cancels any job still running.
func (r *run) close() {
	r.cancelFetches()
	r.statusTick.Stop()
	r.timer.Stop()
}

// pass is one turn of Run's loop: take the reports of finished jobs, stop if the crawl is over
// or must stop, start the work that is ready, and wait for something to change. It returns
// false when Run should stop; r.reason says why.
func (c *Crawler) pass(ctx context.Context, r *run) bool {
	c.takeReports(r)
	if r.mustStop(ctx) {
		return false
	}
	now := time.Now()
	pages := c.pagesLeft()
	var started int
	var wakeAt time.Time
	if pages != 0 {
		var err error
		if started, wakeAt, err = c.dispatch(now, pages, r); err != nil {
			r.fatal = err
			return true
		}
	}
	switch {
	case c.inflight == 0 && pages == 0:
		r.reason = "max-pages"
		set, err := c.spendPageBudget()
		if err != nil {
			r.fatal = err
		}
		return set && err == nil // with requisites queued, go on with them
	case c.inflight == 0 && c.fr.Idle():
		return false
	case started > 0 && c.inflight < c.cfg.Workers:
		return true // more may be ready for the workers still free
	}
	wakeAt = earliest(wakeAt, c.fr.NextAt(now))
	if c.inflight == 0 && started == 0 && !wakeAt.IsZero() && wakeAt.Sub(now) > c.cfg.DeferAfter {
		// Everything left waits on hosts that asked (Retry-After) or were told (backoff)
		// to wait longer than anyone should watch: stop; a later run resumes.
		r.reason, r.deferredUntil = "deferred", wakeAt
		return false
	}
	if started == 0 && c.onlyUnreachableLeft() && c.settleUnreachable(now) {
		return true // their URLs fail in the next pass
	}
	c.wait(ctx, r, now, wakeAt)
	return true
}

// takeReports takes every job report that is already waiting, without blocking.
func (c *Crawler) takeReports(r *run) {
	for {
		select {
		case d := <-r.done:
			c.finish(r, d)
		default:
			c.wakeFreed()
			return
		}
	}
}

// finish accounts for one finished job.
func (c *Crawler) finish(r *run, d jobDone) {
	c.inflight--
	c.jobEnded(d.host)
	c.sched.ended(d.gate)
	if d.page {
		c.fetching--
	}
	if d.err != nil && r.fatal == nil {
		r.fatal = d.err
	}
}

// mustStop reports whether the crawl must stop at once (a job failed the store, or ctx was
// cancelled), and sets r.reason.
func (r *run) mustStop(ctx context.Context) bool {
	switch {
	case r.fatal != nil:
		r.reason = "error"
	case ctx.Err() != nil:
		r.reason = "interrupted"
	default:
		return false
	}
	return true
}

// pagesLeft is how many page fetches dispatch may still start under --max-pages (-1: no
// limit).
func (c *Crawler) pagesLeft() int {
	if c.cfg.MaxPages <= 0 || c.pages.mode == budgetSpent {
		return -1
	}
	return max(c.cfg.MaxPages-c.pagesFetched()-c.fetching, 0)
}

// wait blocks until a job reports, wakeAt comes (in a second when it is zero), the status
// ticks or ctx is cancelled.
func (c *Crawler) wait(ctx context.Context, r *run, now, wakeAt time.Time) {
	sleep := time.Second
	if !wakeAt.IsZero() {
		sleep = max(wakeAt.Sub(now), time.Millisecond)
	}
	resetTimer(r.timer, sleep)
	select {
	case d := <-r.done:
		c.finish(r, d)
	case <-c.renders.freed.signal: // nil (never ready) unless pages are rendered
		c.wakeFreed()
	case <-r.timer.C:
	case <-r.statusTick.C:
		c.tick(r, now)
	case <-ctx.Done():
	}
}

// tick publishes the crawl's status, lets the hosts idle for hostIdle leave memory and, every
// flushEvery, saves the hosts' learned state (so a run after a kill starts from what was
// learned).
func (c *Crawler) tick(r *run, now time.Time) {
	c.publishStatus(true)
	if c.shared != nil && now.Sub(c.scopeRead) >= scopeEvery {
		c.scopeRead = now
		c.widenScope()
	}
	if err := c.reg.EvictUnless(now, c.sched.waiting); err != nil {
		r.fatal = err
	}
	c.dropIdleHosts(now)
	if now.Sub(r.lastFlush) < flushEvery {
		return
	}
	if err := c.reg.Flush(); err != nil {
		r.fatal = err
	}
	r.lastFlush = now
}

// finishInFlight lets the jobs in flight finish within cfg.Grace, then cancels them, and
// returns when every job has returned.
func (c *Crawler) finishInFlight(r *run) {
	grace := time.NewTimer(c.cfg.Grace)
	defer grace.Stop()
	for c.inflight > 0 {
		select {
		case d := <-r.done:
			c.finish(r, d)
		case <-grace.C:
			r.cancelFetches()
		case <-r.statusTick.C:
			c.publishStatus(true)
		}
	}
	close(r.jobs)
	r.wg.Wait()
}

// summary publishes the final status and returns Run's results.
func (c *Crawler) summary(r *run) (*Summary, error) {
	sum := &Summary{Status: c.publishStatus(false), Start: c.start, ThisRun: c.tally(), Elapsed: time.Since(r.start), StopReason: r.reason, DeferredUntil: r.deferredUntil}
	switch {
	case r.fatal != nil:
		return sum, r.fatal
	case r.reason == "interrupted":
		return sum, ErrInterrupted
	}
	return sum, nil
}

func resetTimer(t *time.Timer, d time.Duration) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(d)
}

// earliest returns the earlier of a and b, a zero time standing for "none".
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
