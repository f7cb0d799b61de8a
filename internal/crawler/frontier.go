package crawler

import (
	"context"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/hostlimit"
	"github.com/crawl-project/crawl/storage"
)

// Frontier is the crawl loop's URL frontier. Two implementations keep this contract:
// *frontier.Frontier (bbolt, a crawl of one process; checked below) and *fleet.Frontier (Redis,
// a crawl shared by several workers; checked in cmd/crawl, which imports both). docs/frontier.md
// "One contract" explains it.
//
//   - Every method is safe for concurrent use.
//   - Add and Exclude return nil once the entries not seen before are durable; an entry seen
//     before changes nothing.
//   - Lease hands out a URL of a ready host (TakeReady, Ready); Release gives it back
//     unchanged. A URL leased and never completed (a crash) is leased again, never lost.
//   - Complete returns nil once the result is durable, whoever stores it: the page (r.Page),
//     the URL's new state and its links (or the retry, the failure, the exclusion). The bbolt
//     frontier commits all three in one transaction; a shared frontier stores the page in the
//     worker's store (Shared.Join) before it records the rest, so that no URL is ever done
//     whose page is not stored. A shared frontier may also return nil for a result it refuses
//     because the URL is no longer this worker's: its new owner fetches it again.
//   - Counts, Hosts and Idle read counters without blocking on the store; Idle reports that the
//     crawl is over (nothing queued, delayed or leased) unless something is added.
type Frontier interface {
	Add(entries []frontier.Entry) (added int, err error)
	Exclude(ex []frontier.Exclusion) error
	// TakeReady returns the hosts that became ready since the last call (the first call: all
	// ready hosts); Ready reports whether a host still has ready work. NextAt is when a host
	// may become ready without a Complete (zero: nothing says when).
	TakeReady(now time.Time) []string
	Ready(host string) bool
	NextAt(now time.Time) time.Time
	Lease(now time.Time, host string) (frontier.Lease, bool, error)
	Complete(l frontier.Lease, r frontier.Result) error
	Release(l frontier.Lease)
	Counts() frontier.Counts
	Hosts() []frontier.HostCount
	Idle() bool
}

// Revisable is a Frontier that can walk the URLs it has seen and revise their states: the
// bbolt frontier. Only with a Revisable frontier does a crawl apply the settings that revise
// URLs already seen (a changed --scope mode, filters, --retry, --recrawl) and count
// --max-pages in pages alone with --requisites.
type Revisable interface {
	Walk(fn func(frontier.URLRecord) error) error
	Revise(decide func(frontier.URLRecord) frontier.Verdict) (frontier.Revised, error)
}

// Shared is a Frontier shared by several workers (internal/fleet's): the crawl's URLs, the
// hosts' learned politeness, robots.txt and the scope are the crawl's, not the worker's store's.
// The crawler discovers it by type assertion on the frontier given to OpenWith. The worker's
// store keeps its pages, robots.txt and samples. Settings that revise URLs already seen (a
// changed --scope mode is refused; --retry, --recrawl and changed filters are not applied)
// need a crawl of one's own.
type Shared interface {
	Frontier
	SharedSettings
	// LoadRobots and SaveRobots share hosts' robots.txt among the workers (each host's
	// storage.RobotsEntry as JSON), so that a host's next owner does not fetch it again. The
	// crawler treats them as a cache: an entry it cannot load is fetched, one it cannot save
	// is kept in its own store only. SaveRobots saves only while host is this worker's, and
	// reports whether it saved.
	LoadRobots(host string) ([]byte, bool, error)
	SaveRobots(host string, b []byte) (saved bool, err error)
	// HostStates stores the hosts' learned politeness, following a host to its next worker.
	HostStates() hostlimit.StateStore
	// HostContext returns the context requests to host run under, derived from ctx (the same
	// ctx for every call of one Run) and cancelled when host stops being this worker's.
	HostContext(ctx context.Context, host string) context.Context
	// Holds reports whether host is this worker's at local time now. A job made while it was
	// is not sent once it is not (a worker resumed after a pause past its lease).
	Holds(host string, now time.Time) bool
	// Join binds the frontier to the worker that crawls with it; OpenWith calls it once,
	// before Run. Complete stores a Fetched result's page in pages before it records the
	// rest; checkpoint saves the hosts' learned state (Crawler.SaveHostStates), and is called
	// before the frontier hands hosts to another worker.
	Join(pages *storage.DB, checkpoint func() error)
	// Where names the shared crawl, for the worker's store (crawl status --data): its Redis
	// as a URL without password, and its name.
	Where() (redis, crawl string)
}

// SharedSettings are the settings the workers of a shared crawl agree on.
type SharedSettings interface {
	// Union adds members to the set name and returns every member it holds; Count returns
	// how many it holds.
	Union(name string, members []string) ([]string, error)
	Count(name string) (int, error)
	// Settle sets name to value unless it has a value, and returns the value it holds;
	// Value returns the value name holds, and whether it holds one.
	Settle(name, value string) (string, error)
	Value(name string) (string, bool, error)
}

var (
	_ Frontier  = (*frontier.Frontier)(nil)
	_ Revisable = (*frontier.Frontier)(nil)
)
