package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/readyset"
	"github.com/crawl-project/crawl/internal/termsafe"
	"github.com/crawl-project/crawl/storage"
	"github.com/redis/go-redis/v9"
)

// FrontierOptions configure a Frontier; zero fields take the defaults.
type FrontierOptions struct {
	Refresh  time.Duration // how often Run forwards outboxes, lists hosts and reads counts (default 100 ms)
	Timeout  time.Duration // bound on each Redis call (default 2 s)
	Patience time.Duration // how long Add and Exclude retry while Redis is unreachable (default 2 min)
	Log      *slog.Logger  // refused results, Redis lost and back (nil: nothing logged)
	// Machine and Data name the worker in its reports to the fleet view (Store.Report, sent
	// by Run about once a second): the machine it runs on and its local store.
	Machine, Data string
	// Redis and Crawl name the shared crawl in the worker's store (Where): the Redis URL
	// without its password, and the crawl's name.
	Redis, Crawl string
	// RecentLinks is how many URLs the worker remembers as recorded in the crawl, so that a
	// page's links already sent are not sent again (default 262,144: 2 MB).
	RecentLinks int
	// CommitLinger is how long a result waits for the results of the other URLs of its
	// partition this worker is fetching, to go to Redis in the same script (default 2 ms;
	// negative: none, a result goes as soon as no other of its partition is being sent).
	CommitLinger time.Duration
}

