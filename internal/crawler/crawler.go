package crawler

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"net/netip"
	"net/url"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crawl-project/crawl/aimd"
	"github.com/crawl-project/crawl/fetch"
	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/hostlimit"
	"github.com/crawl-project/crawl/internal/netguard"
	"github.com/crawl-project/crawl/internal/retry"
	"github.com/crawl-project/crawl/internal/urlnorm"
	"github.com/crawl-project/crawl/robots"
	"github.com/crawl-project/crawl/storage"
)

// activeHostsPerWorker and minActiveHosts bound the hosts in play at once (see schedule): enough
// that hosts held at a few requests a second keep every worker busy.
const (
	activeHostsPerWorker = 64
	minActiveHosts       = 1024
)

// flushEvery is how often the hosts' learned state is saved while a crawl runs. At every status
// tick the hosts idle for hostIdle leave memory (their gates' state, robots.txt and pages wait
// in the store), so that memory follows the hosts being crawled, not every host ever seen.
const (
	flushEvery = 5 * time.Second
	hostIdle   = 3 * time.Second
)

// ErrInterrupted is returned by Run when its context was cancelled before the crawl finished.
// Everything fetched so far is committed; running the crawl again resumes it.
var ErrInterrupted = errors.New("crawl interrupted")

// ErrUsage is returned (wrapped) by Open when the configuration does not fit the store: a
// --scope other than the one the store was crawled with, or no seeds for a store that holds no
// URL to resume. The command line should say so and exit as for a usage error.
var ErrUsage = errors.New("usage error")

// Crawler is one crawl over one data directory. Open it, Run it once, Close it.
type Crawler struct {
	cfg Config
	log *slog.Logger
	db  *storage.DB
	// learned is what Config.LearnedFrom names; nil without it.
	learned learnedSource
	fr      Frontier
	shared  Shared  // nil: the frontier, host state and scope are the store's own
	urlLog  *urlLog // --log-urls (nil: none)
	reg     *hostlimit.Registry
	client  *fetch.Client
	agent   string // robots.txt product token from the user agent

	scope Scope // fixed after Open; a shared crawl's may widen while it runs (scopeNow)
	// wider is the scope widened by seeds added to a shared crawl while it runs (nil: scope);
	// set by the dispatcher (widenScope), read by the jobs.
	wider     atomic.Pointer[Scope]
	scopeRead time.Time // dispatcher-owned: when tick last widened the scope
	// typesChanged: this run's --accept-type differs from the stored one, so the URLs
	// excluded by type are fetched again (set by settle, during Open).
	typesChanged bool

	rndMu sync.Mutex
	rnd   *rand.Rand

	global *retry.Budget

	// mu guards hosts and the records' fields but robots (see hostRecord). Lock order: mu
	// before a record's budget's own lock; a record's robots lock is never taken under mu.
	mu    sync.Mutex
	hosts map[string]*hostRecord // made in Open; records made by hostLocked, dropped by dropIdleHosts
	// answers is how each host answered lately (hostAnswers), kept whether or not its record
	// is still held. Guarded by mu; made on first use.
	answers map[string]*hostAnswers
	gates   *gateKeys       // host → key of its gate in reg (gatekey.go)
	res     *fetch.Resolver // looks host names up, for the client, the guard and the gates

	// dispatcher-owned
	inflight int
	fetching int        // page fetches in flight, for --max-pages
	pages    pageBudget // what counts against --max-pages (requisites.go)
	sched    *schedule  // the hosts with ready work, and when to ask them
	held     []string   // gates whose rate alone refused a ready request in this pass

	ob observation // counters, samples and events for watching the crawl (observe.go)

	sitemaps sitemapBudget   // what the hosts' sitemaps spent in this run (budgets.go)
	chains   requisiteChains // requisites taken from requisites in this run (budgets.go)

	changes []Change         // settings this run changed from the stored ones (settings.go)
	revised frontier.Revised // what the changes did to URLs already seen
	recrawl recrawlPlan      // which fetched URLs settle revisits
	failed  failedHosts      // hosts whose failure was announced (failures.go)

	unreachable   failedHosts     // hosts whose unreachable robots.txt was announced (failures.go)
	robotsWaiting map[string]bool // dispatcher-owned: hosts waiting to check an unreachable robots.txt again
	idleTold      map[string]bool // dispatcher-owned: hosts the crawl was told it waits for, with nothing else left

	start    RunStart // set by Open
	runTally runTally // this run's page fetches (runtally.go)

	renders renderState // --render: the browser and what rendered pages fetched (render.go)
}

