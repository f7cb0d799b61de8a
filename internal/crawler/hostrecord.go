package crawler

import (
	"time"

	"github.com/crawl-project/crawl/internal/retry"
)

// hostRecord is what the crawl keeps of one host (its urlnorm.HostKey) for the whole run,
// besides its gate in the registry. Records are made by hostLocked on first use and never
// dropped: a host's robots.txt, budget and ban reading outlive an eviction of its gate.
//
// Every field is guarded by Crawler.mu except robots, which has its own lock (robotsState.mu,
// never taken while Crawler.mu is held).
type hostRecord struct {
	robots  robotsState   // its robots.txt (robots.go)
	budget  *retry.Budget // its retry budget; nil until its first retry or success (see budget)
	clock   hostClock     // its clock against ours and its quota windows (page.go)
	lastErr string        // the last error seen, for Status; "" if none
	forbid  forbidState   // the reading of its 403s that may be a ban (forbidden.go)
}

// hostLocked returns host's record, made on first use. hostLocked requires c.mu to be held.
func (c *Crawler) hostLocked(host string) *hostRecord {
	r := c.hosts[host]
	if r == nil {
		r = &hostRecord{}
		c.hosts[host] = r
	}
	return r
}

// budget returns host's retry budget, made full on first use.
func (c *Crawler) budget(host string) *retry.Budget {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.hostLocked(host)
	if r.budget == nil {
		r.budget = retry.NewBudget(retry.BudgetConfig{}, time.Now())
	}
	return r.budget
}

func (c *Crawler) setLastErr(host, msg string) {
	c.mu.Lock()
	c.hostLocked(host).lastErr = msg
	c.mu.Unlock()
}
