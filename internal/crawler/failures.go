package crawler

import (
	"fmt"
	"sync"
	"time"

	"github.com/crawl-project/crawl/internal/retry"
)

// failedHosts remembers the hosts whose failure this run has announced, so that each is
// announced once: the first time a request to it ends without a response (or its robots.txt
// cannot be had). The zero value is ready to use; it is safe for concurrent use.
type failedHosts struct {
	mu   sync.Mutex
	seen map[string]bool
}

// first reports whether host had not failed before in this run, and remembers it.
func (f *failedHosts) first(host string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen[host] {
		return false
	}
	if f.seen == nil {
		f.seen = map[string]bool{}
	}
	f.seen[host] = true
	return true
}

// hostFailed logs cause as a warning the first time host fails in this run, so the reason a
// seed gets nothing (connection refused, a certificate not trusted …) shows while the crawl
// runs, not only in crawl status.
func (c *Crawler) hostFailed(host, cause string) {
	if c.failed.first(host) {
		c.log.Warn("host failed", "host", host, "cause", cause)
	}
}

// hostUnreachable logs cause as a warning the first time host's robots.txt cannot be had in
// this run, and that it is tried again: the host may yet answer.
func (c *Crawler) hostUnreachable(host, cause string) {
	if c.unreachable.first(host) {
		c.log.Warn("host unreachable, trying again", "host", host, "cause", cause)
	}
}

// onlyUnreachableLeft reports whether all that is left of the crawl is the URLs of hosts
// whose robots.txt is unreachable and due to be checked again (c.robotsWaiting): nothing in
// flight, nothing else queued. A shared crawl's other workers may have work: never there.
// Dispatcher only.
func (c *Crawler) onlyUnreachableLeft() bool {
	if c.shared != nil || c.inflight > 0 || len(c.robotsWaiting) == 0 {
		return false
	}
	queued := c.fr.Counts().Queued
	for _, h := range c.fr.Hosts() {
		if c.robotsWaiting[h.Host] {
			queued -= h.Queued
		}
	}
	return queued == 0
}

// settleUnreachable is called when all that is left is unreachable hosts: it gives up on each
// whose next check would come later than retry.GiveUpIdle allows (its URLs then fail as
// robots-unreachable), says once for each other one what is waited for, and reports whether
// it gave up on any. Dispatcher only.
func (c *Crawler) settleUnreachable(now time.Time) (gaveUp bool) {
	for host := range c.robotsWaiting {
		c.mu.Lock()
		r := c.hosts[host]
		c.mu.Unlock()
		if r == nil {
			continue
		}
		rs := &r.robots
		since, next := rs.unreachableSince()
		if retry.GiveUpIdle(since, next, now) {
			rs.giveUp()
			delete(c.robotsWaiting, host)
			c.sched.wake(host)
			c.hostFailed(host, fmt.Sprintf("robots.txt unreachable for %s (%d tries): %s; its URLs fail (run again with --retry failed to try them again)",
				now.Sub(since).Round(time.Second), rs.failures(), rs.lastProblem()))
			gaveUp = true
			continue
		}
		if !c.idleTold[host] {
			c.idleTold[host] = true
			c.log.Info("nothing left but an unreachable host: waiting for its robots.txt", "host", host,
				"tries", rs.failures(), "next_try_in", next.Sub(now).Round(time.Second).String(),
				"gives_up_in", since.Add(retry.IdleUnreachable).Sub(now).Round(time.Second).String())
		}
	}
	return gaveUp
}
