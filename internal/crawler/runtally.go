package crawler

import (
	"net/http"
	"sync"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/storage"
)

// StartKind is what a run started from.
type StartKind int

const (
	// NewCrawl: the store held no URL before this run's seeds.
	NewCrawl StartKind = iota
	// Resumed: the store held a crawl, which this run goes on with.
	Resumed
	// SharedWorker: the run is one worker of a crawl shared through Redis; the crawl's
	// figures are the fleet's, not this worker's.
	SharedWorker
)

// Figures are a crawl's URL counts.
type Figures struct {
	Fetched, Failed, Excluded, Queued int
}

// RunStart is what a run started from: its kind, the crawl's figures as Open found them, and
// as Open left them (its seeds added and --retry, --recrawl or changed settings applied: the
// figures this run's own are counted from).
type RunStart struct {
	Kind   StartKind
	Found  Figures
	Opened Figures
}

// Start returns what this run started from.
func (c *Crawler) Start() RunStart { return c.start }

// RunTally counts what this run's page fetches came to. It is safe for concurrent use through
// tallyPage and tally.
type RunTally struct {
	Fetched   int // pages fetched and stored by this run (any status; requisites included)
	New       int // of Fetched: URLs fetched for the first time
	Unchanged int // of Fetched: revisits whose page had not changed (a 304, or the same body)
	Changed   int // of Fetched: revisits with another answer (a new body, a redirect, an error)
	Gone      int // of Fetched: revisits answered 404 or 410
}

// Revisits is how many of the run's pages were revisits (--recrawl or a changed setting).
func (t RunTally) Revisits() int { return t.Unchanged + t.Changed + t.Gone }

type runTally struct {
	mu sync.Mutex
	t  RunTally
}

// tallyPage counts a committed page fetch result of lease l.
func (c *Crawler) tallyPage(l frontier.Lease, p *storage.Page) {
	c.runTally.mu.Lock()
	defer c.runTally.mu.Unlock()
	t := &c.runTally.t
	t.Fetched++
	switch {
	case l.Prev == 0:
		t.New++
	case p.RevisitOf != 0 || p.SameAs != 0:
		t.Unchanged++
	case p.Status == http.StatusNotFound || p.Status == http.StatusGone:
		t.Gone++
	default:
		t.Changed++
	}
}

// tally returns the run's figures so far.
func (c *Crawler) tally() RunTally {
	c.runTally.mu.Lock()
	defer c.runTally.mu.Unlock()
	return c.runTally.t
}
