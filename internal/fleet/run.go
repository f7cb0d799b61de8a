package fleet

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/crawl-project/crawl/internal/readyset"
	"github.com/redis/go-redis/v9"
)

// rounds is what Run keeps from one round to the next. Only Run's goroutine touches it: no
// lock.
type rounds struct {
	link      linkState         // whether Redis answered the last round
	watched   time.Time         // when the run_ids of Redis' nodes were last read
	forwarded map[int]time.Time // when each partition's outbox was last forwarded (local time)
	remark    bool              // a Redis restart was found: mark the partitions active again (Store.remarkActive)
}

// linkState is whether Redis answered the last call.
type linkState int

const (
	linkUp linkState = iota
	linkDown
)

// Run keeps the frontier current until ctx is cancelled, and reports the worker's figures a
// last time before it returns: it ticks the Keeper about every sixth of the lease TTL (so renewals, due at a third, are never late by more than that), drops the
// partitions that lapsed or were lost, drains and releases the surplus, forwards the
// outboxes of the partitions held (one waits up to forwardEvery for more), reads the counters of those (and every second, or every round when
// it has nothing in flight, every partition's) and lists the hosts with work.
// While Redis is unreachable it retries with a back-off up to 2 s; partitions lapse meanwhile
// and are acquired again (their in-flight URLs reclaimed) when it is back.
func (f *Frontier) Run(ctx context.Context) {
	tickEvery := max(f.s.opts.LeaseTTL/6, 10*time.Millisecond)
	var nextTick time.Time
	t := time.NewTimer(0)
	defer t.Stop()
	backoff := time.Duration(0)
	var reported time.Time
	// The last figures, kept for ReportTTL, whenever the stop comes: between rounds or
	// during one (a report skipped then would miss the pages completed since the last).
	defer f.report(context.WithoutCancel(ctx))
	defer f.endLapse()
	// URLs taken but not handed out go back to their queues, before that last report.
	defer func() {
		f.mu.Lock()
		parts := slices.Collect(maps.Keys(f.parts.inUse))
		f.mu.Unlock()
		f.putBackBatches(context.WithoutCancel(ctx), parts)
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		tick := !now.Before(nextTick)
		if tick {
			nextTick = now.Add(tickEvery)
		}
		err := f.round(ctx, now, tick)
		if ctx.Err() != nil {
			return
		}
		delay := f.opts.Refresh
		if err != nil {
			backoff = min(max(2*backoff, 50*time.Millisecond), 2*time.Second)
			delay = backoff
			nextTick = time.Time{}
			f.linkFailed(err)
		} else {
			backoff = 0
			f.linkOK()
			if now.Sub(reported) >= reportEvery { // not while Redis is unreachable
				reported = now
				f.report(ctx)
			}
		}
		t.Reset(delay)
	}
}

// reportEvery is how often Run reports the worker to the fleet view.
const reportEvery = time.Second

// report sends the worker's report (Store.Report); a failed one is left to the next second.
func (f *Frontier) report(ctx context.Context) {
	f.mu.Lock()
	r := WorkerReport{Pages: f.pages, Host: f.opts.Machine, Data: f.opts.Data}
	f.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	_ = f.s.Report(rctx, r)
}

func (f *Frontier) linkFailed(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rounds.link == linkUp {
		f.rounds.link = linkDown
		f.stats.Outages++
		f.opts.Log.Warn("Redis unreachable: fetching stops when the partitions' leases run out; retrying", "err", err)
	}
}

func (f *Frontier) linkOK() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rounds.link == linkDown {
		f.rounds.link = linkUp
		f.recent.reset() // a restarted Redis may have lost what the worker saw it record
		if f.s != nil {
			f.s.forgetSeen()
		}
		f.opts.Log.Warn("Redis reachable again")
	}
}

