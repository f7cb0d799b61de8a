package crawler

import "sync"

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