func (o FrontierOptions) withDefaults() FrontierOptions {
	if o.Refresh <= 0 {
		o.Refresh = 100 * time.Millisecond
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	if o.Patience <= 0 {
		o.Patience = 2 * time.Minute
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.CommitLinger == 0 {
		o.CommitLinger = 2 * time.Millisecond
	}
	return o
}

// Frontier is a shared crawl as one worker sees it: the URLs of the hosts of the partitions
// its Keeper holds, in the form internal/crawler's loop uses (crawler.Frontier). Run keeps it
// current; the other methods are safe for concurrent use.
//
// A partition that is lost or lapses is dropped at once: the contexts HostContext gave for its
// hosts are cancelled, its hosts are no longer ready, and the results of its leases go to
// Redis under the ownership they were leased with, where fencing refuses them once another
// worker holds the partition (Complete then returns nil: the URL is the new owner's). A
// surplus partition (another worker joined) drains instead: it leases nothing more, and is
// released once its leases have ended (or after a lease TTL, its requests then cancelled), so
// that a rebalance fetches nothing twice. Complete stores a page in the worker's own store
// (Join) before it records the result in Redis.
//
// Times the loop passes in are local; times in Redis are Redis' (Store.Now): the offset between
// the two is measured on every round of Run.
type Frontier struct {
	s    *Store
	k    *Keeper
	opts FrontierOptions

	mu    sync.Mutex
	parts map[int]*held // partitions in use
	// hosts of the partitions in use that had work: Ready (Lease asks Redis), Waiting (a
	// retry's time or a back-off, local time) or Idle (nothing queued or delayed when asked)
	hosts   readyset.Set
	leases  map[string]leased  // URLs in flight, by URL
	putBack []leased           // leases Release could not hand back (Redis unreachable)
	counts  Partitions         // every partition's, read at one instant (nil before the first read)
	full    time.Time          // when counts was read
	held    map[int]PartCounts // the partitions in use, as last read
	heldAt  time.Time          // when every partition in use was last read
	// partitions whose outbox this worker filled since it last read it empty
	outboxed  map[int]bool
	forwarded map[int]time.Time // when Run last forwarded each partition's outbox (local time)
	age       countsAge         // whether counts may miss a write of this worker
	offset    time.Duration     // Redis' clock minus the local clock
	link      linkState
	stats     FrontierStats
	done      map[string]*frontier.HostCount // results this worker recorded, by host
	pages     int64                          // pages this worker fetched and completed
	save      func() error                   // checkpoints hosts' learned state (Join)
	store     *storage.DB                    // the worker's store, for pages (Join)
	recent    *recentLinks                   // URLs known recorded: their links are not sent again
	resend    dropped                        // links left out before a Redis restart was found, to send again
	remark    bool                           // a Redis restart was found: mark the partitions active again (Store.remarkActive)
	watched   time.Time                      // when Run last read the run_ids of Redis' nodes (Run's goroutine only)
	commits   *commits                       // results being committed, grouped by ownership
	batches   map[string]*hostBatch          // URLs taken from Redis not yet handed out, by host
	lapse     lapseTimer                     // drops the partitions in use when their lease may run out
}

// lapseTimer fires at the earliest local stop time of the partitions in use, so that they are
// dropped (their requests cancelled) on time rather than at Run's next round, which a slow
// Redis call may hold up. Guarded by Frontier.mu.
type lapseTimer struct {
	t     *time.Timer // nil until first armed
	ended bool        // Run has returned: not armed again
}

// FrontierStats count what happened to this worker's results.
type FrontierStats struct {
	Refused     int // results and releases refused: the partition is another worker's (fenced) or the URL was reclaimed
	Dropped     int // partitions given up: lost, lapsed or released as surplus
	Outages     int // times Redis became unreachable
	Restarts    int // times a Redis node was found restarted or replaced (a new run_id)
	Reacquired  int // partitions acquired
	SetAside    int // unreadable values moved to their partition's bad list (Store.setAside)
	Recounted   int // partitions whose damaged counters were recounted (Frontier.repairCounts)
	LastRefused string
}

// linkState is whether Redis answered the last call.
type linkState int

const (
	linkUp linkState = iota
	linkDown
)

// partUse is what the worker does with a partition it holds.
type partUse int

const (
	partActive   partUse = iota // leases its URLs
	partDraining                // surplus: leases nothing more, lets its requests finish, then releases it
)

// held is a partition in use.
type held struct {
	o      Ownership
	use    partUse
	since  time.Time       // partDraining: local time the draining began
	ctx    context.Context // requests to the partition's hosts; cancelled when it is dropped
	cancel context.CancelFunc
	parent context.Context // ctx's parent (HostContext's argument)
}

// leased is a URL in flight with the ownership it was leased under.
type leased struct {
	Lease
	o Ownership
}

// NewFrontier returns the Frontier of k's worker. Call Run in a goroutine of its own.
func NewFrontier(k *Keeper, opts FrontierOptions) *Frontier {
	f := newFrontier(k, opts)
	k.s.watchSetAside(func(a asideNote) {
		f.mu.Lock()
		f.stats.SetAside++
		f.mu.Unlock()
		f.opts.Log.Warn("unreadable value in Redis set aside; the crawl goes on without it", "from", a.From, "to", a.List, "err", a.Err)
	})
	return f
}

func newFrontier(k *Keeper, opts FrontierOptions) *Frontier {
	return &Frontier{
		s: k.s, k: k, opts: opts.withDefaults(),
		parts: map[int]*held{}, leases: map[string]leased{},
		done: map[string]*frontier.HostCount{}, held: map[int]PartCounts{}, outboxed: map[int]bool{}, forwarded: map[int]time.Time{},
		recent: newRecentLinks(opts.RecentLinks), commits: newCommits(),
		batches: map[string]*hostBatch{},
	}
}

// Stats returns the counts of refused results, dropped partitions, Redis outages and restarts.
func (f *Frontier) Stats() FrontierStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

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
		parts := slices.Collect(maps.Keys(f.parts))
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
	if f.link == linkUp {
		f.link = linkDown
		f.stats.Outages++
		f.opts.Log.Warn("Redis unreachable: fetching stops when the partitions' leases run out; retrying", "err", err)
	}
}

func (f *Frontier) linkOK() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.link == linkDown {
		f.link = linkUp
		f.recent.reset() // a restarted Redis may have lost what the worker saw it record
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
	for p, h := range f.parts {
		// a partition's outbox waits for a few payloads, or forwardEvery, unless the worker
		// has nothing in flight (the crawl may be ending)
		c := f.held[p]
		if c.Outbox > 0 && (c.Outbox >= forwardBatch/2 || now.Sub(f.forwarded[p]) >= forwardEvery || len(f.leases) == 0) {
			forward = append(forward, h.o)
			f.forwarded[p] = now
		}
	}
	f.mu.Unlock()
	for _, o := range forward {
		if _, err := f.s.Forward(rctx, o); err != nil && !errors.Is(err, ErrFenced) {
			return err
		}
	}
	f.mu.Lock()
	every := fullEvery
	if len(f.leases) == 0 {
		every = idleEvery
	}
	due := f.counts == nil || f.age.stale() || now.Sub(f.full) >= every
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
	idle := len(f.leases) == 0
	f.mu.Unlock()
	if now.Sub(f.watched) < watchEvery && !(idle && f.recent.pending()) {
		return nil
	}
	m := f.recent.mark()
	addr, complete, err := f.s.restarted(ctx)
	f.watched = now
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
	f.mu.Lock()
	f.stats.Restarts++
	f.remark = true
	f.resend.links = append(f.resend.links, lost.links...)
	f.resend.excluded = append(f.resend.excluded, lost.excluded...)
	f.age.mark()
	f.heldAt = time.Time{}
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
	f.mu.Lock()
	remark := f.remark
	f.mu.Unlock()
	if remark {
		if err := f.s.remarkActive(ctx); err != nil {
			return err
		}
		f.mu.Lock()
		f.remark = false
		f.mu.Unlock()
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
		f.age.mark()
		f.heldAt = time.Time{}
		f.mu.Unlock()
	}
}

// forwardEvery is how long a partition's outbox may wait for more payloads before Run
// forwards it (each Forward is three round trips to Redis).
const forwardEvery = 500 * time.Millisecond

// orphanAge is how long a URL may sit in the in-flight set of a partition this worker holds
// without being one of its leases before returnOrphans puts it back: a Take whose reply was
// lost (Redis went away mid-call) left it there.
const orphanAge = 10 * time.Second

// returnOrphans puts back the URLs in flight in held partitions that this worker does not know
// it leased, once they are orphanAge old (an in-flight URL's score is its deadline, Take's time
// plus the URL lease TTL, on Redis' clock), or at once when their deadline is later than any
// of this worker's leases can be; an unreadable one is set aside.
func (f *Frontier) returnOrphans(ctx context.Context) error {
	f.mu.Lock()
	mine := map[int]int{}
	for _, l := range f.leases {
		mine[l.Partition]++
	}
	taken := map[string]bool{} // in a batch not handed out yet
	for _, b := range f.batches {
		for _, l := range b.ls {
			mine[l.Partition]++
			taken[l.URL] = true
		}
	}
	var suspect []Ownership
	for p, h := range f.parts {
		if f.held[p].InFlight > mine[p] {
			suspect = append(suspect, h.o)
		}
	}
	offset := f.offset
	f.mu.Unlock()
	takenBefore := time.Now().Add(offset).Add(-orphanAge).Add(f.s.opts.URLLeaseTTL)
	// no lease of this worker ends later than this (a deadline beyond is damage, or a lease of
	// a worker with a longer URL lease TTL before this one: an orphan too)
	leasedAfter := time.Now().Add(offset).Add(orphanAge).Add(f.s.opts.URLLeaseTTL)
	for _, o := range suspect {
		old, err := f.s.rdb.ZRangeByScore(ctx, f.s.k.inflight(o.Partition),
			&redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(takenBefore.UnixMilli(), 10)}).Result()
		if err != nil {
			return err
		}
		late, err := f.s.rdb.ZRangeByScore(ctx, f.s.k.inflight(o.Partition),
			&redis.ZRangeBy{Min: "(" + strconv.FormatInt(leasedAfter.UnixMilli(), 10), Max: "+inf"}).Result()
		if err != nil {
			return err
		}
		old = append(old, late...)
		var bad []aside
		for _, m := range old {
			it, _, err := decodeMember(m)
			if err != nil {
				bad = append(bad, aside{member: m, from: f.s.k.inflight(o.Partition), err: err})
				continue
			}
			f.mu.Lock()
			_, leasedHere := f.leases[it.URL]
			f.mu.Unlock()
			if leasedHere || taken[it.URL] {
				continue
			}
			l := Lease{Lease: frontier.Lease{Entry: it.entry(), Attempts: it.Attempts}, Partition: o.Partition, member: m}
			if err := f.s.PutBack(ctx, o, l); err != nil && !errors.Is(err, ErrFenced) && !errors.Is(err, ErrNotInFlight) {
				return err
			}
		}
		if err := f.s.setAside(ctx, o, bad); err != nil && !errors.Is(err, ErrFenced) {
			return err
		}
	}
	return nil
}