// round is one round of Run at local time now.
func (f *Frontier) round(ctx context.Context, now time.Time, tick bool) error {
	f.dropLapsed(now)
	if tick {
		tctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
		ch, err := f.k.Tick(tctx, now)
		cancel()
		f.sync(ctx, time.Now(), ch)
		if err != nil {
			return err
		}
	}
	f.releaseDrained(ctx, time.Now())
	rctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	if err := f.watchServers(rctx, now); err != nil {
		return err
	}
	members, err := f.readHeld(rctx, now)
	if err != nil {
		return err
	}
	f.retryPutBacks(rctx)
	f.mu.Lock()
	var forward []Ownership
	for p, h := range f.parts.inUse {
		// a partition's outbox waits for a few payloads, or forwardEvery, unless the worker
		// has nothing in flight (the crawl may be ending)
		c := f.view.held[p]
		if c.Outbox > 0 && (c.Outbox >= forwardBatch/2 || now.Sub(f.rounds.forwarded[p]) >= forwardEvery || len(f.inflight.leases) == 0) {
			forward = append(forward, h.o)
			f.rounds.forwarded[p] = now
		}
	}
	f.mu.Unlock()
	for _, o := range forward {
		if _, err := f.s.Forward(rctx, o); err != nil && !errors.Is(err, ErrFenced) {
			return err
		}
	}
	if err := f.drainInboxes(rctx); err != nil {
		return err
	}
	f.mu.Lock()
	every := fullEvery
	if len(f.inflight.leases) == 0 {
		every = idleEvery
	}
	due := f.view.counts == nil || f.view.age.stale() || now.Sub(f.view.full) >= every
	f.mu.Unlock()
	if due {
		if err := f.readCounts(rctx); err != nil {
			return err
		}
	}
	if err := f.returnOrphans(rctx); err != nil {
		return err
	}
	if err := f.repairCounts(rctx, members); err != nil {
		return err
	}
	return f.scanHosts(rctx, members)
}

// drainInboxes records what other workers sent to the partitions in use whose inbox the last
// read found not empty (Store.Drain), one batch each.
func (f *Frontier) drainInboxes(ctx context.Context) error {
	f.mu.Lock()
	var drain []Ownership
	for p, h := range f.parts.inUse {
		if f.view.held[p].Inbox > 0 {
			drain = append(drain, h.o)
		}
	}
	f.mu.Unlock()
	for _, o := range drain {
		n, err := f.s.Drain(ctx, o)
		if errors.Is(err, ErrFenced) {
			continue
		}
		if err != nil {
			return err
		}
		f.mu.Lock()
		if c, ok := f.view.held[o.Partition]; ok {
			c.Inbox = max(c.Inbox-drainBatch, 0) // read again at the next round's reading
			f.view.held[o.Partition] = c
		}
		if n > 0 {
			f.view.age.mark()
		}
		f.mu.Unlock()
	}
	return nil
}

// forwardEvery is how long a partition's outbox may wait for more payloads before Run
// forwards it (each Forward is three round trips to Redis).
const forwardEvery = 500 * time.Millisecond

// watchEvery is how often Run reads the run_id of each Redis node the crawl lives on (one
// INFO server per node), to learn of a restart or failover that no call failed on: go-redis
// retries a command on a new connection by itself.
const watchEvery = time.Second

// watchServers reads the run_ids of the crawl's Redis nodes every watchEvery, and at every
// round while links left out wait for confirmation and nothing is in flight (the crawl may be
// ending). Every node read unchanged, it confirms the links recentLinks left out before the
// read; a node restarted or replaced (it may have lost the last writes it acknowledged), it
// does what the end of an outage does: forgets the links seen recorded, and sends again those
// left out since the last read and the partitions it marked active. A node that does not answer is not an error here (nor a
// reason to stop the round's work on the others): it confirms nothing until it answers.
func (f *Frontier) watchServers(ctx context.Context, now time.Time) error {
	if err := f.sendAgain(ctx); err != nil {
		return err
	}
	f.mu.Lock()
	idle := len(f.inflight.leases) == 0
	f.mu.Unlock()
	if now.Sub(f.rounds.watched) < watchEvery && !(idle && f.recent.pending()) {
		return nil
	}
	m := f.recent.mark()
	addr, complete, err := f.s.restarted(ctx)
	f.rounds.watched = now
	switch {
	case addr == "" && complete:
		f.recent.confirm(m)
		return nil
	case addr == "":
		// a node not read confirms nothing; the round goes on (its own calls say whether
		// Redis is reachable), and the node is compared once it answers
		f.opts.Log.Debug("a Redis node's run_id not read", "err", err)
		return nil
	}
	lost := f.recent.takeAll()
	f.s.forgetSeen() // the seen-sets too: each is read again from what the node kept
	f.mu.Lock()
	f.stats.Restarts++
	f.rounds.remark = true
	f.resend.links = append(f.resend.links, lost.links...)
	f.resend.excluded = append(f.resend.excluded, lost.excluded...)
	f.view.age.mark()
	f.view.heldAt = time.Time{}
	f.mu.Unlock()
	f.opts.Log.Warn("Redis restarted or failed over (a new run_id): forgetting the links seen recorded, sending again those left out since the last check",
		"node", addr, "links", lost.len())
	return f.sendAgain(ctx)
}

