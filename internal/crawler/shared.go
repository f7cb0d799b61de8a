package crawler

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"
	"time"

	"github.com/crawl-project/crawl/fetch"
	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/netguard"
	"github.com/crawl-project/crawl/internal/urlnorm"
	"github.com/crawl-project/crawl/storage"
)

// mergeScope makes the scope the union of this worker's (its seeds') and the shared crawl's,
// and refuses a --scope mode other than the crawl's.
func (c *Crawler) mergeScope() error {
	st := c.shared
	mode, err := st.Settle("scope-mode", c.scope.Mode.String())
	if err != nil {
		return err
	}
	if mode != c.scope.Mode.String() {
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
	all, err := c.shared.Union("private-ranges", mine)
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

// sharedRobots returns the shared cache's robots.txt entry of host, if it has a usable one.
func (c *Crawler) sharedRobots(host string) (storage.RobotsEntry, bool) {
	var e storage.RobotsEntry
	if c.shared == nil {
		return e, false
	}
	b, ok, err := c.shared.LoadRobots(host)
	if err != nil || !ok || json.Unmarshal(b, &e) != nil || e.Host != host {
		return storage.RobotsEntry{}, false
	}
	return e, true
}

// shareRobots saves host's robots.txt entry to the shared cache, and reports whether it did:
// not without a shared cache, nor while the host is not this worker's, nor when the cache
// cannot be reached (a cache: the entry is in the worker's own store).
func (c *Crawler) shareRobots(e storage.RobotsEntry) bool {
	if c.shared == nil {
		return false
	}
	b, err := json.Marshal(e)
	if err != nil {
		return false
	}
	saved, err := c.shared.SaveRobots(e.Host, b)
	return saved && err == nil
}

// SharedCrawl names a crawl shared by several workers: its Redis (a URL without password) and
// its name. A worker's store keeps it, so that crawl status --data says whose worker it is.
type SharedCrawl struct {
	Redis string `json:"redis"`
	Crawl string `json:"crawl"`
}

const sharedKey = "shared-crawl"

// saveSharedCrawl records in the worker's store which shared crawl it serves.
func (c *Crawler) saveSharedCrawl() error {
	redis, crawl := c.shared.Where()
	b, _ := json.Marshal(SharedCrawl{Redis: redis, Crawl: crawl})
	return c.db.PutMeta(sharedKey, b)
}

// loadSharedCrawl returns the shared crawl the store in db served last, nil if none.
func loadSharedCrawl(db *storage.DB) (*SharedCrawl, error) {
	b, ok, err := db.Meta(sharedKey)
	if err != nil || !ok {
		return nil, err
	}
	var s SharedCrawl
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("bad %s record: %w", sharedKey, err)
	}
	return &s, nil
}

// SeedTarget is what AddSeedsTo needs of a shared crawl: its crawl-wide sets and values, and
// its Add (internal/fleet's Frontier).
type SeedTarget interface {
	Add(entries []frontier.Entry) (added int, err error)
	Union(name string, members []string) ([]string, error)
	// Value returns the value name holds (Settle), and whether it holds one.
	Value(name string) (string, bool, error)
}

// AddSeedsTo adds seeds to a running shared crawl from outside its workers (crawl add): it
// widens the crawl's scope under the --scope mode the crawl was started with and the
// non-public address blocks the seeds are on (resolved with res), then queues the seeds not
// seen before, and returns how many it queued at once (a partition's owner queues those sent to
// its inbox). A seed with user:password@ is refused (the
// credentials would be kept by no worker), and a crawl no worker has given seeds yet (it has
// no scope mode) too. The crawl's --include/--exclude are not applied to the seeds: a seed is
// queued whatever they say; its links are checked by the workers' filters. Workers already
// running learn the wider scope within scopeEvery, and a private block before they refuse an
// address of it (netScope).
func AddSeedsTo(t SeedTarget, seeds []string, res *fetch.Resolver) (int, error) {
	mode, ok, err := t.Value("scope-mode")
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("the shared crawl has no scope yet: start a worker with seeds first (%w)", ErrUsage)
	}
	var sm ScopeMode
	if err := sm.UnmarshalText([]byte(mode)); err != nil {
		return 0, fmt.Errorf("the shared crawl's scope record: %w", err)
	}
	sc := Scope{Mode: sm, Allowed: map[string]bool{}}
	hosts := map[string]bool{}
	var entries []frontier.Entry
	for _, s := range seeds {
		u, err := urlnorm.Parse(s)
		if err != nil {
			return 0, fmt.Errorf("seed %q: %w (%w)", s, err, ErrUsage)
		}
		if u.User != nil {
			return 0, fmt.Errorf("seed %q: credentials (user:password@) are kept by the worker given them; give this seed to a worker (%w)", s, ErrUsage)
		}
		sc.AddSeed(u)
		hosts[u.Hostname()] = true
		entries = append(entries, frontier.Entry{URL: u.String(), Host: urlnorm.HostKey(u)})
	}
	var g netguard.Guard
	for a := range seedAddrs(res, hosts) {
		g.Allow(a)
	}
	if len(g.Allowed) > 0 {
		blocks := make([]string, len(g.Allowed))
		for i, p := range g.Allowed {
			blocks[i] = p.String()
		}
		if _, err := t.Union("private-ranges", blocks); err != nil {
			return 0, err
		}
	}
	allowed := make([]string, 0, len(sc.Allowed))
	for k := range sc.Allowed {
		allowed = append(allowed, k)
	}
	if _, err := t.Union("scope-allowed", allowed); err != nil {
		return 0, err
	}
	added := 0
	for len(entries) > 0 {
		n := min(len(entries), seedChunk)
		k, err := t.Add(entries[:n])
		added += k
		if err != nil {
			return added, err
		}
		entries = entries[n:]
	}
	return added, nil
}

// scopeEvery is how often a worker of a shared crawl asks whether seeds added meanwhile (crawl
// add, a worker started later) widened the crawl's scope.
const scopeEvery = 5 * time.Second

// scopeNow is the scope in force: the one Open built, or the wider one widenScope swapped in.
// Safe for the jobs to call while the dispatcher widens it.
func (c *Crawler) scopeNow() *Scope {
	if s := c.wider.Load(); s != nil {
		return s
	}
	return &c.scope
}

// widenScope takes in the hosts (or domains) added to the shared crawl's scope since Open or
// the last widening, if its size changed. A failure is left to the next call: the scope only
// ever widens, so an old one is never wrong, only narrower. The dispatcher calls it every
// scopeEvery, and at once when it leases a seed out of scope (one added since).
func (c *Crawler) widenScope() {
	cur := c.scopeNow()
	n, err := c.shared.Count("scope-allowed")
	if err != nil || n == len(cur.Allowed) {
		return
	}
	all, err := c.shared.Union("scope-allowed", nil)
	if err != nil {
		return
	}
	w := *cur
	w.Allowed = make(map[string]bool, len(all))
	for k := range cur.Allowed {
		w.Allowed[k] = true
	}
	for _, k := range all {
		w.Allowed[k] = true
	}
	if len(w.Allowed) > len(cur.Allowed) {
		c.wider.Store(&w)
	}
}
