package fleet

import (
	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/termsafe"
)

// FrontierStats count what happened to this worker's results.
type FrontierStats struct {
	Refused     int // results and releases refused: the partition is another worker's (fenced) or the URL was reclaimed
	Dropped     int // partitions given up: lost, lapsed or released as surplus
	Outages     int // times Redis became unreachable
	Restarts    int // times a Redis node was found restarted or replaced (a new run_id)
	Reacquired  int // partitions acquired
	SetAside    int // unreadable values moved to their partition's bad list (Store.setAside)
	Recounted   int // partitions whose damaged counters were recounted (Frontier.repairCounts)
	LastRefused string
}

// Stats returns the counts of refused results, dropped partitions, Redis outages and restarts.
func (f *Frontier) Stats() FrontierStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// Complete stores a Fetched result's page in the worker's store (Join), then records the result
// of l in Redis under the ownership l was leased with: when it returns nil, the page, the URL's
// state and its links are durable (crawler.Frontier), or the result was refused. A result
// refused because the partition is another worker's (fenced) or the URL was reclaimed is
// counted in Stats and returns nil. While Redis is unreachable it retries, for as long as the
// partition may still be this worker's. A Retry's NotBefore is a local time. Results completed
// at once by several goroutines go to Redis together, one script per partition (commits);
// links the worker knows were recorded already are not sent again (recentLinks).
func (f *Frontier) Complete(fl frontier.Lease, r frontier.Result) error {
	f.mu.Lock()
	l, ok := f.inflight.leases[fl.URL]
	if r.Kind == frontier.Retry && !r.NotBefore.IsZero() {
		r.NotBefore = r.NotBefore.Add(f.view.offset)
	}
	f.mu.Unlock()
	if !ok {
		f.refused(fl.URL, "not leased")
		return nil
	}
	if err := f.storePage(fl, r); err != nil {
		return err
	}
	r.Page = nil // stored; Redis takes the URL's state and links
	r, sent := f.recent.filter(r)
	out := f.commits.commit(f, &pending{l: l, r: r, sent: sent})
	f.forget(l)
	if out.kind == refused {
		f.refused(l.URL, out.why)
		return nil
	}
	if f.linksElsewhere(l.Partition, r) {
		f.mu.Lock()
		f.view.outboxed[l.Partition] = true
		f.mu.Unlock()
	}
	f.count(l.Host, r)
	return nil
}

// linksElsewhere reports whether r has links or exclusions of partitions other than p: those
// go to p's outbox (CompleteBatch), for Forward.
func (f *Frontier) linksElsewhere(p int, r frontier.Result) bool {
	for _, e := range r.Links {
		if !f.s.ownLink(p, e.Host) {
			return true
		}
	}
	for _, x := range r.Excluded {
		if !f.s.ownLink(p, x.Host) {
			return true
		}
	}
	return false
}

// count adds a result this worker recorded to its host's counters.
func (f *Frontier) count(host string, r frontier.Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.done[host]
	if c == nil {
		c = &frontier.HostCount{Host: host}
		f.done[host] = c
	}
	switch r.Kind {
	case frontier.Fetched:
		c.Fetched++
		f.pages++
	case frontier.Failed:
		c.Failed++
		c.LastError = termsafe.Escape(r.Detail)
	case frontier.Excluded:
		c.Excluded++
	}
}

func (f *Frontier) refused(url, why string) {
	f.mu.Lock()
	f.stats.Refused++
	f.stats.LastRefused = url + ": " + why
	f.mu.Unlock()
	f.opts.Log.Warn("result refused: the URL is another worker's now", "url", url, "why", why)
}

// Hosts returns the hosts this worker crawled or holds, with the results it recorded for each
// and the URLs it has in flight (the crawl's per-host counters are not kept in Redis).
func (f *Frontier) Hosts() []frontier.HostCount {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := make(map[string]frontier.HostCount, len(f.done)+f.hosts.Len())
	for name, c := range f.done {
		m[name] = *c
	}
	for name := range f.hosts.All() {
		if _, ok := m[name]; !ok {
			m[name] = frontier.HostCount{Host: name}
		}
	}
	for _, l := range f.inflight.leases {
		c := m[l.Host]
		c.Host = l.Host
		c.InFlight++
		c.Queued++
		m[l.Host] = c
	}
	out := make([]frontier.HostCount, 0, len(m))
	for _, c := range m {
		out = append(out, c)
	}
	return out
}