// dropLapsed drops the partitions whose lease may have run out at now.
func (f *Frontier) dropLapsed(now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for p, h := range f.parts {
		if h.o.StateAt(now) == Lapsed {
			f.dropLocked(p, "lapsed")
		}
	}
	f.armLapseLocked()
}

// armLapseLocked sets the lapse timer to the earliest stop time of the partitions in use, or
// stops it when none is in use. It requires f.mu to be held.
func (f *Frontier) armLapseLocked() {
	var first time.Time
	for _, h := range f.parts {
		if at := h.o.StopAt(); first.IsZero() || at.Before(first) {
			first = at
		}
	}
	switch {
	case f.lapse.ended || first.IsZero():
		if f.lapse.t != nil {
			f.lapse.t.Stop()
		}
	case f.lapse.t == nil:
		f.lapse.t = time.AfterFunc(time.Until(first), func() { f.dropLapsed(time.Now()) })
	default:
		f.lapse.t.Reset(time.Until(first))
	}
}

// endLapse stops the lapse timer for good; Run calls it as it returns.
func (f *Frontier) endLapse() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lapse.ended = true
	f.armLapseLocked()
}

// sync makes the partitions in use those the keeper holds after a Tick that changed ch, and
// starts draining the surplus.
func (f *Frontier) sync(ctx context.Context, now time.Time, ch Change) {
	owned := map[int]Ownership{}
	for _, o := range f.k.Owned(now) {
		owned[o.Partition] = o
	}
	f.mu.Lock()
	for _, p := range ch.Surplus {
		if h := f.parts[p]; h != nil && h.use == partActive {
			h.use, h.since = partDraining, now
			f.forgetHostsLocked(p)
		}
	}
	for p := range f.parts {
		if _, ok := owned[p]; !ok {
			f.dropLocked(p, "lost or surplus")
		}
	}
	for p, o := range owned {
		if h := f.parts[p]; h != nil && h.o.Epoch == o.Epoch {
			h.o = o // renewed
			continue
		} else if h != nil {
			f.dropLocked(p, "acquired again")
		}
		f.parts[p] = &held{o: o}
		f.heldAt = time.Time{} // read the new partitions at this round
		f.stats.Reacquired++
	}
	f.armLapseLocked()
	f.mu.Unlock()
}

