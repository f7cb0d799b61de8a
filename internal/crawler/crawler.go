package crawler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"net"
	"net/netip"
	"net/url"
	"sort"
	"sync"
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

// flushEvery is how often the hosts' learned state is saved while a crawl runs.
const flushEvery = 10 * time.Second

// ErrInterrupted is returned by Run when its context was cancelled before the crawl finished.
// Everything fetched so far is committed; running the crawl again resumes it.
var ErrInterrupted = errors.New("crawl interrupted")

// ErrUsage is returned (wrapped) by Open when the configuration does not fit the store: a
// --scope other than the one the store was crawled with, or no seeds for a store that holds no
// URL to resume. The command line should say so and exit as for a usage error.
var ErrUsage = errors.New("usage error")

// Crawler is one crawl over one data directory. Open it, Run it once, Close it.
type Crawler struct {
	cfg    Config
	log    *slog.Logger
	db     *storage.DB
	fr     Frontier
	reg    *hostlimit.Registry
	client *fetch.Client
	agent  string // robots.txt product token from the user agent

	scope Scope // fixed after Open

	rndMu sync.Mutex
	rnd   *rand.Rand

	global *retry.Budget

	// mu guards hosts and the records' fields but robots (see hostRecord). Lock order: mu
	// before a record's budget's own lock; a record's robots lock is never taken under mu.
	mu    sync.Mutex
	hosts map[string]*hostRecord // made in Open; records made by hostLocked, never dropped
	gates *gateKeys              // host → key of its gate in reg (gatekey.go)

	// dispatcher-owned
	inflight int
	fetching int // page fetches in flight, for --max-pages
	rr       int // round-robin offset over ready hosts

	ob observation // counters, samples and events for watching the crawl (observe.go)
}

