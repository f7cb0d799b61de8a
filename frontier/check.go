package frontier

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.etcd.io/bbolt"
)

// Check scans the whole frontier (O(URLs) time, O(hosts) memory) and verifies its invariants,
// one family per function below: every record is its URL's (checkRecords), and every queued
// one and its queue or delayed entry point at each other, one to one (checkRecords,
// checkEntries); host IDs and names agree (checkHostIDs); the per-host, total and per-reason
// counters on disk equal what the records say, and the ones in memory equal the ones on disk
// (checkCounters); every lease is a queued URL (checkLeases); the in-memory seen-set holds every
// URL of the store, unless it reached its bound (Options.SeenInMemory). It returns nil or an
// error wrapping ErrCorrupt that lists what is wrong. Call it when no other Frontier method is
// running (tests, `crawl status --check`).
func (f *Frontier) Check() error {
	f.leaseMu.Lock()
	defer f.leaseMu.Unlock()
	f.promoteMu.Lock()
	defer f.promoteMu.Unlock()

	if err := f.index(); err != nil {
		return fmt.Errorf("frontier: check: %w", err)
	}
	c := &checker{f: f, hosts: map[string]*tally{}, failedBy: map[string]int{}, excludedBy: map[string]int{}, disk: map[string]int{}}
	err := f.bolt.View(func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketURLs) == nil || tx.Bucket(bucketHosts) == nil || tx.Bucket(bucketCounts) == nil {
			return nil // never opened for writing: nothing to check
		}
		t := f.reader(tx)
		for _, check := range []func(*txn) error{c.checkRecords, c.checkEntries, c.checkHostIDs, c.readCounters} {
			if err := check(t); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("frontier: check: %w", err)
	}
	f.mu.Lock()
	c.checkCounters()
	leased := c.leasedKeys()
	f.mu.Unlock()
	if err := f.bolt.View(func(tx *bbolt.Tx) error { c.checkLeases(f.reader(tx), leased); return nil }); err != nil {
		return fmt.Errorf("frontier: check: %w", err)
	}
	if len(c.problems) > 0 {
		return fmt.Errorf("%w: %s", ErrCorrupt, strings.Join(c.problems, "; "))
	}
	return nil
}

// checker collects what one Check found.
type checker struct {
	f            *Frontier
	problems     []string          // the first 20
	hosts        map[string]*tally // by host
	failedBy     map[string]int    // failed records by reason
	excludedBy   map[string]int    // excluded records by reason
	disk         map[string]int    // the counters stored in bucketCounts, by name
	firstDelayed []byte            // the key of the first delayed entry
}

// tally is what Check counted of one host.
type tally struct {
	rec            hostCounts // from the records
	queue, delayed int        // entries
	disk           hostCounts // stored counters
}

func (c *checker) bad(format string, args ...any) {
	if len(c.problems) < 20 {
		c.problems = append(c.problems, fmt.Sprintf(format, args...))
	}
}

func (c *checker) host(h string) *tally {
	t := c.hosts[h]
	if t == nil {
		t = new(tally)
		c.hosts[h] = t
	}
	return t
}

// checkRecords checks each record: it decodes, is named by its URL's fingerprint, is in the
// in-memory seen-set, which finds it where it is (one record per fingerprint), and, if queued,
// has the queue or delayed entry it names, of its host and its URL (and otherwise names none).
// It tallies the records by host, state and reason.
func (c *checker) checkRecords(t *txn) error {
	return t.eachRecord(func(at place, v []byte) error {
		k := at.key
		r, err := t.record(v)
		if err != nil {
			c.bad("record %x: %v", k, err)
			return nil
		}
		if found, _ := t.get(k); len(k) != 8 || r.url == "" || !bytes.Equal(fpBytes(sum(c.f.key, r.url)), k) {
			c.bad("record %x is of %q, whose fingerprint is another", k, r.url)
		} else if !c.f.seen.holds(binary.BigEndian.Uint64(k)) {
			c.bad("%q is not in the in-memory seen-set", r.url)
		} else if !bytes.Equal(found.seq, at.seq) {
			c.bad("%q: the in-memory seen-set finds its record at %x, not at %x", r.url, found.seq, at.seq)
		}
		c.count(r, r.state == stQueued && c.checkQueued(t, k, r))
		if r.state != stQueued && r.qkey != nil {
			c.bad("%s %q still has a queue key", stateNames[r.state], r.url)
		}
		return nil
	})
}