// releaseDrained releases the draining partitions whose requests have all ended, or which
// have drained for a lease TTL (their requests are then cancelled).
func (f *Frontier) releaseDrained(ctx context.Context, now time.Time) {
	f.mu.Lock()
	var draining []int
	for p, h := range f.parts {
		if h.use == partDraining {
			draining = append(draining, p)
		}
	}
	f.mu.Unlock()
	f.putBackBatches(ctx, draining)
	f.mu.Lock()
	busy := map[int]bool{}
	for _, l := range f.leases {
		busy[l.Partition] = true
	}
	var release []int
	for p, h := range f.parts {
		if h.use == partDraining && (!busy[p] || now.Sub(h.since) >= f.s.opts.LeaseTTL) {
			f.dropLocked(p, "surplus")
			release = append(release, p)
		}
	}
	save := f.save
	f.mu.Unlock()
	if len(release) > 0 && save != nil {
		if err := save(); err != nil {
			f.opts.Log.Warn("hosts' learned state not saved before a handover; the next owner starts from the last checkpoint", "err", err)
		}
	}
	for _, p := range release {
		rctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
		if err := f.k.Release(rctx, p); err != nil {
			f.opts.Log.Warn("cannot release a surplus partition; the next tick of the keeper will", "partition", p, "err", err)
		}
		cancel()
	}
}

// dropLocked stops using partition p (f.mu held): its requests are cancelled and its hosts
// forgotten. Leases of p stay recorded: Complete sends their results, which fencing refuses
// if another worker holds p by then.
func (f *Frontier) dropLocked(p int, why string) {
	h := f.parts[p]
	if h == nil {
		return
	}
	if h.cancel != nil {
		h.cancel()
	}
	delete(f.parts, p)
	f.forgetHostsLocked(p)
	f.takeBatchesLocked(p) // in flight in Redis: the partition's next owner reclaims them
	f.stats.Dropped++
	f.opts.Log.Debug("partition dropped", "partition", p, "why", why)
}

// forgetHostsLocked forgets the hosts of partition p (f.mu held).
func (f *Frontier) forgetHostsLocked(p int) {
	for name := range f.hosts.All() {
		if q, ok := f.s.knownPartition(name); !ok || q == p { // an unknown one is listed again if need be
			f.hosts.Forget(name)
		}
	}
}

// fullEvery is how often a worker with URLs in flight (which cannot be idle) reads every
// partition's counters, for Counts; idleEvery is how often one with none reads them, to learn
// promptly that the crawl is over. (Each read is a command per partition.)
const (
	fullEvery = time.Second
	idleEvery = 250 * time.Millisecond
)

// heldEvery is how often a worker reads the counters of every partition it holds, to learn
// of URLs other workers queued there; in between, each round reads only the partitions it
// knows busy (hosts with work, URLs in flight, links to forward).
const heldEvery = time.Second

// heldFields are the counters readHeld reads of each partition in use.
var heldFields = [3]string{"queued", "inflight", "outbox"}

