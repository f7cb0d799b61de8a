package frontier

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/crawl-project/crawl/storage"
	"go.etcd.io/bbolt"
)

// promoteChunk bounds how many delayed URLs one transaction moves back into the queues.
var promoteChunk = 10000 // a variable for tests

// maxHost bounds the length of a host key.
const maxHost = 1024

// delta collects a transaction's counter changes: written to disk in the transaction, applied
// in memory after it committed.
type delta struct {
	hosts      map[string]*hostCounts
	failedBy   map[string]int
	excludedBy map[string]int
}

func newDelta() *delta {
	return &delta{hosts: make(map[string]*hostCounts), failedBy: make(map[string]int), excludedBy: make(map[string]int)}
}

func (d *delta) host(name string) *hostCounts {
	h := d.hosts[name]
	if h == nil {
		h = new(hostCounts)
		d.hosts[name] = h
	}
	return h
}

// write adds d to the counters stored in tx.
func (d *delta) write(tx *bbolt.Tx) error {
	hb, cb := tx.Bucket(bucketHosts), tx.Bucket(bucketCounts)
	var tot hostCounts
	for name, hd := range d.hosts {
		c, err := decodeHostCounts(hb.Get(hostBucketKey(name)))
		if err != nil {
			return fmt.Errorf("%w: host %q: %v", ErrCorrupt, name, err)
		}
		c.add(hd)
		if err := hb.Put(hostBucketKey(name), c.encode()); err != nil {
			return err
		}
		tot.add(&hostCounts{Queued: hd.Queued, Delayed: hd.Delayed, Fetched: hd.Fetched, Failed: hd.Failed, Excluded: hd.Excluded})
	}
	for _, c := range []struct {
		name string
		n    int
	}{{countQueued, tot.Queued}, {countDelayed, tot.Delayed}, {countFetched, tot.Fetched},
		{countFailed, tot.Failed}, {countExcluded, tot.Excluded}} {
		if err := addCounter(cb, c.name, c.n); err != nil {
			return err
		}
	}
	for r, n := range d.failedBy {
		if err := addCounter(cb, prefixFailed+r, n); err != nil {
			return err
		}
	}
	for r, n := range d.excludedBy {
		if err := addCounter(cb, prefixExclude+r, n); err != nil {
			return err
		}
	}
	return nil
}

func addCounter(b *bbolt.Bucket, name string, n int) error {
	if n == 0 {
		return nil
	}
	cur := 0
	if v := b.Get([]byte(name)); v != nil {
		var err error
		if cur, err = counterValue(v); err != nil {
			return fmt.Errorf("%w: counter %q: %v", ErrCorrupt, name, err)
		}
	}
	return b.Put([]byte(name), counterBytes(cur+n))
}

// txn is one write transaction's view of the frontier's buckets.
type txn struct {
	tx                          *bbolt.Tx
	seen, queue, delayed, hosts *bbolt.Bucket
	d                           *delta
	budget                      int                   // Options.HostBudget; 0: none
	stored                      map[string]hostCounts // host counters on disk, read once per transaction
	// added holds the seen records of new URLs until flush writes them in key order: bbolt
	// inserts into a node's sorted slice, so a page's many links put in document order would
	// cost time quadratic in their number (a page with 100 000 links took seconds).
	added map[string][]byte
	// claims collects the fingerprints of the URLs the transaction adds; nil: none kept.
	claims *claims
}

// known reports whether the URL of seen-set key sk is known: added by this transaction, in
// the in-memory seen-set, or on disk (read only when the in-memory set cannot tell). A URL it
// reports unknown has its fingerprint claimed for this transaction.
func (t *txn) known(sk []byte) bool {
	if _, ok := t.added[string(sk)]; ok {
		return true
	}
	if t.claims == nil {
		return t.seen.Get(sk) != nil
	}
	fp := fingerprint(sk)
	switch t.claims.set.lookup(fp) {
	case answerSeen:
		return true
	case answerAsk:
		if t.seen.Get(sk) != nil {
			return true
		}
	}
	t.claims.set.claim(fp)
	t.claims.fps = append(t.claims.fps, fp)
	return false
}

// add records a new URL's seen record, to be written by flush.
func (t *txn) add(sk, v []byte) {
	if t.added == nil {
		t.added = make(map[string][]byte)
	}
	t.added[string(sk)] = v
}