// Open opens (or creates) the store in cfg.Dir, widens the scope with cfg.Seeds and enqueues
// them. Seeds already seen are not enqueued again, so Open on an existing store resumes.
func Open(cfg Config) (*Crawler, error) { return open(cfg, nil) }

// OpenWith opens a crawl whose frontier is fr rather than the store's own. If fr is Shared (a
// worker of a crawl shared by several), the store in cfg.Dir keeps this worker's pages and fr
// the rest, and cfg.Seeds, if any, are added to the shared crawl.
func OpenWith(cfg Config, fr Frontier) (*Crawler, error) {
	if fr == nil {
		return nil, errors.New("crawler: OpenWith needs a frontier")
	}
	return open(cfg, fr)
}

func open(cfg Config, fr Frontier) (*Crawler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var learned learnedSource
	if cfg.LearnedFrom != "" {
		var err error
		if learned, err = openLearned(cfg.LearnedFrom, cfg.Dir); err != nil {
			return nil, err
		}
	}
	c, err := openStore(cfg, fr, learned)
	if err != nil && learned != nil {
		learned.Close()
	}
	return c, err
}

// openStore is open with what Config.LearnedFrom names opened (nil without it).
func openStore(cfg Config, fr Frontier, learned learnedSource) (*Crawler, error) {
	db, err := storage.Open(cfg.Dir, &storage.Options{Timeout: 200 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	if fr == nil {
		if fr, err = frontier.Open(db, &frontier.Options{HostBudget: cfg.MaxHostPages}); err != nil {
			db.Close()
			return nil, err
		}
	}
	sh, _ := fr.(Shared)
	var states hostlimit.StateStore = db
	if sh != nil {
		states = sh.HostStates()
	}
	if learned != nil {
		states = learnedStates{own: states, learned: learned}
	}
	res := fetch.NewResolver(fetch.ResolverConfig{Server: cfg.DNSServer})
	c := &Crawler{
		cfg:     cfg,
		log:     cfg.logger(),
		db:      db,
		learned: learned,
		fr:      fr,
		shared:  sh,
		agent:   cmp.Or(cfg.RobotsAgent, robots.AgentToken(cfg.UserAgent)),
		rnd:     rand.New(rand.NewSource(time.Now().UnixNano())),
		global:  retry.NewBudget(retry.BudgetConfig{}, time.Now()),
		hosts:   map[string]*hostRecord{},

		robotsWaiting: map[string]bool{},
		idleTold:      map[string]bool{},
		sched:         newSchedule(max(activeHostsPerWorker*cfg.Workers, minActiveHosts)),
		gates:         newGateKeys(cfg.KeyByIP, res.LookupNetIP),
		res:           res,
	}
	c.sitemaps.lim = cfg.Sitemap.orDefaults()
	if cfg.URLLog != nil {
		c.urlLog = newURLLog(cfg.URLLog, c.log)
	}
	c.reg = hostlimit.New(hostlimit.Config{AIMD: aimd.Config{
		InitialRate: cfg.InitialRate, MinRate: cfg.MinRate, MaxRate: cfg.MaxRate,
		MaxWindow: cfg.HostConcurrency,
	}, DemandByCaller: true, IdleEvict: hostIdle, MaxWindowOf: maxWindows(cfg)}, states)
	if sh != nil {
		if err := c.checkCrawlSettings(); err != nil {
			db.Close()
			return nil, err
		}
	}
	if err := c.loadScope(); err != nil {
		db.Close()
		return nil, err
	}
	guard, err := c.guard(cfg.Seeds)
	if err != nil {
		db.Close()
		return nil, err
	}
	if err := c.allowProxies(guard); err != nil {
		db.Close()
		return nil, err
	}
	auth := withAuth(cfg.Net.BasicAuth) // addSeeds adds the seeds' user:password@
	c.client = fetch.New(fetch.Config{UserAgent: cfg.UserAgent, Timeout: cfg.Timeout, MaxBody: cfg.MaxBody,
		DialControl: c.netScope(guard).Control, Resolver: res, Proxy: cfg.Net.Proxy, TLS: cfg.Net.TLS, Header: cfg.Net.Header, HostHeader: cfg.Net.HostHeader,
		BasicAuth: auth, Jar: cfg.Net.Jar})
	c.start.Kind = SharedWorker
	if sh == nil {
		cn := c.fr.Counts()
		c.start.Found = Figures{cn.Fetched, cn.Failed, cn.Excluded, cn.Queued}
		if c.start.Kind = NewCrawl; cn.Queued+cn.Fetched+cn.Failed+cn.Excluded > 0 {
			c.start.Kind = Resumed
		}
	}
	if err := c.addSeeds(cfg.Seeds, auth); err != nil {
		db.Close()
		return nil, err
	}
	if sh == nil {
		c.changes, c.revised, err = c.settle()
	} else if len(cfg.Seeds) == 0 {
		err = c.saveScope() // learn the scope the other workers' seeds set
	} else {
		_, err = sh.Settle(SeededName, "1") // the crawl holds URLs: workers without seeds may start
	}
	if err == nil && sh != nil {
		err = c.saveSharedCrawl()
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	c.warnUnmatchedHosts()
	cn := c.fr.Counts()
	c.start.Opened = Figures{cn.Fetched, cn.Failed, cn.Excluded, cn.Queued}
	if c.holdsNothing(len(cfg.Seeds) > 0, cn) {
		// e.g. the first run was killed before its seeds were committed
		db.Close()
		where := cfg.Dir
		if sh != nil {
			where = "the shared crawl"
		}
		return nil, fmt.Errorf("%s holds no URL to resume; give seed URLs or --seeds FILE (%w)", where, ErrUsage)
	}
	if sh != nil {
		sh.Join(db, c.SaveHostStates)
	}
	return c, nil
}

// holdsNothing reports whether the crawl, with counts cn, holds no URL at all. A shared crawl
// just given seeds holds them (its Add returned nil) whatever cn says: its counts come from
// Redis, and a read that failed leaves them empty.
func (c *Crawler) holdsNothing(seeded bool, cn frontier.Counts) bool {
	if c.shared != nil && seeded {
		return false
	}
	return cn.Queued+cn.Fetched+cn.Failed+cn.Excluded == 0
}

// guard builds the SSRF guard: non-public address blocks are refused at dial time unless a seed
// is on one (then its block is in scope, for this and every later run of the store) or
// --allow-private-networks is given.
func (c *Crawler) guard(seeds []string) (*netguard.Guard, error) {
	g := &netguard.Guard{AllowAll: c.cfg.AllowPrivate}
	if c.shared != nil {
		return c.sharedGuard(g, seeds)
	}
	var saved []string
	if b, ok, err := c.db.Meta("private-ranges"); err != nil {
		return nil, err
	} else if ok {
		if err := json.Unmarshal(b, &saved); err != nil {
			return nil, c.db.Damage(fmt.Sprintf("its private-ranges record does not decode: %v", err))
		}
	}
	for _, s := range saved {
		if p, err := netip.ParsePrefix(s); err == nil {
			g.Allowed = append(g.Allowed, p)
		}
	}
	n := len(g.Allowed)
	hosts := map[string]bool{}
	for _, s := range seeds {
		if u, err := url.Parse(s); err == nil {
			hosts[u.Hostname()] = true
		}
	}
	for a := range seedAddrs(c.res, hosts) {
		g.Allow(a)
	}
	if len(g.Allowed) > n {
		saved = saved[:0]
		for _, p := range g.Allowed {
			saved = append(saved, p.String())
		}
		b, _ := json.Marshal(saved)
		if err := c.db.PutMeta("private-ranges", b); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// seedLookups is how many seed host names seedAddrs looks up at once.
const seedLookups = 64

// seedAddrs returns the addresses the seeds' hosts stand for: an IP literal itself, a name what
// res says within a few seconds (nothing if the lookup fails; the crawl then reports the host's
// failure when it fetches it). Names are looked up seedLookups at a time.
func seedAddrs(res *fetch.Resolver, hosts map[string]bool) map[netip.Addr]bool {
	var mu sync.Mutex
	out := map[netip.Addr]bool{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, seedLookups)
	for host := range hosts {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			addrs, _ := res.LookupNetIP(ctx, host)
			mu.Lock()
			defer mu.Unlock()
			for _, a := range addrs {
				out[a] = true
			}
		})
	}
	wg.Wait()
	return out
}

// SaveHostStates saves every in-memory host's learned state through the state store now. A
// shared frontier calls it before it hands hosts to another worker (Shared.Join).
func (c *Crawler) SaveHostStates() error { return c.reg.Flush() }

// Close saves learned host state and closes the store.
func (c *Crawler) Close() error {
	c.client.CloseIdle()
	err := c.reg.Flush()
	if cerr := c.db.Close(); err == nil {
		err = cerr
	}
	if c.learned != nil {
		if cerr := c.learned.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

type scopeMeta struct {
	Mode    string   `json:"mode"`
	Allowed []string `json:"allowed"`
}

// loadScope restores the scope a previous run of this store used, so a resume without --seeds
// keeps crawling the same hosts. A run with the other --scope derives its allowed set from the
// seeds: their registrable domains, or their hosts.
func (c *Crawler) loadScope() error {
	c.scope = Scope{Mode: c.cfg.Scope, Include: c.cfg.Include, Exclude: c.cfg.Exclude, DenyExt: c.cfg.DenyExt, Allowed: map[string]bool{}}
	if c.shared != nil {
		return nil // saveScope merges this worker's seeds with the shared crawl's
	}
	b, ok, err := c.db.Meta("scope")
	if err != nil || !ok {
		return err
	}
	var m scopeMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return c.db.Damage(fmt.Sprintf("its scope record does not decode: %v", err))
	}
	if m.Mode != c.cfg.Scope {
		hosts, err := c.seedHosts()
		if err != nil {
			return err
		}
		for _, h := range hosts {
			c.scope.AddSeed(&url.URL{Host: h})
		}
		return c.saveScope()
	}
	for _, k := range m.Allowed {
		c.scope.Allowed[k] = true
	}
	return nil
}

// saveScope stores the scope, for the next run (a shared crawl's: merges it with the other
// workers').
func (c *Crawler) saveScope() error {
	if c.shared != nil {
		return c.mergeScope()
	}
	m := scopeMeta{Mode: c.scope.Mode}
	for k := range c.scope.Allowed {
		m.Allowed = append(m.Allowed, k)
	}
	sort.Strings(m.Allowed)
	b, _ := json.Marshal(m)
	return c.db.PutMeta("scope", b)
}

// addSeeds widens the scope with seeds and enqueues them, their credentials moved to auth.
func (c *Crawler) addSeeds(seeds []string, auth map[string]*url.Userinfo) error {
	if len(seeds) == 0 {
		return nil
	}
	var entries []frontier.Entry
	var excluded []frontier.Exclusion
	for _, s := range seeds {
		u, err := urlnorm.Parse(s)
		if err != nil {
			return fmt.Errorf("seed %q: %w", s, err)
		}
		takeUser(u, auth)
		c.scope.AddSeed(u)
		e := frontier.Entry{URL: u.String(), Host: urlnorm.HostKey(u)}
		if r := c.scope.Check(u); r != "" {
			excluded = append(excluded, frontier.Exclusion{Entry: e, Reason: r, Detail: "seed matches --include/--exclude"})
			continue
		}
		entries = append(entries, e)
	}
	if err := c.saveScope(); err != nil {
		return err
	}
	if len(excluded) > 0 {
		if err := c.fr.Exclude(excluded); err != nil {
			return err
		}
	}
	for len(entries) > 0 {
		n := min(len(entries), seedChunk)
		if _, err := c.fr.Add(entries[:n]); err != nil {
			return err
		}
		entries = entries[n:]
	}
	return nil
}

// seedChunk is how many seeds addSeeds enqueues per transaction, so that a seed list of a
// million sites never builds one transaction of that size in memory. A run killed meanwhile
// keeps the chunks committed; the same seed file given again adds the rest.
var seedChunk = 10_000

// jobDone is what a finished job reports to the dispatcher.
type jobDone struct {
	page bool   // it was a page fetch (counts against --max-pages until committed)
	host string // its host
	gate string // the gate of its host: hosts waiting for that gate may go on
	err  error  // a store failure: the crawl must stop
}

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

// job is the work dispatch hands to a goroutine: a page fetch, a robots.txt fetch, or a
// frontier update for a URL that is not fetched. The zero job is no work.
type job struct {
	page bool         // a page fetch (counts against --max-pages until committed)
	host string       // its host
	gate string       // its host's gate
	run  func() error // returns a store failure
}

// dispatch hands ready work to new jobs, asking the hosts of the schedule in turn while workers
// are free, at most pages page fetches (-1: any number), and returns how many jobs it started
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

// robotsUnreachableJob fails host's next URL: its robots.txt stayed unreachable.
func (c *Crawler) robotsUnreachableJob(now time.Time, host string, rs *robotsState) (job, time.Time, error) {
	return c.failNextJob(now, host, "robots-unreachable", func(frontier.Lease) string {
		return fmt.Sprintf("robots.txt unreachable after %d tries: %s", rs.failures(), rs.lastProblem())
	})
}

// robotsJob fetches host's robots.txt once its gate admits a request, with the scheme its
// next URL has.
func (c *Crawler) robotsJob(fetchCtx context.Context, now time.Time, host, gate string, rs *robotsState) (job, time.Time, error) {
	t, readyAt := c.tryAdmit(now, host, gate)
	if t == nil {
		return job{}, readyAt, nil
	}
	l, ok, err := c.fr.Lease(now, host) // to learn the scheme the host is crawled with
	if err != nil || !ok {
		giveBack(t, now)
		return job{}, time.Time{}, err
	}
	c.fr.Release(l)
	scheme := "http"
	if u, err := url.Parse(l.URL); err == nil && !rs.httpOnly() {
		scheme = u.Scheme
	}
	rs.setPending()
	return job{run: func() error { return c.fetchRobots(fetchCtx, host, scheme, t) }}, time.Time{}, nil
}

// pageJob fetches host's next URL once its gate admits a request. A URL robots.txt disallows
// (learned too late to exclude it when it was enqueued, e.g. a seed) is excluded instead, and
// the admitted slot given back.
func (c *Crawler) pageJob(fetchCtx context.Context, now time.Time, host, gate string, rs *robotsState) (job, time.Time, error) {
	t, readyAt := c.tryAdmit(now, host, gate)
	if t == nil {
		return job{}, readyAt, nil
	}
	l, ok, err := c.fr.Lease(now, host)
	if err != nil || !ok {
		giveBack(t, now)
		return job{}, time.Time{}, err
	}
	u, err := url.Parse(l.URL)
	if err != nil { // cannot happen: the frontier holds normalized URLs
		giveBack(t, now)
		return job{run: func() error {
			return c.complete(l, frontier.Result{Kind: frontier.Failed, Reason: "bad-url", Detail: err.Error()})
		}}, time.Time{}, nil
	}
	if u.Scheme == "https" && rs.httpOnly() {
		giveBack(t, now)
		return job{run: func() error { return c.overHTTP(l, u) }}, time.Time{}, nil
	}
	if c.shared != nil && l.Depth == 0 && l.Parent == "" && c.scopeNow().Check(u) == frontier.ReasonScope {
		c.widenScope() // a seed added to the shared crawl since the last widening: its links are in scope
	}
	return job{page: c.countsAgainstBudget(l), run: func() error {
		// Asked in the job, not by the dispatcher: a verdict costs time linear in the host's
		// rules (robots.Robots.Test), which is this host's to spend, not every host's.
		if v := rs.test(c.agent, u); !v.Allowed {
			giveBack(t, time.Now())
			return c.complete(l, frontier.Result{Kind: frontier.Excluded, Reason: "robots", Detail: ruleDetail(v)})
		}
		return c.fetchPage(fetchCtx, l, u, t)
	}}, time.Time{}, nil
}

// overHTTP queues the http twin of l, an https URL of a host that answers over http only
// (storage.RobotsEntry.HTTPOnly), and records l as excluded for it.
func (c *Crawler) overHTTP(l frontier.Lease, u *url.URL) error {
	twin := *u
	twin.Scheme = "http"
	e := l.Entry
	e.URL = twin.String()
	if _, err := c.fr.Add([]frontier.Entry{e}); err != nil {
		return err
	}
	return c.fr.Complete(l, frontier.Result{Kind: frontier.Excluded, Reason: "http-fallback",
		Detail: "https does not answer; crawled as " + e.URL})
}

// giveBack returns an admitted ticket whose request was never sent.
func giveBack(t *hostlimit.Ticket, now time.Time) {
	t.Done(now, aimd.Outcome{Signal: aimd.Neutral, Sent: now})
}

func ruleDetail(v robots.Verdict) string {
	if v.Rule == "" {
		return "robots.txt disallows all (unreachable)"
	}
	return fmt.Sprintf("%s (line %d)", v.Rule, v.Line)
}

// retryDelay computes the wait before another attempt, under c.rndMu since rand.Rand is not
// safe for concurrent use.
func (c *Crawler) retryDelay(attempt int, retryAfter time.Duration) time.Duration {
	c.rndMu.Lock()
	defer c.rndMu.Unlock()
	return c.cfg.Retry.Delay(attempt, retryAfter, c.rnd)
}

// maxWindows are the per-host concurrency caps of --hosts-config, by gate key: none with
// --key-by-ip, whose gates are keyed by address.
func maxWindows(cfg Config) map[string]int {
	if cfg.KeyByIP {
		return nil
	}
	m := map[string]int{}
	for host, p := range cfg.Hosts {
		if p.MaxConcurrency > 0 {
			m[host] = p.MaxConcurrency
		}
	}
	return m
}