// readHeld reads, in one pipeline, Redis' clock (setting the offset of Redis' clock from the
// local one, at the round trip's midpoint) and the counters and hosts with work of the
// partitions in use: every heldEvery all of them, and in between those known busy. It returns
// the hosts with work it read, by partition.
func (f *Frontier) readHeld(ctx context.Context, now time.Time) (map[int][]string, error) {
	f.mu.Lock()
	all := now.Sub(f.heldAt) >= heldEvery
	busy := map[int]bool{}
	if !all {
		for name, st := range f.hosts.All() {
			if q, ok := f.s.knownPartition(name); ok && st != readyset.Idle {
				busy[q] = true
			}
		}
		for _, l := range f.leases {
			busy[l.Partition] = true
		}
		for p := range f.outboxed {
			busy[p] = true
		}
	}
	ps := make([]int, 0, len(f.parts))
	for p := range f.parts {
		if all || busy[p] {
			ps = append(ps, p)
		}
	}
	f.mu.Unlock()
	if all { // the partitions that never had work have nothing to read
		active, err := f.s.activePartitions(ctx)
		if err != nil {
			return nil, err
		}
		ps = slices.DeleteFunc(ps, func(p int) bool { _, ok := slices.BinarySearch(active, p); return !ok })
	}
	read := make(map[int]PartCounts, len(ps))
	members := make(map[int][]string, len(ps))
	pipe := f.s.rdb.Pipeline()
	clock := pipe.Time(ctx)
	cmds := make([]*redis.SliceCmd, len(ps))
	hosts := make([]*redis.StringSliceCmd, len(ps))
	for i, p := range ps {
		cmds[i] = pipe.HMGet(ctx, f.s.k.counts(p), heldFields[:]...)
		hosts[i] = pipe.SMembers(ctx, f.s.k.hosts(p))
	}
	sent := time.Now()
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("fleet: read counts: %w", err)
	}
	got := time.Now()
	offset := clock.Val().Sub(sent.Add(got.Sub(sent) / 2))
	for i, p := range ps {
		members[p] = hosts[i].Val()
		var n [3]int
		var c PartCounts
		key := f.s.k.counts(p)
		for j, v := range cmds[i].Val() {
			if s, ok := v.(string); ok {
				var good bool
				if n[j], good = countOf(key, heldFields[j], s); !good {
					c.Damaged = append(c.Damaged, badValue(key, heldFields[j], s, "a count").Error())
				}
			}
		}
		c.Queued, c.InFlight, c.Outbox = n[0], n[1], n[2]
		read[p] = c
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.offset = offset
	if all {
		f.held, f.heldAt = read, now
	} else {
		for p := range f.held {
			if f.parts[p] == nil {
				delete(f.held, p)
			}
		}
		maps.Copy(f.held, read)
	}
	for p, c := range read {
		if c.Outbox == 0 {
			delete(f.outboxed, p)
		}
	}
	return members, nil
}

// readCounts reads the crawl's counters.
func (f *Frontier) readCounts(ctx context.Context) error {
	f.mu.Lock()
	marks := f.age.marks // a write from now on may be missing from this read
	f.mu.Unlock()
	ps, err := f.s.PartitionCounts(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.age.mark()
		return err
	}
	f.counts, f.full, f.age.counted = ps, time.Now(), marks
	return nil
}

// countsAge says whether a Frontier's counts may miss a write of its worker (an Add, an
// Exclude, a resend): every such write marks it, and a read of the counts records the marks
// made before it began. Until a read begun after the last mark is in, the counts are stale,
// the read itself in flight included.
type countsAge struct {
	marks   uint64 // writes made
	counted uint64 // marks when the read behind counts began
}

func (a *countsAge) mark()      { a.marks++ }
func (a countsAge) stale() bool { return a.marks != a.counted }