// flush writes the added seen records in key order; call it once, before the counters.
func (t *txn) flush() error {
	keys := make([]string, 0, len(t.added))
	for k := range t.added {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := t.seen.Put([]byte(k), t.added[k]); err != nil {
			return err
		}
	}
	t.added = nil
	return nil
}

func newTxn(tx *bbolt.Tx, d *delta) *txn {
	t := &txn{tx: tx, seen: tx.Bucket(bucketSeen), queue: tx.Bucket(bucketQueue), delayed: tx.Bucket(bucketDelayed),
		hosts: tx.Bucket(bucketHosts), d: d}
	// Keys of the queue (per host) and of the delayed set (by time) mostly grow: pack their
	// pages fuller than the default half when they split. (The setting lasts one transaction.)
	t.queue.FillPercent, t.delayed.FillPercent = appendFill, appendFill
	return t
}

const appendFill = 0.9

// used returns how much of its budget host has spent: its queued, fetched and failed URLs, as
// stored before this transaction plus what the transaction changed so far.
func (t *txn) used(host string) (int, error) {
	c, ok := t.stored[host]
	if !ok {
		var err error
		if c, err = decodeHostCounts(t.hosts.Get(hostBucketKey(host))); err != nil {
			return 0, fmt.Errorf("%w: host %q: %v", ErrCorrupt, host, err)
		}
		if t.stored == nil {
			t.stored = make(map[string]hostCounts)
		}
		t.stored[host] = c
	}
	if d := t.d.hosts[host]; d != nil {
		c.add(d)
	}
	return c.Queued + c.Fetched + c.Failed, nil
}

// enqueue records e as queued and appends it to its host's queue, unless it was seen before.
// Over the host budget, e is recorded as excluded (ReasonLimit) instead and false is returned.
func (t *txn) enqueue(e Entry) (bool, error) {
	sk := seenKey(e.URL)
	if t.known(sk) {
		return false, nil
	}
	if t.budget > 0 {
		n, err := t.used(e.Host)
		if err != nil {
			return false, err
		}
		if n >= t.budget {
			_, err := t.exclude(Exclusion{Entry: e, Reason: ReasonLimit,
				Detail: fmt.Sprintf("host budget of %d URLs reached", t.budget)})
			return false, err
		}
	}
	seq, err := t.queue.NextSequence()
	if err != nil {
		return false, err
	}
	qk := queueKey(e.Host, seq)
	if err := t.queue.Put(qk, queueValue(e.Host, e.URL)); err != nil {
		return false, err
	}
	r := record{state: stQueued, depth: e.Depth, hops: e.Hops, qkey: qk, host: e.Host, parent: e.Parent, role: e.Role}
	t.add(sk, r.encode())
	t.d.host(e.Host).Queued++
	return true, nil
}

// exclude records x as excluded, unless its URL was seen before.
func (t *txn) exclude(x Exclusion) (bool, error) {
	sk := seenKey(x.URL)
	if t.known(sk) {
		return false, nil
	}
	r := record{state: stExcluded, depth: x.Depth, hops: x.Hops, host: x.Host, parent: x.Parent, reason: x.Reason,
		detail: truncate(x.Detail, maxDetail), role: x.Role}
	t.add(sk, r.encode())
	t.d.host(x.Host).Excluded++
	t.d.excludedBy[x.Reason]++
	return true, nil
}

func validEntry(e Entry) error {
	if e.URL == "" || e.Host == "" || len(e.Host) > maxHost || strings.IndexByte(e.Host, 0) >= 0 || e.Depth < 0 || e.Hops < 0 || e.Role > RoleRequisite {
		return fmt.Errorf("%w: entry URL %q host %q depth %d", ErrInvalid, e.URL, e.Host, e.Depth)
	}
	return nil
}

func validExclusion(x Exclusion) error {
	if x.URL == "" || len(x.Host) > maxHost || strings.IndexByte(x.Host, 0) >= 0 || x.Depth < 0 {
		return fmt.Errorf("%w: exclusion URL %q host %q depth %d", ErrInvalid, x.URL, x.Host, x.Depth)
	}
	if x.Reason == "" || strings.IndexByte(x.Reason, 0) >= 0 {
		return fmt.Errorf("%w: exclusion of %q without a reason", ErrInvalid, x.URL)
	}
	return nil
}

