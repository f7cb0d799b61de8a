package crawler

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/hostlimit"
	"github.com/crawl-project/crawl/internal/netguard"
	"github.com/crawl-project/crawl/storage"
	"go.etcd.io/bbolt"
)

// Shared is what a crawl shared by several workers (internal/fleet) puts in place of what the
// store in Config.Dir keeps for a crawl of its own: the frontier, the hosts' learned state, the
// scope and the private address blocks the seeds opened. The store keeps the worker's pages
// (each stored before the frontier's Complete, so a crash never marks done a page that is not
// stored), robots.txt and samples. Settings that revise URLs already seen (a changed --scope
// mode is refused; --retry, --recrawl and changed filters are not applied) need a crawl of
// one's own.
type Shared struct {
	// Frontier holds the URLs of the whole crawl. Its Complete must not store pages (the
	// crawler does, first) and may refuse a result whose URL is no longer this worker's by
	// returning nil.
	Frontier   Frontier
	HostStates hostlimit.StateStore // hosts' learned politeness, following a host to its next worker
	Settings   SharedSettings       // the scope and private blocks every worker crawls with
	// Robots, if set, shares hosts' robots.txt among the workers, so that a host's next owner
	// does not fetch it again.
	Robots SharedRobots
	// HostContext returns the context requests to host run under, derived from ctx (the same
	// ctx for every call of one Run) and cancelled when host stops being this worker's. Nil
	// means ctx itself.
	HostContext func(ctx context.Context, host string) context.Context
}

// SharedRobots is a robots.txt cache the workers of a shared crawl share: each host's
// storage.RobotsEntry as JSON. The crawler treats it as a cache: an entry it cannot load is
// fetched, one it cannot save is kept in its own store only.
type SharedRobots interface {
	LoadRobots(host string) ([]byte, bool, error)
	SaveRobots(host string, b []byte) error
}

// SharedSettings are the settings the workers of a shared crawl agree on.
type SharedSettings interface {
	// Union adds members to the set name and returns every member it holds.
	Union(name string, members []string) ([]string, error)
	// Settle sets name to value unless it has a value, and returns the value it holds.
	Settle(name, value string) (string, error)
}

// mergeScope makes the scope the union of this worker's (its seeds') and the shared crawl's,
// and refuses a --scope mode other than the crawl's.
func (c *Crawler) mergeScope() error {
	st := c.shared.Settings
	mode, err := st.Settle("scope-mode", c.scope.Mode)
	if err != nil {
		return err
	}
	if mode != c.scope.Mode {
		return fmt.Errorf("the shared crawl was started with --scope %s, not %s (%w)", mode, c.scope.Mode, ErrUsage)
	}
	mine := make([]string, 0, len(c.scope.Allowed))
	for k := range c.scope.Allowed {
		mine = append(mine, k)
	}
	all, err := st.Union("scope-allowed", mine)
	if err != nil {
		return err
	}
	for _, k := range all {
		c.scope.Allowed[k] = true
	}
	return nil
}

// sharedGuard is guard for a shared crawl: the non-public blocks the seeds of any worker are on
// are allowed to all.
func (c *Crawler) sharedGuard(g *netguard.Guard, seeds []string) (*netguard.Guard, error) {
	hosts := map[string]bool{}
	for _, s := range seeds {
		if u, err := url.Parse(s); err == nil {
			hosts[u.Hostname()] = true
		}
	}
	for a := range seedAddrs(c.res, hosts) {
		g.Allow(a)
	}
	mine := make([]string, 0, len(g.Allowed))
	for _, p := range g.Allowed {
		mine = append(mine, p.String())
	}
	all, err := c.shared.Settings.Union("private-ranges", mine)
	if err != nil {
		return nil, err
	}
	g.Allowed = g.Allowed[:0]
	for _, s := range all {
		if p, err := netip.ParsePrefix(s); err == nil {
			g.Allowed = append(g.Allowed, p)
		}
	}
	return g, nil
}

// pageStorer is a shared Frontier whose Complete first stores a Fetched result's page in the
// worker's store, in a commit of its own: a crash between the two fetches the page again, and
// never marks done a page that is not stored.
type pageStorer struct {
	Frontier
	db *storage.DB
}

func storePages(fr Frontier, db *storage.DB) *pageStorer { return &pageStorer{Frontier: fr, db: db} }

func (s *pageStorer) Complete(l frontier.Lease, r frontier.Result) error {
	if r.Kind == frontier.Fetched && r.Page != nil {
		err := s.db.Batch(func(tx *bbolt.Tx) error {
			_, err := storage.PutPage(tx, r.Page)
			return err
		})
		if err != nil {
			return fmt.Errorf("store page %s: %w", l.URL, err)
		}
	}
	return s.Frontier.Complete(l, r)
}

// sharedRobots returns the shared cache's robots.txt entry of host, if it has a usable one.
func (c *Crawler) sharedRobots(host string) (storage.RobotsEntry, bool) {
	var e storage.RobotsEntry
	if c.shared == nil || c.shared.Robots == nil {
		return e, false
	}
	b, ok, err := c.shared.Robots.LoadRobots(host)
	if err != nil || !ok || json.Unmarshal(b, &e) != nil || e.Host != host {
		return storage.RobotsEntry{}, false
	}
	return e, true
}

// shareRobots saves host's robots.txt entry to the shared cache, if there is one.
func (c *Crawler) shareRobots(e storage.RobotsEntry) {
	if c.shared == nil || c.shared.Robots == nil {
		return
	}
	if b, err := json.Marshal(e); err == nil {
		_ = c.shared.Robots.SaveRobots(e.Host, b) // a cache: the entry is in the worker's own store
	}
}