// scanHosts makes ready, of the hosts with work of the partitions in use that have URLs not in
// flight, those new to the worker, drained before (new URLs came), or waiting for a retry while
// new URLs came to their queue. members are the hosts with work readHeld read this round, by
// partition; those of other partitions are read now.
func (f *Frontier) scanHosts(ctx context.Context, members map[int][]string) error {
	f.mu.Lock()
	var ps, unread []Ownership
	for p, h := range f.parts {
		if c := f.held[p]; c.Queued > c.InFlight && h.use == partActive {
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
		if h := f.parts[o.Partition]; h == nil || h.o.Epoch != o.Epoch || h.use != partActive {
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

// retryPutBacks hands back the leases an earlier Release could not.
func (f *Frontier) retryPutBacks(ctx context.Context) {
	f.mu.Lock()
	pending := f.putBack
	f.putBack = nil
	f.mu.Unlock()
	for i, l := range pending {
		err := f.s.PutBack(ctx, l.o, l.Lease)
		switch {
		case errors.Is(err, ErrFenced), errors.Is(err, ErrNotInFlight):
			f.refused(l.URL, err.Error())
		case err != nil:
			f.mu.Lock()
			f.putBack = append(f.putBack, pending[i:]...)
			f.mu.Unlock()
			return
		}
	}
}

// HostContext returns the context requests to host run under: derived from ctx (the same ctx
// on every call of one crawl run), and cancelled when host's partition is dropped. For a host
// of a partition not in use it returns a cancelled context.
func (f *Frontier) HostContext(ctx context.Context, host string) context.Context {
	p, placed := f.partitionOf(host)
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.parts[p]
	if !placed || h == nil || h.o.StateAt(time.Now()) == Lapsed {
		c, cancel := context.WithCancel(ctx)
		cancel()
		return c
	}
	if h.ctx == nil || h.parent != ctx {
		if h.cancel != nil {
			h.cancel()
		}
		h.ctx, h.cancel = context.WithCancel(ctx)
		h.parent = ctx
	}
	return h.ctx
}

// Holds reports whether host is this worker's at local time now: its partition is in use and
// its lease cannot have run out. A request is sent only while it holds.
func (f *Frontier) Holds(host string, now time.Time) bool {
	p, placed := f.partitionOf(host)
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.parts[p]
	return placed && h != nil && h.o.StateAt(now) != Lapsed
}

// partitionOf returns host's partition, asking Redis (bounded by the frontier's timeout) when
// it is not known; placed is false when it cannot be told (Redis unreachable, or a host never
// placed), which callers treat as a partition not in use.
func (f *Frontier) partitionOf(host string) (p int, placed bool) {
	if p, ok := f.s.knownPartition(host); ok {
		return p, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.opts.Timeout)
	defer cancel()
	p, placed, err := f.s.partitionOf(ctx, host)
	return p, placed && err == nil
}

// Add queues the entries not seen before, in whichever partitions they belong to. While Redis
// is unreachable it retries for up to FrontierOptions.Patience.
func (f *Frontier) Add(entries []frontier.Entry) (int, error) {
	var n int
	err := f.retry(func(ctx context.Context) error {
		var err error
		n, err = f.s.Add(ctx, entries)
		return err
	})
	if err == nil {
		fps := make([]uint64, len(entries))
		for i, e := range entries {
			fps[i] = Fingerprint(e.URL)
		}
		f.recent.remember(fps)
	}
	return n, err
}

// Exclude records the exclusions not seen before, retrying as Add does.
func (f *Frontier) Exclude(ex []frontier.Exclusion) error {
	return f.retry(func(ctx context.Context) error { return f.s.Exclude(ctx, ex) })
}

// retry runs an idempotent call until it succeeds or Patience has passed.
func (f *Frontier) retry(call func(ctx context.Context) error) error {
	deadline := time.Now().Add(f.opts.Patience)
	backoff := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), f.opts.Timeout)
		err := call(ctx)
		cancel()
		if err == nil {
			f.mu.Lock()
			f.age.mark()
			f.heldAt = time.Time{} // the partitions in use may have new URLs: read them all
			f.mu.Unlock()
			return nil
		}
		if time.Now().Add(backoff).After(deadline) {
			return err
		}
		sleep(backoff)
		backoff = min(2*backoff, 2*time.Second)
	}
}

// sleep waits d (the only blocking waits of this file are Redis' back-offs).
func sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	<-t.C
}

// TakeReady returns the hosts that became ready since the last call: new to the worker, with
// new URLs, or whose wait is over at now.
func (f *Frontier) TakeReady(now time.Time) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hosts.Take(now)
}

// Ready reports whether host may have a URL ready to lease.
func (f *Frontier) Ready(host string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hosts.IsReady(host)
}

// NextAt returns when a waiting host's wait ends, or the next round of Run when the crawl is
// not over (hosts may gain work there), whichever comes first; zero when neither.
func (f *Frontier) NextAt(now time.Time) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	at := f.hosts.NextWait()
	if !f.idleLocked() {
		if poll := now.Add(f.opts.Refresh); at.IsZero() || poll.Before(at) {
			at = poll
		}
	}
	return at
}

// Lease takes host's next URL from Redis. It returns no lease, and no error, when the host's
// partition is not in use (or lapsed), when the host has nothing ready, and when Redis cannot
// be reached (the host then waits a second). When it returns no lease, Ready(host) is false
// until TakeReady names the host again: a caller that waits for a ready host never waits on
// one that has nothing for it.
func (f *Frontier) Lease(now time.Time, host string) (frontier.Lease, bool, error) {
	p, placed := f.partitionOf(host)
	f.mu.Lock()
	h := f.parts[p]
	if placed && h != nil && h.o.StateAt(now) == Lapsed {
		f.dropLocked(p, "lapsed")
		h = nil
	}
	if !placed || h == nil || h.use != partActive {
		f.hosts.Forget(host)
		f.mu.Unlock()
		return frontier.Lease{}, false, nil
	}
	o := h.o
	b := f.batches[host]
	if b != nil && len(b.ls) > 0 && b.o.Epoch == o.Epoch {
		l := b.ls[0]
		b.ls = b.ls[1:]
		f.leases[l.URL] = leased{Lease: l, o: o}
		f.mu.Unlock()
		f.recent.remember([]uint64{Fingerprint(l.URL)})
		return l.Lease, true, nil
	}
	n := 1
	if b != nil && now.Sub(b.last) < batchWindow {
		n = min(2*b.n, maxTake)
	}
	f.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), f.opts.Timeout)
	ls, next, err := f.s.TakeN(ctx, o, host, n)
	cancel()
	var l Lease
	ok := len(ls) > 0
	if ok {
		l = ls[0]
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case errors.Is(err, ErrFenced):
		if cur := f.parts[p]; cur != nil && cur.o.Epoch == o.Epoch {
			f.dropLocked(p, "fenced")
		} else { // acquired again meanwhile: ask again at the next round
			f.hosts.Wait(host, time.Now().Add(f.opts.Refresh))
		}
		return frontier.Lease{}, false, nil
	case err != nil:
		f.hosts.Wait(host, time.Now().Add(time.Second))
		return frontier.Lease{}, false, nil
	case !ok && next.IsZero():
		f.hosts.Idle(host)
		return frontier.Lease{}, false, nil
	case !ok:
		f.hosts.Wait(host, next.Add(-f.offset))
		return frontier.Lease{}, false, nil
	}
	if cur := f.parts[p]; cur == nil || cur.o.Epoch != o.Epoch {
		// dropped (and perhaps acquired again) while Take ran: the URL stays in flight until
		// the partition's next Acquire reclaims it; the host is asked again at the next round
		f.hosts.Wait(host, time.Now().Add(f.opts.Refresh))
		return frontier.Lease{}, false, nil
	}
	// (a partition that began draining while Take ran keeps this lease until it ends, and
	// puts the rest taken with it back: releaseDrained)
	if f.hosts.State(host) == readyset.Unknown {
		f.hosts.Ready(host)
	}
	f.leases[l.URL] = leased{Lease: l, o: o}
	f.batches[host] = &hostBatch{o: o, ls: ls[1:], n: n, last: now}
	f.recent.remember([]uint64{Fingerprint(l.URL)})
	return l.Lease, true, nil
}