// Add enqueues the entries whose URLs were never seen, in order, in one transaction, and returns
// how many it enqueued. Duplicates within entries count once. Entries over Options.HostBudget
// are recorded as excluded (ReasonLimit) instead and not counted.
func (f *Frontier) Add(entries []Entry) (added int, err error) {
	for _, e := range entries {
		if err := validEntry(e); err != nil {
			return 0, err
		}
	}
	var d *delta
	c := f.claims()
	err = f.bolt.Update(func(tx *bbolt.Tx) error {
		c.reset()
		d, added = newDelta(), 0
		t := newTxn(tx, d)
		t.budget, t.claims = f.budget, c
		for _, e := range entries {
			ok, err := t.enqueue(e)
			if err != nil {
				return fmt.Errorf("%s: %w", e.URL, err)
			}
			if ok {
				added++
			}
		}
		if err := t.flush(); err != nil {
			return err
		}
		return d.write(tx)
	})
	c.done(err)
	if err != nil {
		return 0, fmt.Errorf("frontier: add: %w", err)
	}
	f.mu.Lock()
	f.apply(d)
	f.mu.Unlock()
	return added, nil
}

// Exclude records the URLs of ex that were never seen as excluded (seeds out of scope…), in one
// transaction.
func (f *Frontier) Exclude(ex []Exclusion) error {
	for _, x := range ex {
		if err := validExclusion(x); err != nil {
			return err
		}
	}
	var d *delta
	c := f.claims()
	err := f.bolt.Update(func(tx *bbolt.Tx) error {
		c.reset()
		d = newDelta()
		t := newTxn(tx, d)
		t.claims = c
		for _, x := range ex {
			if _, err := t.exclude(x); err != nil {
				return fmt.Errorf("%s: %w", x.URL, err)
			}
		}
		if err := t.flush(); err != nil {
			return err
		}
		return d.write(tx)
	})
	c.done(err)
	if err != nil {
		return fmt.Errorf("frontier: exclude: %w", err)
	}
	f.mu.Lock()
	f.apply(d)
	f.mu.Unlock()
	return nil
}

// Lease hands out the oldest unleased URL of host that is ready at now (FIFO per host), first
// moving the delayed URLs due at now back into their queues. It reports false if host has none.
// A host may have any number of leases at once (its limiter decides). The lease lives in memory
// only: give it back with Complete or Release.
// testHookLeaseScan, if set (by tests only), runs inside Lease's read transaction before the scan.
var testHookLeaseScan func()

func (f *Frontier) Lease(now time.Time, host string) (Lease, bool, error) {
	if err := f.promote(now); err != nil {
		return Lease{}, false, err
	}
	f.leaseMu.Lock()
	defer f.leaseMu.Unlock()
	f.mu.Lock()
	h := f.hosts[host] // never removed from the map once created
	ready := h != nil && h.readyCount() > 0
	f.mu.Unlock()
	if !ready {
		return Lease{}, false, nil
	}
	var l Lease
	var found bool
	err := f.bolt.View(func(tx *bbolt.Tx) error {
		q, seen := tx.Bucket(bucketQueue), tx.Bucket(bucketSeen)
		if q == nil || seen == nil {
			return nil // a read-only store the frontier never wrote to
		}
		prefix := hostPrefix(host)
		if testHookLeaseScan != nil {
			testHookLeaseScan() // the snapshot is taken; let a test commit behind its back
		}
		c := q.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			f.mu.Lock()
			_, leased := h.leased[string(k)]
			f.mu.Unlock()
			if leased {
				continue
			}
			url, err := queueURL(host, v)
			if err != nil {
				return fmt.Errorf("%w: queue entry %q: %v", ErrCorrupt, k, err)
			}
			r, err := decodeRecord(seen.Get(seenKey(url)))
			if err != nil || r.state != stQueued || !bytes.Equal(r.qkey, k) {
				return fmt.Errorf("%w: queue entry %q of %s has no matching queued record (%v)", ErrCorrupt, k, url, err)
			}
			l = Lease{Entry: Entry{URL: url, Host: host, Depth: r.depth, Hops: r.hops, Parent: r.parent, Role: r.role}, Attempts: r.attempts, Prev: r.pageSeq, key: string(k)}
			found = true
			return nil
		}
		return nil
	})
	if err != nil {
		return Lease{}, false, fmt.Errorf("frontier: lease from %s: %w", host, err)
	}
	if !found {
		return Lease{}, false, nil
	}
	f.mu.Lock()
	if h.leased == nil {
		h.leased = make(map[string]struct{})
	}
	h.leased[l.key] = struct{}{}
	f.leases++
	f.touch(host)
	f.mu.Unlock()
	return l, true, nil
}

