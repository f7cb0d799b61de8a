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

// Check scans the whole frontier (O(URLs) time, O(hosts) memory) and verifies its invariants:
// every queued URL record and every queue or delayed entry point at each other, one to one; the
// per-host, total and per-reason counters on disk equal what the records say, and the ones in
// memory equal the ones on disk; every lease is a queued URL; the in-memory seen-set holds
// every URL of the store, unless it reached its bound (Options.SeenInMemory). It returns nil or an error
// wrapping ErrCorrupt that lists what is wrong. Call it when no other Frontier method is
// running (tests, `crawl status --check`).
func (f *Frontier) Check() error {
	f.leaseMu.Lock()
	defer f.leaseMu.Unlock()
	f.promoteMu.Lock()
	defer f.promoteMu.Unlock()

	var problems []string
	bad := func(format string, args ...any) {
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	type tally struct {
		rec            hostCounts // from the records
		queue, delayed int        // entries
		disk           hostCounts // stored counters
	}
	hosts := make(map[string]*tally)
	host := func(h string) *tally {
		t := hosts[h]
		if t == nil {
			t = new(tally)
			hosts[h] = t
		}
		return t
	}
	failedBy, excludedBy := make(map[string]int), make(map[string]int)
	diskCounts := make(map[string]int)
	var firstDelayed []byte

	err := f.bolt.View(func(tx *bbolt.Tx) error {
		seen, queue, delayed := tx.Bucket(bucketSeen), tx.Bucket(bucketQueue), tx.Bucket(bucketDelayed)
		hb, cb := tx.Bucket(bucketHosts), tx.Bucket(bucketCounts)
		if seen == nil || queue == nil || delayed == nil || hb == nil || cb == nil {
			return nil // never opened for writing: nothing to check
		}
		rt := f.reader(tx)
		checkRecord := func(b recordBucket, k, v []byte) {
			r, err := rt.record(v)
			if err != nil {
				bad("record %q: %v", k, err)
				return
			}
			switch {
			case b == inURLs && (len(k) != 8 || r.url == "" || !bytes.Equal(fpBytes(sum(f.key, r.url)), k)):
				bad("record %x is of %q, whose fingerprint is another", k, r.url)
			case b == inURLs && f.legacy == legacySome && seen.Get(seenKey(r.url)) != nil:
				bad("%q has a record of each format", r.url)
			case b == inSeen && r.url != "":
				bad("legacy record %q holds a URL", k)
			}
			if fp, ok := f.recordFP(b, k, r); ok && !f.seen.holds(fp) {
				bad("%q is not in the in-memory seen-set", k)
			}
			url := r.url
			if b == inSeen && k[0] != 0xff {
				url = string(k) // else "": its entries' URLs are checked against the hashed key
			}
			t := host(r.host)
			switch r.state {
			case stQueued:
				t.rec.Queued++
				if ev := delayed.Get(r.qkey); ev != nil {
					t.rec.Delayed++
					_, h, durl, err := parseDelayed(r.qkey, ev)
					if err != nil || h != r.host || !matches(b, k, url, durl) {
						bad("queued %q: delayed entry %x is for %q (%v)", k, r.qkey, durl, err)
					}
				} else if ev := rt.qGet(r.qkey); ev != nil {
					fp, isFP := queueRef(ev)
					var qurl string
					if !isFP {
						qurl, err = queueURL(r.host, ev)
					}
					switch {
					case b == inURLs && !bytes.HasPrefix(r.qkey, idQueuePrefix(r.hostID)), b == inSeen && !bytes.HasPrefix(r.qkey, hostPrefix(r.host)):
						bad("queued %q: queue entry %x is not of host %q", k, r.qkey, r.host)
					case b == inURLs && !bytes.Equal(fp, k):
						bad("queued %q: queue entry %x holds %q", k, r.qkey, ev)
					case b == inSeen && (isFP || err != nil || !matches(b, k, url, qurl)):
						bad("queued %q: queue entry %x is for %q (%v)", k, r.qkey, qurl, err)
					}
				} else {
					bad("queued %q: no queue or delayed entry %x", k, r.qkey)
				}
			case stFetched:
				t.rec.Fetched++
			case stFailed:
				t.rec.Failed++
				failedBy[r.reason]++
			case stExcluded:
				t.rec.Excluded++
				excludedBy[r.reason]++
			}
			if r.state != stQueued && r.qkey != nil {
				bad("%s %q still has a queue key", stateNames[r.state], k)
			}
		}
		for _, b := range []recordBucket{inSeen, inURLs} {
			if rb := rt.bucket(b); rb != nil {
				if err := rb.ForEach(func(k, v []byte) error { checkRecord(b, k, v); return nil }); err != nil {
					return err
				}
			}
		}
		if qs := tx.Bucket(bucketQueues); qs != nil {
			if err := qs.ForEach(func(k, v []byte) error {
				b := qs.Bucket(k)
				if len(k) != 4 || b == nil {
					bad("queue %x", k)
					return nil
				}
				name, err := rt.hostName(binary.BigEndian.Uint32(k))
				if err != nil {
					bad("queue %x: %v", k, err)
					return nil
				}
				return b.ForEach(func(k, v []byte) error {
					if len(k) != 8 {
						bad("queue of %q: key %x", name, k)
					}
					host(name).queue++
					return nil
				})
			}); err != nil {
				return err
			}
		}
		if err := queue.ForEach(func(k, v []byte) error {
			switch {
			case len(k) < 10 || k[len(k)-9] != 0 || k[0] == 0:
				bad("queue key %x", k)
			default:
				host(string(k[:len(k)-9])).queue++
			}
			return nil
		}); err != nil {
			return err
		}
		if err := delayed.ForEach(func(k, v []byte) error {
			if firstDelayed == nil {
				firstDelayed = bytes.Clone(k)
			}
			_, h, _, err := parseDelayed(k, v)
			if err != nil {
				bad("delayed %x: %v", k, err)
				return nil
			}
			host(h).delayed++
			return nil
		}); err != nil {
			return err
		}
		if ib := tx.Bucket(bucketHostIDs); ib != nil {
			if err := ib.ForEach(func(k, v []byte) error {
				_, id, err := decodeHost(hb.Get(v))
				if len(k) != 4 || err != nil || id != binary.BigEndian.Uint32(k) {
					bad("host ID %x is of %q, whose ID is %d (%v)", k, v, id, err)
				}
				return nil
			}); err != nil {
				return err
			}
		}
		if err := hb.ForEach(func(k, v []byte) error {
			c, id, err := decodeHost(v)
			if err != nil {
				bad("host %q counters: %v", k, err)
				return nil
			}
			if name, err := rt.hostName(id); id != 0 && (err != nil || name != string(k)) {
				bad("host %q has ID %d, of %q (%v)", k, id, name, err)
			}
			t := host(hostFromBucketKey(k))
			t.disk = c
			return nil
		}); err != nil {
			return err
		}
		return cb.ForEach(func(k, v []byte) error {
			n, err := counterValue(v)
			if err != nil {
				bad("counter %q: %v", k, err)
			}
			diskCounts[string(k)] = n
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("frontier: check: %w", err)
	}

	var sum hostCounts
	f.mu.Lock()
	leases := 0
	for name, t := range hosts {
		r := t.rec
		if t.queue+t.delayed != r.Queued || t.delayed != r.Delayed {
			bad("host %q: %d queued records (%d delayed), %d queue + %d delayed entries", name, r.Queued, r.Delayed, t.queue, t.delayed)
		}
		d := t.disk
		d.LastError = ""
		if d != r {
			bad("host %q: counters on disk %+v, records say %+v", name, d, r)
		}
		sum.add(&r)
		m := f.hosts[name]
		var mem hostCounts
		if m != nil {
			mem = m.hostCounts
		}
		if mem != t.disk {
			bad("host %q: counters in memory %+v, on disk %+v", name, mem, t.disk)
		}
	}
	for name, h := range f.hosts {
		if hosts[name] == nil && h.hostCounts != (hostCounts{}) {
			bad("host %q: counters in memory %+v, none on disk", name, h.hostCounts)
		}
		leases += len(h.leased)
	}
	tot := hostCounts{Queued: diskCounts[countQueued], Delayed: diskCounts[countDelayed], Fetched: diskCounts[countFetched],
		Failed: diskCounts[countFailed], Excluded: diskCounts[countExcluded]}
	if tot != sum {
		bad("totals on disk %+v, sum of hosts %+v", tot, sum)
	}
	if f.total != tot {
		bad("totals in memory %+v, on disk %+v", f.total, tot)
	}
	for _, c := range []struct {
		prefix  string
		records map[string]int
		mem     map[string]int
	}{{prefixFailed, failedBy, f.failedBy}, {prefixExclude, excludedBy, f.excludedBy}} {
		disk := make(map[string]int)
		for k, n := range diskCounts {
			if r, ok := strings.CutPrefix(k, c.prefix); ok && n != 0 {
				disk[r] = n
			}
		}
		mem := maps.Clone(c.mem)
		maps.DeleteFunc(mem, func(_ string, n int) bool { return n == 0 })
		if !maps.Equal(disk, c.records) || !maps.Equal(mem, disk) {
			bad("%q reasons: records %v, disk %v, memory %v", strings.TrimSuffix(c.prefix, "\x00"), c.records, disk, mem)
		}
	}
	if diskCounts[countDropped] != f.dropped {
		bad("dropped: %d on disk, %d in memory", diskCounts[countDropped], f.dropped)
	}
	if leases != f.leases {
		bad("%d leases held, counter says %d", leases, f.leases)
	}
	if firstDelayed != nil && f.earliest.After(keyTime(binary.BigEndian.Uint64(firstDelayed))) {
		bad("earliest delayed time %v is after the first delayed entry %v", f.earliest, keyTime(binary.BigEndian.Uint64(firstDelayed)))
	}
	hostsWithLeases := make([]string, 0)
	for name, h := range f.hosts {
		if len(h.leased) > 0 {
			hostsWithLeases = append(hostsWithLeases, name)
		}
	}
	leasedKeys := make(map[string][]string)
	for _, name := range hostsWithLeases {
		leasedKeys[name] = slices.Collect(maps.Keys(f.hosts[name].leased))
	}
	f.mu.Unlock()

	if err := f.bolt.View(func(tx *bbolt.Tx) error {
		q := tx.Bucket(bucketQueue)
		rt := f.reader(tx)
		for name, keys := range leasedKeys {
			for _, k := range keys {
				if q == nil || rt.qGet([]byte(k)) == nil {
					bad("lease %q of host %q is not in the queue", k, name)
				}
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("frontier: check: %w", err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrCorrupt, strings.Join(problems, "; "))
	}
	return nil
}

// matches reports whether url, the URL an entry holds, is the one of the record under key k of
// bucket b whose URL is recordURL ("" for a legacy record keyed by a hash).
func matches(b recordBucket, k []byte, recordURL, url string) bool {
	if b == inSeen && recordURL == "" {
		return bytes.Equal(seenKey(url), k)
	}
	return url == recordURL
}

// recordFP returns the fingerprint of the URL of record r under key k of bucket b, unless it is
// a legacy record keyed by a hash.
func (f *Frontier) recordFP(b recordBucket, k []byte, r record) (uint64, bool) {
	switch {
	case b == inURLs && len(k) == 8:
		return binary.BigEndian.Uint64(k), true
	case b == inSeen && len(k) > 0 && k[0] != 0xff:
		return sum(f.key, k), true
	}
	return 0, false
}
