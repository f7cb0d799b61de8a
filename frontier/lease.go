package frontier

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"go.etcd.io/bbolt"
)

// promoteChunk bounds how many delayed URLs one transaction moves back into the queues.
var promoteChunk = 10000 // a variable for tests

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
		t := f.reader(tx)
		id, err := t.lookupHostID(host)
		if err != nil {
			return err
		}
		if testHookLeaseScan != nil {
			testHookLeaseScan() // the snapshot is taken; let a test commit behind its back
		}
		if id == 0 || t.queues == nil {
			return nil
		}
		b := t.queues.Bucket(hostIDKey(id))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(k) != 8 {
				return f.db.Damage(fmt.Sprintf("a queue entry's key is %d bytes (%x), not a sequence's 8", len(k), k))
			}
			k = idQueueKey(id, binary.BigEndian.Uint64(k))
			f.mu.Lock()
			_, leased := h.leased[string(k)]
			f.mu.Unlock()
			if leased {
				continue
			}
			_, r, err := t.entry(host, k, v)
			if err != nil {
				return err
			}
			l = Lease{Entry: Entry{URL: r.url, Host: host, Depth: r.depth, Hops: r.hops, Parent: r.parent, Role: r.role}, Attempts: r.attempts, Prev: r.pageSeq, key: string(k)}
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
			t := f.newTxn(tx, d)
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
				at, rec, found, err := t.find(url)
				if err != nil || !found || rec.state != stQueued || !bytes.Equal(rec.qkey, k) {
					return fmt.Errorf("%w: delayed %s has no matching queued record (%v)", ErrCorrupt, url, err)
				}
				if rec.qkey, err = t.nextQueueKey(rec.hostID); err != nil {
					return err
				}
				if err := t.qPut(rec.qkey, at.queueValue()); err != nil {
					return err
				}
				if err := t.put(at, &rec); err != nil {
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