// Release gives back a lease without an outcome (at shutdown): the URL is leasable again, its
// attempts unchanged. Releasing a lease not held does nothing.
func (f *Frontier) Release(l Lease) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h := f.hosts[l.Host]; h != nil {
		if _, ok := h.leased[l.key]; ok {
			h.unlease(l.key)
			f.leases--
			f.touch(l.Host)
		}
	}
}

func validResult(r Result) error {
	switch r.Kind {
	case Fetched:
		for _, e := range r.Links {
			if err := validEntry(e); err != nil {
				return err
			}
		}
		for _, x := range r.Excluded {
			if err := validExclusion(x); err != nil {
				return err
			}
		}
	case Failed, Excluded:
		if r.Reason == "" || strings.IndexByte(r.Reason, 0) >= 0 {
			return fmt.Errorf("%w: %v result without a reason", ErrInvalid, r.Kind)
		}
	case Retry:
	default:
		return fmt.Errorf("%w: result kind %v", ErrInvalid, r.Kind)
	}
	return nil
}

// Complete records the outcome of l in one transaction: for Fetched, the page is stored, the URL
// marked fetched, its unseen links enqueued and its unseen exclusions recorded; for Failed and
// Excluded the URL is marked so; for Retry it moves to the delayed set until r.NotBefore. Only
// after the commit is the lease dropped; if Complete fails, nothing was written and the lease is
// still held (Complete may be retried, or the lease released). Concurrent calls share commits.
//
// For Fetched, r.Page.Seq is set to the page's storage sequence number.
func (f *Frontier) Complete(l Lease, r Result) error {
	if err := validResult(r); err != nil {
		return err
	}
	f.mu.Lock()
	h := f.hosts[l.Host]
	held := false
	if h != nil {
		_, held = h.leased[l.key]
	}
	f.mu.Unlock()
	if !held {
		return fmt.Errorf("%w: %s", ErrNotLeased, l.URL)
	}

	// bbolt's Batch may run fn more than once (and roll back all but the last run), so fn
	// starts each run from scratch and memory is updated only after the commit.
	var d *delta
	c := f.claims()
	fn := func(tx *bbolt.Tx) error {
		c.reset()
		d = newDelta()
		t := newTxn(tx, d)
		t.budget, t.claims = f.budget, c
		return t.complete(l, r)
	}
	var err error
	if f.inflight.Add(1) == 1 {
		err = f.bolt.Update(fn) // alone: no reason to wait for company
	} else {
		err = f.bolt.Batch(fn)
	}
	f.inflight.Add(-1)
	c.done(err)
	if err != nil {
		return fmt.Errorf("frontier: complete %s: %w", l.URL, err)
	}

	// Unlease under leaseMu: a Lease scanning a read snapshot taken before this commit still
	// sees the key in the queue, so the key must stay leased until that scan is over; any scan
	// that starts after we take leaseMu sees the commit.
	f.leaseMu.Lock()
	defer f.leaseMu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	h.unlease(l.key)
	f.leases--
	prevDelayed := f.total.Delayed
	f.apply(d)
	if r.Kind == Retry {
		nb := keyTime(timeKey(r.NotBefore))
		if prevDelayed == 0 || nb.Before(f.earliest) {
			f.earliest = nb
		}
		if f.tracking && (f.retryMin.IsZero() || nb.Before(f.retryMin)) {
			f.retryMin = nb
		}
	}
	return nil
}

