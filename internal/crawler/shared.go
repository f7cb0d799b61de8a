package crawler

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"

	"github.com/crawl-project/crawl/internal/netguard"
	"github.com/crawl-project/crawl/storage"
)

// mergeScope makes the scope the union of this worker's (its seeds') and the shared crawl's,
// and refuses a --scope mode other than the crawl's.
func (c *Crawler) mergeScope() error {
	st := c.shared
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

// shareRobots saves host's robots.txt entry to the shared cache, if there is one.
func (c *Crawler) shareRobots(e storage.RobotsEntry) {
	if c.shared == nil {
		return
	}
	if b, err := json.Marshal(e); err == nil {
		_ = c.shared.SaveRobots(e.Host, b) // a cache: the entry is in the worker's own store
	}
}