// hostBatch is what the worker took from a host's queue in one call (Store.TakeN) and has not
// handed out yet: those URLs are in flight in Redis. A host leased from often gets bigger
// batches (doubling up to maxTake while each take follows the last within batchWindow); one
// leased from seldom, one URL at a time.
type hostBatch struct {
	o    Ownership
	ls   []Lease
	n    int       // how many the last take asked for
	last time.Time // local time of the last take
}

const (
	maxTake     = 16
	batchWindow = 250 * time.Millisecond
)

// takeBatchesLocked removes and returns the URLs taken but not handed out of partition p's
// hosts (f.mu held).
func (f *Frontier) takeBatchesLocked(p int) []Lease {
	var out []Lease
	for host, b := range f.batches {
		if b.o.Partition == p {
			out = append(out, b.ls...)
			delete(f.batches, host)
		}
	}
	return out
}

// putBackBatches hands the URLs taken but not handed out back to their queues: at the end of
// Run, and for partitions released as surplus. (A partition lost keeps them in flight until
// its next owner reclaims them.)
func (f *Frontier) putBackBatches(ctx context.Context, parts []int) {
	f.mu.Lock()
	type back struct {
		o  Ownership
		ls []Lease
	}
	var backs []back
	for _, p := range parts {
		if h := f.parts[p]; h != nil {
			if ls := f.takeBatchesLocked(p); len(ls) > 0 {
				backs = append(backs, back{h.o, ls})
			}
		}
	}
	f.mu.Unlock()
	for _, b := range backs {
		for _, l := range b.ls {
			rctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
			err := f.s.PutBack(rctx, b.o, l)
			cancel()
			if err != nil && !errors.Is(err, ErrFenced) && !errors.Is(err, ErrNotInFlight) {
				return // Redis unreachable: the partition's next owner reclaims them
			}
		}
	}
}

// Complete stores a Fetched result's page in the worker's store (Join), then records the result
// of l in Redis under the ownership l was leased with: when it returns nil, the page, the URL's
// state and its links are durable (crawler.Frontier), or the result was refused. A result
// refused because the partition is another worker's (fenced) or the URL was reclaimed is
// counted in Stats and returns nil. While Redis is unreachable it retries, for as long as the
// partition may still be this worker's. A Retry's NotBefore is a local time. Results completed
// at once by several goroutines go to Redis together, one script per partition (commits);
// links the worker knows were recorded already are not sent again (recentLinks).
func (f *Frontier) Complete(fl frontier.Lease, r frontier.Result) error {
	f.mu.Lock()
	l, ok := f.leases[fl.URL]
	if r.Kind == frontier.Retry && !r.NotBefore.IsZero() {
		r.NotBefore = r.NotBefore.Add(f.offset)
	}
	f.mu.Unlock()
	if !ok {
		f.refused(fl.URL, "not leased")
		return nil
	}
	if err := f.storePage(fl, r); err != nil {
		return err
	}
	r.Page = nil // stored; Redis takes the URL's state and links
	r, sent := f.recent.filter(r)
	out := f.commits.commit(f, &pending{l: l, r: r, sent: sent})
	f.forget(l)
	if out.kind == refused {
		f.refused(l.URL, out.why)
		return nil
	}
	if f.linksElsewhere(l.Partition, r) {
		f.mu.Lock()
		f.outboxed[l.Partition] = true
		f.mu.Unlock()
	}
	f.count(l.Host, r)
	return nil
}