// complete is Complete's transaction.
func (t *txn) complete(l Lease, r Result) error {
	d := t.d
	key := []byte(l.key)
	if t.queue.Get(key) == nil {
		return ErrNotLeased // completed concurrently by another call with the same lease
	}
	sk := seenKey(l.URL)
	rec, err := decodeRecord(t.seen.Get(sk))
	if err != nil || rec.state != stQueued || !bytes.Equal(rec.qkey, key) {
		return fmt.Errorf("%w: leased URL has no matching queued record (%v)", ErrCorrupt, err)
	}
	if err := t.queue.Delete(key); err != nil {
		return err
	}
	hd := d.host(l.Host)
	rec.qkey, rec.status, rec.reason, rec.detail = nil, r.Status, r.Reason, truncate(r.Detail, maxDetail)
	switch r.Kind {
	case Fetched:
		rec.state = stFetched
		rec.attempts++
		rec.reason, rec.detail = "", ""
		if r.Page != nil {
			seq, err := storage.PutPage(t.tx, r.Page)
			if err != nil {
				return err
			}
			rec.pageSeq, rec.status = seq, r.Page.Status
		}
		hd.Queued--
		hd.Fetched++
		for _, e := range r.Links {
			if _, err := t.enqueue(e); err != nil {
				return fmt.Errorf("link %s: %w", e.URL, err)
			}
		}
		for _, x := range r.Excluded {
			if _, err := t.exclude(x); err != nil {
				return fmt.Errorf("exclusion %s: %w", x.URL, err)
			}
		}
	case Failed:
		rec.state = stFailed
		rec.attempts++
		hd.Queued--
		hd.Failed++
		hd.LastError = r.Reason
		if rec.detail != "" {
			hd.LastError += ": " + rec.detail
		}
		d.failedBy[r.Reason]++
	case Excluded:
		rec.state = stExcluded
		hd.Queued--
		hd.Excluded++
		d.excludedBy[r.Reason]++
	case Retry:
		rec.attempts++
		seq, err := t.queue.NextSequence()
		if err != nil {
			return err
		}
		rec.qkey = delayedKey(r.NotBefore, seq)
		if err := t.delayed.Put(rec.qkey, delayedValue(l.Host, l.URL)); err != nil {
			return err
		}
		hd.Delayed++
	}
	if err := t.seen.Put(sk, rec.encode()); err != nil {
		return err
	}
	if err := t.flush(); err != nil {
		return err
	}
	return d.write(t.tx)
}

// due reports whether a delayed URL may be due at now.
func (f *Frontier) due(now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total.Delayed > 0 && !f.earliest.After(now)
}

// promote moves the delayed URLs due at now to the back of their hosts' queues.
func (f *Frontier) promote(now time.Time) error {
	if f.readOnly || !f.due(now) {
		return nil
	}
	f.promoteMu.Lock()
	defer f.promoteMu.Unlock()
	limit := timeKey(now)
	for f.due(now) {
		f.mu.Lock()
		f.tracking, f.retryMin = true, time.Time{}
		f.mu.Unlock()

		var d *delta
		var next time.Time
		err := f.bolt.Update(func(tx *bbolt.Tx) error {
			d, next = newDelta(), time.Time{}
			t := newTxn(tx, d)
			c := t.delayed.Cursor()
			n := 0
			for k, v := c.First(); k != nil; k, v = c.First() {
				nb, host, url, err := parseDelayed(k, v)
				if err != nil {
					return fmt.Errorf("%w: delayed entry %x: %v", ErrCorrupt, k, err)
				}
				if nb > limit || n == promoteChunk {
					next = keyTime(nb)
					break
				}
				sk := seenKey(url)
				rec, err := decodeRecord(t.seen.Get(sk))
				if err != nil || rec.state != stQueued || !bytes.Equal(rec.qkey, k) {
					return fmt.Errorf("%w: delayed %s has no matching queued record (%v)", ErrCorrupt, url, err)
				}
				seq, err := t.queue.NextSequence()
				if err != nil {
					return err
				}
				rec.qkey = queueKey(host, seq)
				if err := t.queue.Put(rec.qkey, queueValue(host, url)); err != nil {
					return err
				}
				if err := t.seen.Put(sk, rec.encode()); err != nil {
					return err
				}
				if err := c.Delete(); err != nil {
					return err
				}
				d.host(host).Delayed--
				n++
			}
			return d.write(tx)
		})
		f.mu.Lock()
		f.tracking = false
		if err != nil {
			f.mu.Unlock()
			return fmt.Errorf("frontier: promote delayed URLs: %w", err)
		}
		f.apply(d)
		if !f.retryMin.IsZero() && (next.IsZero() || f.retryMin.Before(next)) {
			next = f.retryMin
		}
		f.earliest = next
		f.mu.Unlock()
	}
	return nil
}
