package frontier

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/crawl-project/crawl/storage"
	"go.etcd.io/bbolt"
)

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
		t := f.newTxn(tx, d)
		t.claims = c
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
	if t.qGet(key) == nil {
		return ErrNotLeased // completed concurrently by another call with the same lease
	}
	at, rec, found, err := t.find(l.URL)
	if err != nil || !found || rec.state != stQueued || !bytes.Equal(rec.qkey, key) {
		return fmt.Errorf("%w: leased URL has no matching queued record (%v)", ErrCorrupt, err)
	}
	if err := t.qDelete(key); err != nil {
		return err
	}
	hd := d.host(l.Host)
	rec.qkey, rec.status, rec.reason, rec.detail = nil, r.Status, r.Reason, keptDetail(r.Detail)
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
		seq, err := t.delayed.NextSequence()
		if err != nil {
			return err
		}
		rec.qkey = delayedKey(r.NotBefore, seq)
		if err := t.delayed.Put(rec.qkey, delayedValue(l.Host, l.URL)); err != nil {
			return err
		}
		hd.Delayed++
	}
	if err := t.put(at, &rec); err != nil {
		return err
	}
	if err := t.flush(); err != nil {
		return err
	}
	return d.write(t.tx)
}