// count tallies record r by host, state and reason; delayed says its queue entry is a delayed one.
func (c *checker) count(r record, delayed bool) {
	h := c.host(r.host)
	switch r.state {
	case stQueued:
		h.rec.Queued++
		if delayed {
			h.rec.Delayed++
		}
	case stFetched:
		h.rec.Fetched++
	case stFailed:
		h.rec.Failed++
		c.failedBy[r.reason]++
	case stExcluded:
		h.rec.Excluded++
		c.excludedBy[r.reason]++
	}
}

// checkQueued checks that the queued record r under key k has its entry, and reports whether
// that entry is a delayed one.
func (c *checker) checkQueued(t *txn, k []byte, r record) (delayed bool) {
	if ev := t.delayed.Get(r.qkey); ev != nil {
		_, h, url, err := parseDelayed(r.qkey, ev)
		if err != nil || h != r.host || url != r.url {
			c.bad("queued %q: delayed entry %x is for %q of %q (%v)", r.url, r.qkey, url, h, err)
		}
		return true
	}
	ev := t.qGet(r.qkey)
	fp, isFP := queueRef(ev)
	switch {
	case ev == nil:
		c.bad("queued %q: no queue or delayed entry %x", r.url, r.qkey)
	case !bytes.HasPrefix(r.qkey, idQueuePrefix(r.hostID)):
		c.bad("queued %q: queue entry %x is not of host %q", r.url, r.qkey, r.host)
	case !isFP || !bytes.Equal(fp, k):
		c.bad("queued %q: queue entry %x holds %x", r.url, r.qkey, ev)
	}
	return false
}

// checkEntries counts the queue and delayed entries by host (checkCounters compares them with
// the queued records) and checks that their keys and values parse.
func (c *checker) checkEntries(t *txn) error {
	if t.queues != nil {
		if err := t.queues.ForEach(func(k, _ []byte) error {
			b := t.queues.Bucket(k)
			if len(k) != 4 || b == nil {
				c.bad("queue %x", k)
				return nil
			}
			name, err := t.hostName(binary.BigEndian.Uint32(k))
			if err != nil {
				c.bad("queue %x: %v", k, err)
				return nil
			}
			return b.ForEach(func(k, v []byte) error {
				if _, ok := queueRef(v); len(k) != 8 || !ok {
					c.bad("queue of %q: entry %x: %x", name, k, v)
				}
				c.host(name).queue++
				return nil
			})
		}); err != nil {
			return err
		}
	}
	return t.delayed.ForEach(func(k, v []byte) error {
		if c.firstDelayed == nil {
			c.firstDelayed = bytes.Clone(k)
		}
		_, h, _, err := parseDelayed(k, v)
		if err != nil {
			c.bad("delayed %x: %v", k, err)
			return nil
		}
		c.host(h).delayed++
		return nil
	})
}