// resendChunk bounds the links of one Add that sendAgain makes.
const resendChunk = 512

// sendAgain marks again the partitions the worker marked active and adds the links and
// exclusions a restart may have lost (f.resend); what Redis has not taken stays for the next
// round.
func (f *Frontier) sendAgain(ctx context.Context) error {
	if f.rounds.remark {
		if err := f.s.remarkActive(ctx); err != nil {
			return err
		}
		f.rounds.remark = false
	}
	for {
		f.mu.Lock()
		links := f.resend.links[:min(len(f.resend.links), resendChunk)]
		ex := f.resend.excluded[:min(len(f.resend.excluded), resendChunk)]
		f.mu.Unlock()
		if len(links)+len(ex) == 0 {
			return nil
		}
		if len(links) > 0 {
			if _, err := f.s.Add(ctx, links); err != nil {
				return err
			}
		}
		if len(ex) > 0 {
			if err := f.s.Exclude(ctx, ex); err != nil {
				return err
			}
		}
		f.mu.Lock()
		f.resend.links = f.resend.links[len(links):]
		f.resend.excluded = f.resend.excluded[len(ex):]
		f.view.age.mark()
		f.view.heldAt = time.Time{}
		f.mu.Unlock()
	}
}

// scanHosts makes ready, of the hosts with work of the partitions in use that have URLs not in
// flight, those new to the worker, drained before (new URLs came), or waiting for a retry while
// new URLs came to their queue. members are the hosts with work readHeld read this round, by
// partition; those of other partitions are read now.
func (f *Frontier) scanHosts(ctx context.Context, members map[int][]string) error {
	f.mu.Lock()
	var ps, unread []Ownership
	for p, h := range f.parts.inUse {
		if c := f.view.held[p]; c.Queued > c.InFlight && h.use == partActive {
			ps = append(ps, h.o)
			if _, ok := members[p]; !ok {
				unread = append(unread, h.o)
			}
		}
	}
	f.mu.Unlock()
	if len(ps) == 0 {
		return nil
	}
	if len(unread) > 0 {
		pipe := f.s.rdb.Pipeline()
		cmds := make([]*redis.StringSliceCmd, len(unread))
		for i, o := range unread {
			cmds[i] = pipe.SMembers(ctx, f.s.k.hosts(o.Partition))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		members = maps.Clone(members)
		for i, o := range unread {
			members[o.Partition] = cmds[i].Val()
		}
	}
	type waiting struct {
		host string
		o    Ownership
	}
	var asked []waiting
	f.mu.Lock()
	for _, o := range ps {
		if h := f.parts.inUse[o.Partition]; h == nil || h.o.Epoch != o.Epoch || h.use != partActive {
			continue // dropped or draining meanwhile
		}
		for _, name := range members[o.Partition] {
			f.s.learn(name, o.Partition)
			switch f.hosts.State(name) {
			case readyset.Unknown, readyset.Idle:
				f.hosts.Ready(name)
			case readyset.Waiting:
				asked = append(asked, waiting{name, o})
			}
		}
	}
	f.mu.Unlock()
	if len(asked) == 0 {
		return nil
	}
	pipe := f.s.rdb.Pipeline()
	lens := make([]*redis.IntCmd, len(asked))
	for i, w := range asked {
		lens[i] = pipe.LLen(ctx, f.s.k.queue(w.o.Partition, w.host))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, w := range asked {
		if f.hosts.State(w.host) == readyset.Waiting && lens[i].Val() > 0 {
			f.hosts.Ready(w.host)
		}
	}
	return nil
}
