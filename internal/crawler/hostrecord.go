package crawler

import (
	"time"

	"github.com/crawl-project/crawl/internal/retry"
	"github.com/crawl-project/crawl/internal/termsafe"
)

// hostRecord is what the crawl keeps of one host (its urlnorm.HostKey) while it is crawled,
// besides its gate in the registry. Records are made by hostLocked on first use and dropped by
// dropIdleHosts once the host has no job, no ready work and no use for hostIdle: its robots.txt
// is reloaded from the store on its next use, and its retry budget and clock reading start
// afresh (how it answered is kept apart: see hostAnswers).
//
// Every field is guarded by hostTable.mu except robots, which has its own lock (robotsState.mu,
// never taken while hostTable.mu is held).
type hostRecord struct {
	jobs    int             // its jobs running
	used    time.Time       // its latest use
	robots  robotsState     // its robots.txt (robots.go)
	budget  *retry.Budget   // its retry budget; nil until its first retry or success (see budget)
	clock   retry.HostClock // its clock against ours and its quota windows (page.go)
	lastErr string          // the last error seen, for Status; "" if none
}

// hostLocked returns host's record, made on first use. hostLocked requires c.mu to be held.
func (c *Crawler) hostLocked(host string) *hostRecord {
	r := c.hosts[host]
	if r == nil {
		r = &hostRecord{}
		c.hosts[host] = r
	}
	r.used = time.Now()
	return r
}

// warm reports whether the crawl holds host's record: a job of it runs or it was used within
// hostIdle (dropIdleHosts has not dropped it).
func (c *Crawler) warm(host string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hosts[host] != nil
}

// jobStarted and jobEnded count host's jobs. Dispatcher only.
func (c *Crawler) jobStarted(host string) {
	c.mu.Lock()
	c.hostLocked(host).jobs++
	c.mu.Unlock()
}

func (c *Crawler) jobEnded(host string) {
	c.mu.Lock()
	c.hostLocked(host).jobs--
	c.mu.Unlock()
}

// dropIdleHosts drops the records of the hosts with no job running, no ready work and no use
// since hostIdle before now, and the answers that no longer say anything (forgetAnswers).
// Dispatcher only.
func (c *Crawler) dropIdleHosts(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetAnswers(now)
	for host, r := range c.hosts {
		if r.jobs == 0 && now.Sub(r.used) >= hostIdle && !c.fr.Ready(host) {
			delete(c.hosts, host)
		}
	}
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
	c.hostLocked(host).lastErr = termsafe.Escape(msg)
	c.mu.Unlock()
}