// checkHostIDs checks that each host ID names a host that has that ID, and the other way round.
func (c *checker) checkHostIDs(t *txn) error {
	if t.hostIDs != nil {
		if err := t.hostIDs.ForEach(func(k, v []byte) error {
			_, id, err := decodeHost(t.hosts.Get(v))
			if len(k) != 4 || err != nil || id != binary.BigEndian.Uint32(k) {
				c.bad("host ID %x is of %q, whose ID is %d (%v)", k, v, id, err)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return t.hosts.ForEach(func(k, v []byte) error {
		_, id, err := decodeHost(v)
		if err != nil {
			return nil // readCounters reports it
		}
		if name, err := t.hostName(id); id != 0 && (err != nil || name != string(k)) {
			c.bad("host %q has ID %d, of %q (%v)", k, id, name, err)
		}
		return nil
	})
}

// readCounters reads the counters stored per host and in bucketCounts.
func (c *checker) readCounters(t *txn) error {
	if err := t.hosts.ForEach(func(k, v []byte) error {
		cs, _, err := decodeHost(v)
		if err != nil {
			c.bad("host %q counters: %v", k, err)
			return nil
		}
		c.host(hostFromBucketKey(k)).disk = cs
		return nil
	}); err != nil {
		return err
	}
	return t.tx.Bucket(bucketCounts).ForEach(func(k, v []byte) error {
		n, err := counterValue(v)
		if err != nil {
			c.bad("counter %q: %v", k, err)
		}
		c.disk[string(k)] = n
		return nil
	})
}

// checkCounters checks, per host, that the queued records match the entries, that the counters
// on disk match the records and the ones in memory match those on disk; then the same for the
// totals and the per-reason counters, and the earliest delayed time. f.mu must be held.
func (c *checker) checkCounters() {
	f := c.f
	var sum hostCounts
	for name, t := range c.hosts {
		r := t.rec
		if t.queue+t.delayed != r.Queued || t.delayed != r.Delayed {
			c.bad("host %q: %d queued records (%d delayed), %d queue + %d delayed entries", name, r.Queued, r.Delayed, t.queue, t.delayed)
		}
		d := t.disk
		d.LastError = ""
		if d != r {
			c.bad("host %q: counters on disk %+v, records say %+v", name, d, r)
		}
		sum.add(&r)
		var mem hostCounts
		if m := f.hosts[name]; m != nil {
			mem = m.hostCounts
		}
		if mem != t.disk {
			c.bad("host %q: counters in memory %+v, on disk %+v", name, mem, t.disk)
		}
	}
	for name, h := range f.hosts {
		if c.hosts[name] == nil && h.hostCounts != (hostCounts{}) {
			c.bad("host %q: counters in memory %+v, none on disk", name, h.hostCounts)
		}
	}
	tot := hostCounts{Queued: c.disk[countQueued], Delayed: c.disk[countDelayed], Fetched: c.disk[countFetched],
		Failed: c.disk[countFailed], Excluded: c.disk[countExcluded]}
	if tot != sum {
		c.bad("totals on disk %+v, sum of hosts %+v", tot, sum)
	}
	if f.total != tot {
		c.bad("totals in memory %+v, on disk %+v", f.total, tot)
	}
	for _, r := range []struct {
		prefix  string
		records map[string]int
		mem     map[string]int
	}{{prefixFailed, c.failedBy, f.failedBy}, {prefixExclude, c.excludedBy, f.excludedBy}} {
		disk := make(map[string]int)
		for k, n := range c.disk {
			if reason, ok := strings.CutPrefix(k, r.prefix); ok && n != 0 {
				disk[reason] = n
			}
		}
		mem := maps.Clone(r.mem)
		maps.DeleteFunc(mem, func(_ string, n int) bool { return n == 0 })
		if !maps.Equal(disk, r.records) || !maps.Equal(mem, disk) {
			c.bad("%q reasons: records %v, disk %v, memory %v", strings.TrimSuffix(r.prefix, "\x00"), r.records, disk, mem)
		}
	}
	if c.disk[countDropped] != f.dropped {
		c.bad("dropped: %d on disk, %d in memory", c.disk[countDropped], f.dropped)
	}
	if c.firstDelayed != nil && f.earliest.After(keyTime(binary.BigEndian.Uint64(c.firstDelayed))) {
		c.bad("earliest delayed time %v is after the first delayed entry %v", f.earliest, keyTime(binary.BigEndian.Uint64(c.firstDelayed)))
	}
}

// leasedKeys returns the queue keys leased, by host, and checks the lease counter. f.mu must be
// held.
func (c *checker) leasedKeys() map[string][]string {
	keys := make(map[string][]string)
	n := 0
	for name, h := range c.f.hosts {
		n += len(h.leased)
		if len(h.leased) > 0 {
			keys[name] = slices.Collect(maps.Keys(h.leased))
		}
	}
	if n != c.f.leases {
		c.bad("%d leases held, counter says %d", n, c.f.leases)
	}
	return keys
}

// checkLeases checks that every leased key is a queue entry.
func (c *checker) checkLeases(t *txn, leased map[string][]string) {
	for name, keys := range leased {
		for _, k := range keys {
			if t.qGet([]byte(k)) == nil {
				c.bad("lease %q of host %q is not in the queue", k, name)
			}
		}
	}
}