// Open opens (or creates) the store in cfg.Dir, widens the scope with cfg.Seeds and enqueues
// them. Seeds already seen are not enqueued again, so Open on an existing store resumes.
func Open(cfg Config) (*Crawler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	db, err := storage.Open(cfg.Dir, &storage.Options{Timeout: 200 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	fr, err := frontier.Open(db, &frontier.Options{HostBudget: cfg.MaxHostPages})
	if err != nil {
		db.Close()
		return nil, err
	}
	c := &Crawler{
		cfg:    cfg,
		log:    cfg.logger(),
		db:     db,
		fr:     fr,
		agent:  robots.ProductToken(cfg.UserAgent),
		rnd:    rand.New(rand.NewSource(time.Now().UnixNano())),
		global: retry.NewBudget(retry.BudgetConfig{}, time.Now()),
		hosts:  map[string]*hostRecord{},
		gates:  newGateKeys(cfg.KeyByIP),
	}
	c.reg = hostlimit.New(hostlimit.Config{AIMD: aimd.Config{
		InitialRate: cfg.InitialRate, MinRate: cfg.MinRate, MaxRate: cfg.MaxRate,
		MaxWindow: cfg.HostConcurrency,
	}, KeyByIP: cfg.KeyByIP}, db)
	if err := c.loadScope(); err != nil {
		db.Close()
		return nil, err
	}
	guard, err := c.guard(cfg.Seeds)
	if err != nil {
		db.Close()
		return nil, err
	}
	c.client = fetch.New(fetch.Config{UserAgent: cfg.UserAgent, Timeout: cfg.Timeout, MaxBody: cfg.MaxBody, DialControl: guard.Control})
	if err := c.addSeeds(cfg.Seeds); err != nil {
		db.Close()
		return nil, err
	}
	if cn := fr.Counts(); cn.Queued+cn.Fetched+cn.Failed+cn.Excluded == 0 {
		// e.g. the first run was killed before its seeds were committed
		db.Close()
		return nil, fmt.Errorf("%s holds no URL to resume; give --seeds FILE (%w)", cfg.Dir, ErrUsage)
	}
	return c, nil
}

// guard builds the SSRF guard: non-public address blocks are refused at dial time unless a seed
// is on one (then its block is in scope, for this and every later run of the store) or
// --allow-private-networks is given.
func (c *Crawler) guard(seeds []string) (*netguard.Guard, error) {
	g := &netguard.Guard{AllowAll: c.cfg.AllowPrivate}
	var saved []string
	if b, ok, err := c.db.Meta("private-ranges"); err != nil {
		return nil, err
	} else if ok {
		if err := json.Unmarshal(b, &saved); err != nil {
			return nil, fmt.Errorf("store %s: bad private-ranges record: %w", c.cfg.Dir, err)
		}
	}
	for _, s := range saved {
		if p, err := netip.ParsePrefix(s); err == nil {
			g.Allowed = append(g.Allowed, p)
		}
	}
	n := len(g.Allowed)
	for _, s := range seeds {
		u, err := url.Parse(s)
		if err != nil {
			continue
		}
		for _, a := range seedAddrs(u.Hostname()) {
			g.Allow(a)
		}
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

// seedAddrs returns the addresses a seed's host stands for: itself if it is an IP literal,
// else what DNS says within a few seconds (nothing if the lookup fails; the crawl then reports
// the host's failure when it fetches it).
func seedAddrs(host string) []netip.Addr {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	addrs, _ := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	return addrs
}

// Close saves learned host state and closes the store.
func (c *Crawler) Close() error {
	c.client.CloseIdle()
	err := c.reg.Flush()
	if cerr := c.db.Close(); err == nil {
		err = cerr
	}
	return err
}

type scopeMeta struct {
	Mode    string   `json:"mode"`
	Allowed []string `json:"allowed"`
}

// loadScope restores the scope a previous run of this store used, so a resume without --seeds
// keeps crawling the same hosts.
func (c *Crawler) loadScope() error {
	c.scope = Scope{Mode: c.cfg.Scope, Include: c.cfg.Include, Exclude: c.cfg.Exclude, Allowed: map[string]bool{}}
	b, ok, err := c.db.Meta("scope")
	if err != nil || !ok {
		return err
	}
	var m scopeMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("store %s: bad scope record: %w", c.cfg.Dir, err)
	}
	if m.Mode != c.cfg.Scope {
		return fmt.Errorf("store %s was crawled with --scope %s; run it again with --scope %s (%w)", c.cfg.Dir, m.Mode, m.Mode, ErrUsage)
	}
	for _, k := range m.Allowed {
		c.scope.Allowed[k] = true
	}
	return nil
}

func (c *Crawler) addSeeds(seeds []string) error {
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
		c.scope.AddSeed(u)
		e := frontier.Entry{URL: u.String(), Host: urlnorm.HostKey(u)}
		if r := c.scope.Check(u); r != "" {
			excluded = append(excluded, frontier.Exclusion{Entry: e, Reason: r, Detail: "seed matches --include/--exclude"})
			continue
		}
		entries = append(entries, e)
	}
	m := scopeMeta{Mode: c.scope.Mode}
	for k := range c.scope.Allowed {
		m.Allowed = append(m.Allowed, k)
	}
	sort.Strings(m.Allowed)
	b, _ := json.Marshal(m)
	if err := c.db.PutMeta("scope", b); err != nil {
		return err
	}
	if len(excluded) > 0 {
		if err := c.fr.Exclude(excluded); err != nil {
			return err
		}
	}
	_, err := c.fr.Add(entries)
	return err
}

// jobDone is what a finished job reports to the dispatcher.
type jobDone struct {
	page bool  // it was a page fetch (counts against --max-pages until committed)
	err  error // a store failure: the crawl must stop
}

// Summary is what Run reports at the end.
type Summary struct {
	Status
	Elapsed    time.Duration
	StopReason string // "done", "max-pages", "deferred", "interrupted", "error"
	// DeferredUntil is when the earliest deferred URL may be fetched (StopReason "deferred").
	DeferredUntil time.Time
}

// Run crawls until nothing in scope is left, --max-pages is reached, ctx is cancelled or the
// store fails. When ctx is cancelled it stops taking new work and lets requests in flight
// finish for up to cfg.Grace, then cancels them; their URLs stay queued. It returns
// ErrInterrupted in that case.
func (c *Crawler) Run(ctx context.Context) (*Summary, error) {
	start := time.Now()
	fetchCtx, cancelFetches := context.WithCancel(context.Background())
	defer cancelFetches()
	done := make(chan jobDone, c.cfg.Workers+1)
	var wg sync.WaitGroup
	statusTick := time.NewTicker(c.cfg.StatusEvery)
	defer statusTick.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()

	var fatal error
	var deferredUntil time.Time
	reason := "done"
	lastEvict, lastFlush := start, start
	finish := func(d jobDone) {
		c.inflight--
		if d.page {
			c.fetching--
		}
		if d.err != nil && fatal == nil {
			fatal = d.err
		}
	}
	c.publishStatus(true)
loop:
	for {
		// Take every report that is already waiting.
		for drained := false; !drained; {
			select {
			case d := <-done:
				finish(d)
			default:
				drained = true
			}
		}
		switch {
		case fatal != nil:
			reason = "error"
			break loop
		case ctx.Err() != nil:
			reason = "interrupted"
			break loop
		}
		now := time.Now()
		pages := -1 // page fetches dispatch may still start; -1: no limit
		if c.cfg.MaxPages > 0 {
			pages = max(c.cfg.MaxPages-c.fr.Counts().Fetched-c.fetching, 0)
		}
		limit := pages == 0
		var n int
		var wakeAt time.Time
		if !limit {
			var err error
			n, wakeAt, err = c.dispatch(now, pages, fetchCtx, done, &wg)
			if err != nil {
				fatal = err
				continue
			}
		}
		if c.inflight == 0 && (limit || c.fr.Idle()) {
			if limit {
				reason = "max-pages"
			}
			break
		}
		if n > 0 && c.inflight < c.cfg.Workers {
			continue
		}
		if na := c.fr.NextAt(now); !na.IsZero() && (wakeAt.IsZero() || na.Before(wakeAt)) {
			wakeAt = na
		}
		if c.inflight == 0 && n == 0 && !wakeAt.IsZero() && wakeAt.Sub(now) > c.cfg.DeferAfter {
			// Everything left waits on hosts that asked (Retry-After) or were told (backoff)
			// to wait longer than anyone should watch: stop; a later run resumes.
			reason = "deferred"
			deferredUntil = wakeAt
			break
		}
		wait := time.Second
		if !wakeAt.IsZero() {
			wait = max(wakeAt.Sub(now), time.Millisecond)
		}
		resetTimer(timer, wait)
		select {
		case d := <-done:
			finish(d)
		case <-timer.C:
		case <-statusTick.C:
			c.publishStatus(true)
			switch {
			case now.Sub(lastEvict) >= time.Minute:
				// Idle hosts leave memory; their learned state waits in the store.
				if err := c.reg.Evict(now); err != nil {
					fatal = err
				}
				lastEvict, lastFlush = now, now
			case now.Sub(lastFlush) >= flushEvery:
				// Learned rates reach the store while running, not only at exit, so a run
				// after a kill starts from what was learned.
				if err := c.reg.Flush(); err != nil {
					fatal = err
				}
				lastFlush = now
			}
		case <-ctx.Done():
		}
	}

	// Stop: no new work; let what is in flight finish within the grace period.
	grace := time.NewTimer(c.cfg.Grace)
	defer grace.Stop()
	for c.inflight > 0 {
		select {
		case d := <-done:
			finish(d)
		case <-grace.C:
			cancelFetches()
		case <-statusTick.C:
			c.publishStatus(true)
		}
	}
	wg.Wait()
	sum := &Summary{Status: c.snapshot(false), Elapsed: time.Since(start), StopReason: reason, DeferredUntil: deferredUntil}
	c.publishStatus(false)
	switch {
	case fatal != nil:
		return sum, fatal
	case reason == "interrupted":
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

// dispatch hands ready work to new jobs, at most one per ready host per pass and at most pages
// page fetches (-1: any number), and returns how many jobs it started and the earliest time
// something not ready now may become ready.
func (c *Crawler) dispatch(now time.Time, pages int, fetchCtx context.Context, done chan<- jobDone, wg *sync.WaitGroup) (int, time.Time, error) {
	hosts := c.fr.ReadyHosts(now)
	c.noteReady(now, hosts)
	if len(hosts) == 0 {
		return 0, time.Time{}, nil
	}
	var wakeAt time.Time
	soonest := func(t time.Time) {
		if !t.IsZero() && (wakeAt.IsZero() || t.Before(wakeAt)) {
			wakeAt = t
		}
	}
	started := 0
	launch := func(page bool, job func() error) {
		c.inflight++
		if page {
			c.fetching++
		}
		started++
		wg.Add(1)
		go func() {
			defer wg.Done()
			done <- jobDone{page: page, err: job()}
		}()
	}
	c.rr++
	for i := range hosts {
		if c.inflight >= c.cfg.Workers || pages == 0 {
			break
		}
		host := hosts[(i+c.rr)%len(hosts)]
		gate, ok := c.gates.key(host)
		if !ok { // its address is being looked up (--key-by-ip): look again shortly
			soonest(now.Add(50 * time.Millisecond))
			continue
		}
		rs, err := c.robotsFor(host)
		if err != nil {
			return started, wakeAt, err
		}
		switch st, at := rs.state(now); st {
		case robotsPending:
			continue
		case robotsWait:
			soonest(at)
			continue
		case robotsGaveUp:
			l, ok, err := c.fr.Lease(now, host)
			if err != nil {
				return started, wakeAt, err
			}
			if ok {
				launch(false, func() error {
					return c.fr.Complete(l, frontier.Result{Kind: frontier.Failed, Reason: "robots-unreachable",
						Detail: fmt.Sprintf("robots.txt unreachable after %d tries: %s", rs.failures(), rs.lastProblem())})
				})
			}
			continue
		case robotsNeeded:
			t, readyAt := c.tryAdmit(now, host, gate)
			if t == nil {
				soonest(readyAt)
				continue
			}
			l, ok, err := c.fr.Lease(now, host) // to learn the scheme the host is crawled with
			if err != nil {
				t.Done(now, aimd.Outcome{Signal: aimd.Neutral, Sent: now})
				return started, wakeAt, err
			}
			if !ok {
				t.Done(now, aimd.Outcome{Signal: aimd.Neutral, Sent: now})
				continue
			}
			c.fr.Release(l)
			scheme := "http"
			if u, err := url.Parse(l.URL); err == nil {
				scheme = u.Scheme
			}
			rs.setPending()
			launch(false, func() error { return c.fetchRobots(fetchCtx, host, scheme, t) })
			continue
		}
		t, readyAt := c.tryAdmit(now, host, gate)
		if t == nil {
			soonest(readyAt)
			continue
		}
		l, ok, err := c.fr.Lease(now, host)
		if err != nil || !ok {
			t.Done(now, aimd.Outcome{Signal: aimd.Neutral, Sent: now})
			if err != nil {
				return started, wakeAt, err
			}
			continue
		}
		u, err := url.Parse(l.URL)
		if err != nil { // cannot happen: the frontier holds normalized URLs
			t.Done(now, aimd.Outcome{Signal: aimd.Neutral, Sent: now})
			launch(false, func() error {
				return c.fr.Complete(l, frontier.Result{Kind: frontier.Failed, Reason: "bad-url", Detail: err.Error()})
			})
			continue
		}
		if v := rs.test(c.agent, u); !v.Allowed {
			// Learned too late to exclude at enqueue time (e.g. a seed): give the slot back.
			t.Done(now, aimd.Outcome{Signal: aimd.Neutral, Sent: now})
			launch(false, func() error {
				return c.fr.Complete(l, frontier.Result{Kind: frontier.Excluded, Reason: "robots", Detail: ruleDetail(v)})
			})
			continue
		}
		launch(true, func() error { return c.fetchPage(fetchCtx, l, u, t) })
		pages--
	}
	return started, wakeAt, nil
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