// linksElsewhere reports whether r has links or exclusions of partitions other than p: those
// go to p's outbox (CompleteBatch), for Forward.
func (f *Frontier) linksElsewhere(p int, r frontier.Result) bool {
	for _, e := range r.Links {
		if !f.s.ownLink(p, e.Host) {
			return true
		}
	}
	for _, x := range r.Excluded {
		if !f.s.ownLink(p, x.Host) {
			return true
		}
	}
	return false
}

// mayHold reports whether o's partition may still be this worker's at local time at.
func (f *Frontier) mayHold(o Ownership, at time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.parts[o.Partition]
	return h != nil && h.o.Epoch == o.Epoch && h.o.StateAt(at) != Lapsed
}

// leasedUnder is how many of the worker's leases (handed out, their results not yet recorded)
// were leased under ownership o.
func (f *Frontier) leasedUnder(o Ownership) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, l := range f.leases {
		if l.o.Partition == o.Partition && l.o.token == o.token {
			n++
		}
	}
	return n
}

func (f *Frontier) forget(l leased) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.leases, l.URL)
}

// count adds a result this worker recorded to its host's counters.
func (f *Frontier) count(host string, r frontier.Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.done[host]
	if c == nil {
		c = &frontier.HostCount{Host: host}
		f.done[host] = c
	}
	switch r.Kind {
	case frontier.Fetched:
		c.Fetched++
		f.pages++
	case frontier.Failed:
		c.Failed++
		c.LastError = termsafe.Escape(r.Detail)
	case frontier.Excluded:
		c.Excluded++
	}
}

func (f *Frontier) refused(url, why string) {
	f.mu.Lock()
	f.stats.Refused++
	f.stats.LastRefused = url + ": " + why
	f.mu.Unlock()
	f.opts.Log.Warn("result refused: the URL is another worker's now", "url", url, "why", why)
}

// Release hands l back to its host's queue unchanged. When Redis cannot take it now, Run
// retries while the partition is this worker's.
func (f *Frontier) Release(fl frontier.Lease) {
	f.mu.Lock()
	l, ok := f.leases[fl.URL]
	delete(f.leases, fl.URL)
	if ok && f.hosts.State(fl.Host) != readyset.Unknown {
		f.hosts.Ready(fl.Host)
	}
	f.mu.Unlock()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.opts.Timeout)
	err := f.s.PutBack(ctx, l.o, l.Lease)
	cancel()
	switch {
	case errors.Is(err, ErrFenced), errors.Is(err, ErrNotInFlight):
		f.refused(l.URL, err.Error())
	case err != nil:
		f.mu.Lock()
		f.putBack = append(f.putBack, l)
		f.mu.Unlock()
	}
}

// Counts returns the crawl's counters (all workers) as of Run's last read of every partition
// (at most a second old), or read now if this worker added URLs since. Before any read
// succeeded it reads, retrying while Redis does not answer for up to
// FrontierOptions.Patience: zeros read as "nothing to resume" are not served for a failure.
func (f *Frontier) Counts() frontier.Counts {
	f.mu.Lock()
	dirty, never := f.age.stale(), f.counts == nil
	f.mu.Unlock()
	if never {
		_ = f.retry(f.readCounts)
	} else if dirty {
		ctx, cancel := context.WithTimeout(context.Background(), f.opts.Timeout)
		_ = f.readCounts(ctx) // on failure the last counts serve
		cancel()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts.Sum()
}

// Hosts returns the hosts this worker crawled or holds, with the results it recorded for each
// and the URLs it has in flight (the crawl's per-host counters are not kept in Redis).
func (f *Frontier) Hosts() []frontier.HostCount {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := make(map[string]frontier.HostCount, len(f.done)+f.hosts.Len())
	for name, c := range f.done {
		m[name] = *c
	}
	for name := range f.hosts.All() {
		if _, ok := m[name]; !ok {
			m[name] = frontier.HostCount{Host: name}
		}
	}
	for _, l := range f.leases {
		c := m[l.Host]
		c.Host = l.Host
		c.InFlight++
		c.Queued++
		m[l.Host] = c
	}
	out := make([]frontier.HostCount, 0, len(m))
	for _, c := range m {
		out = append(out, c)
	}
	return out
}

// Idle reports whether the whole crawl is over: at Run's last read of every partition nothing
// was queued, delayed, in flight or in an outbox in any of them, this worker added nothing
// since, and it holds no lease and no link left out that a Redis restart may have lost
// (watchServers).
func (f *Frontier) Idle() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.idleLocked()
}

func (f *Frontier) idleLocked() bool {
	return f.counts != nil && !f.age.stale() && f.counts.Idle() && len(f.leases) == 0 && len(f.putBack) == 0 &&
		f.resend.len() == 0 && !f.recent.pending()
}
