package crawler

import (
	"errors"
	"log/slog"
	"math/rand"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crawl-project/crawl/fetch"
	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/hostlimit"
	"github.com/crawl-project/crawl/internal/retry"
	"github.com/crawl-project/crawl/robots"
	"github.com/crawl-project/crawl/storage"
)

// activeHostsPerWorker and minActiveHosts bound the hosts in play at once (see schedule): enough
// that hosts held at a few requests a second keep every worker busy.
const (
	activeHostsPerWorker = 64
	minActiveHosts       = 1024
)

// rateInPlayShare bounds the rates of the hosts in play that new hosts are put in play within
// (schedule.budget): those of this share of the hosts in play at most, each at --initial-rate.
const rateInPlayShare = 0.5

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
//
// Its fields fall into parts by who owns them, each part a struct of its own whose comment says
// how it is locked: what Open fixes (opened), the scope (crawlScope), the hosts' records under
// one mutex (hostTable), the dispatcher goroutine's state (dispatcher), the run's tallies, each
// with its own lock (runRecords), and the retry jitter (jitter). The parts are embedded, so a
// field is named by itself (c.cfg, c.hosts, c.inflight).
type Crawler struct {
	opened
	crawlScope
	hostTable
	dispatcher
	runRecords
	jitter
}

// opened is what Open sets up. Open writes these fields; afterwards they are only read, from
// any goroutine (the values they point to are safe for concurrent use, or read-only).
type opened struct {
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
	agent   string          // robots.txt product token from the user agent
	gates   *gateKeys       // host → key of its gate in reg (gatekey.go)
	res     *fetch.Resolver // looks host names up, for the client, the guard and the gates
	global  *retry.Budget   // the crawl's retry budget, over every host
	// parse turns a fetched robots.txt into rules (robots.FromResponse); a test may hold it
	// to see that a parse in progress holds no other host
	parse func(status int, body []byte) *robots.Robots

	// typesChanged: this run's --accept-type differs from the stored one, so the URLs
	// excluded by type are fetched again (set by settle).
	typesChanged bool
	changes      []Change         // settings this run changed from the stored ones (settings.go)
	revised      frontier.Revised // what the changes did to URLs already seen
	recrawl      recrawlPlan      // which fetched URLs settle revisits
	start        RunStart
}

// crawlScope is the crawl's scope. scope is built by Open and not changed after; a shared
// crawl's may widen while it runs (scopeNow): the dispatcher stores the wider one in wider
// (widenScope), which the jobs load.
type crawlScope struct {
	scope Scope
	wider atomic.Pointer[Scope] // nil: scope
}

// hostTable holds the records of the hosts in memory and how each host answered lately. mu
// guards hosts, answers and the records' fields but robots (see hostRecord). Lock order: mu
// before a record's budget's own lock; a record's robots lock is never taken under mu.
type hostTable struct {
	mu    sync.Mutex
	hosts map[string]*hostRecord // made in Open; records made by hostLocked, dropped by dropIdleHosts
	// answers is how each host answered lately (hostAnswers), kept whether or not its record
	// is still held. Made on first use.
	answers map[string]*hostAnswers
}

// dispatcher is the state of the goroutine that runs Run's loop (pass, dispatch, tick). Only
// that goroutine reads or writes these fields, without a lock; Open makes them.
type dispatcher struct {
	inflight int
	fetching int        // page fetches in flight, for --max-pages
	pages    pageBudget // what counts against --max-pages (requisites.go; its count is atomic)
	sched    *schedule  // the hosts with ready work, and when to ask them
	held     []string   // gates whose rate alone refused a ready request in this pass

	robotsWaiting map[string]bool // hosts waiting to check an unreachable robots.txt again
	idleTold      map[string]bool // hosts the crawl was told it waits for, with nothing else left
	scopeRead     time.Time       // when tick last widened the scope
}

// runRecords are what this run counts and remembers as its jobs go, used by the jobs and the
// dispatcher at once. Each has its own lock (observation also keeps fields only the dispatcher
// touches; observe.go says which).
type runRecords struct {
	ob observation // counters, samples and events for watching the crawl (observe.go)

	sitemaps sitemapBudget   // what the hosts' sitemaps spent in this run (budgets.go)
	chains   requisiteChains // requisites taken from requisites in this run (budgets.go)

	failed      failedHosts // hosts whose failure was announced (failures.go)
	unreachable failedHosts // hosts whose unreachable robots.txt was announced (failures.go)

	runTally runTally // this run's page fetches (runtally.go)

	// renders is --render's: the browser (set by Run before its jobs start, cleared after
	// they ended), the sub-resources and the figures, each with its own lock (render.go).
	renders renderState
}

// jitter draws the random part of retry delays. rndMu guards rnd: rand.Rand is not safe for
// concurrent use.
type jitter struct {
	rndMu sync.Mutex
	rnd   *rand.Rand
}

// retryDelay computes the wait before another attempt, under c.rndMu since rand.Rand is not
// safe for concurrent use.
func (c *Crawler) retryDelay(attempt int, retryAfter time.Duration) time.Duration {
	c.rndMu.Lock()
	defer c.rndMu.Unlock()
	return c.cfg.retryPolicy().Delay(attempt, retryAfter, c.rnd)
}
