package hostlimit

import "time"

// Load returns a snapshot of host, restoring it from the store first if it is not in memory.
// It is how a reader of a stopped crawl (crawl status) sees the rates the crawl learned.
func (r *Registry) Load(now time.Time, host string) HostStats {
	h := r.lockedHost(now, host)
	defer h.mu.Unlock()
	return h.statsLocked(now)
}
