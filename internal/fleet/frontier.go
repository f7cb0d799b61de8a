package fleet

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/readyset"
	"github.com/crawl-project/crawl/storage"
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
	// Fixed by NewFrontier. Store, Keeper, recentLinks and commits are safe for concurrent use.
	s       *Store
	k       *Keeper
	opts    FrontierOptions
	recent  *recentLinks // URLs known recorded: their links are not sent again
	commits *commits     // results being committed, grouped by ownership

	// mu guards every field below it but rounds. It is never held across a call to Redis.
	// Lock order: commits.mu, then mu, then the locks of recentLinks and of the Store's
	// placements (taken while mu is held, never the other way).
	mu sync.Mutex

	parts partTable // partitions in use: held, draining, lapsing (partitions.go)
	// hosts of the partitions in use that had work: Ready (Lease asks Redis), Waiting (a
	// retry's time or a back-off, local time) or Idle (nothing queued or delayed when asked)
	hosts    readyset.Set
	inflight inFlight // URLs taken from Redis and not recorded yet (inflight.go)
	view     readings // what Run last read of Redis: counters and clock (readings.go)
	resend   dropped  // links left out before a Redis restart was found, to send again (run.go)

	// This worker's results (results.go).
	stats FrontierStats
	done  map[string]*frontier.HostCount // results this worker recorded, by host
	pages int64                          // pages this worker fetched and completed

	// Join's: the worker's store, for pages, and what checkpoints hosts' learned state.
	store *storage.DB
	save  func() error

	rounds rounds // Run's own, from one round to the next: no lock (run.go)
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
		recent: newRecentLinks(opts.RecentLinks), commits: newCommits(),
		parts:    partTable{inUse: map[int]*held{}},
		inflight: inFlight{leases: map[string]leased{}, batches: map[string]*hostBatch{}},
		view:     readings{held: map[int]PartCounts{}, outboxed: map[int]bool{}},
		done:     map[string]*frontier.HostCount{},
		rounds:   rounds{forwarded: map[int]time.Time{}},
	}
}

// Add queues the entries not seen before, in whichever partitions they belong to, and reports
// how many it queued at once (Store.Add: those of partitions the worker holds; the others go
// to their owners' inboxes). While Redis is unreachable it retries for up to
// FrontierOptions.Patience.
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
			f.view.age.mark()
			f.view.heldAt = time.Time{} // the partitions in use may have new URLs: read them all
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
