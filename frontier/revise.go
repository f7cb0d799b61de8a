package frontier

import (
	"bytes"
	"errors"
	"fmt"

	"go.etcd.io/bbolt"
)

// URLRecord is one URL of the seen-set with what the frontier knows about it.
type URLRecord struct {
	URL string
	URLState
}

// Action is what Revise does with one URL.
type Action int

// Actions a Revise callback may choose.
const (
	Keep    Action = iota // leave the URL as it is
	Requeue               // a failed or excluded URL: queue it again, with no attempts made
	Exclude               // a queued URL: record it excluded with Verdict.Reason
	// Revisit queues a fetched URL again, with no attempts made, keeping its page: the Lease
	// names that page (Lease.Prev) so that the fetch can ask whether it changed.
	Revisit
)

// Verdict is a Revise callback's decision about one URL.
type Verdict struct {
	Action Action
	Reason string // Exclude: the exclusion reason (required)
	Detail string // Exclude: e.g. the setting that excludes it
}

// Revised counts what Revise changed, by the URL's former state and reason: a map's keys are
// reasons ("depth", "connection" …).
type Revised struct {
	RequeuedFailed   map[string]int // failed URLs queued again
	RequeuedExcluded map[string]int // excluded URLs queued again
	Excluded         map[string]int // queued URLs excluded, by their new reason
	Revisited        int            // fetched URLs queued again (Revisit)
}

// Total is how many URLs Revise changed.
func (r Revised) Total() int {
	n := 0
	for _, m := range []map[string]int{r.RequeuedFailed, r.RequeuedExcluded, r.Excluded} {
		for _, v := range m {
			n += v
		}
	}
	return n + r.Revisited
}

// Add adds the counts of o to r, whose maps must not be nil (as Revise returns them).
func (r *Revised) Add(o Revised) {
	for _, p := range [][2]map[string]int{{r.RequeuedFailed, o.RequeuedFailed},
		{r.RequeuedExcluded, o.RequeuedExcluded}, {r.Excluded, o.Excluded}} {
		for k, v := range p[1] {
			p[0][k] += v
		}
	}
	r.Revisited += o.Revisited
}

// ErrLeased is returned by Revise when URLs are leased: Revise runs before a crawl hands any
// out.
var ErrLeased = errors.New("frontier: cannot revise while URLs are leased")

// reviseChunk is how many URL records one Revise transaction looks at.
var reviseChunk = 5000 // a variable for tests

// Revise asks decide about every URL and applies its verdicts: Requeue puts a failed or
// excluded URL at the back of its host's queue with its attempts reset, Revisit does so with a
// fetched URL (keeping its page), Exclude records a queued (or delayed) URL as excluded; a
// verdict that does not fit the URL's state is ignored. Under Options.HostBudget, an excluded URL is not
// queued again past its host's budget, and a host's queued URLs past its budget are excluded
// with ReasonLimit (a budget lowered since they were queued).
//
// Records are visited in key order, reviseChunk per transaction, so a crash part way leaves
// every URL in exactly one state; calling Revise again with the same decide finishes the job.
// decide runs inside a transaction: it must not call the Frontier. Revise must not run while
// URLs are leased (ErrLeased).
func (f *Frontier) Revise(decide func(URLRecord) Verdict) (Revised, error) {
	out := Revised{RequeuedFailed: map[string]int{}, RequeuedExcluded: map[string]int{}, Excluded: map[string]int{}}
	if f.readOnly {
		return out, fmt.Errorf("%w: revise on a read-only store", ErrInvalid)
	}
	f.leaseMu.Lock()
	defer f.leaseMu.Unlock()
	f.mu.Lock()
	leases := f.leases
	f.mu.Unlock()
	if leases > 0 {
		return out, ErrLeased
	}
	for _, name := range recordBuckets {
		var after []byte
		for {
			var d *delta
			var next []byte
			var chunk Revised
			err := f.bolt.Update(func(tx *bbolt.Tx) error {
				d = newDelta()
				chunk = Revised{RequeuedFailed: map[string]int{}, RequeuedExcluded: map[string]int{}, Excluded: map[string]int{}}
				var err error
				next, err = reviseChunkTx(f.newTxn(tx, d), name, after, decide, &chunk)
				return err
			})
			if err != nil {
				return out, fmt.Errorf("frontier: revise: %w", err)
			}
			f.mu.Lock()
			f.apply(d)
			f.mu.Unlock()
			out.Add(chunk)
			if next == nil {
				break
			}
			after = next
		}
	}
	return out, nil
}

// revision is one URL Revise looked at, with what it decided.
type revision struct {
	at  place
	url string
	rec record
	v   Verdict
}

// reviseChunkTx is one Revise transaction: the records of bucket name after key after (from the
// first when nil), at most reviseChunk of them. It returns the last key looked at, or nil at
// the end.
func reviseChunkTx(t *txn, name, after []byte, decide func(URLRecord) Verdict, out *Revised) ([]byte, error) {
	var todo []revision
	var last []byte
	b := t.tx.Bucket(name)
	if b == nil {
		return nil, nil
	}
	c := b.Cursor()
	k, v := c.First()
	if after != nil {
		k, v = c.Seek(after)
		if bytes.Equal(k, after) {
			k, v = c.Next()
		}
	}
	for ; k != nil; k, v = c.Next() {
		if len(todo) == reviseChunk {
			break
		}
		last = append([]byte(nil), k...)
		at, enc, err := recordAt(name, last, v)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		rec, err := t.record(enc)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %v", ErrCorrupt, k, err)
		}
		verdict := decide(URLRecord{URL: rec.url, URLState: rec.public()})
		todo = append(todo, revision{at: at, url: rec.url, rec: rec, v: verdict})
	}
	for _, r := range todo {
		if err := t.revise(r, out); err != nil {
			return nil, fmt.Errorf("%s: %w", r.url, err)
		}
	}
	if err := t.flush(); err != nil {
		return nil, err
	}
	if err := t.d.write(t.tx); err != nil {
		return nil, err
	}
	if k == nil {
		return nil, nil
	}
	return last, nil
}

// revise applies one verdict, with the host budget's own rules (see Revise).
func (t *txn) revise(r revision, out *Revised) error {
	rec := r.rec
	switch {
	case r.v.Action == Requeue && (rec.state == stFailed || rec.state == stExcluded) && rec.host != "":
		if rec.state == stExcluded && t.budget > 0 {
			n, err := t.used(rec.host)
			if err != nil {
				return err
			}
			if n >= t.budget {
				return nil
			}
		}
		return t.requeue(r, out)
	case r.v.Action == Revisit && rec.state == stFetched && rec.host != "":
		return t.requeue(r, out)
	case rec.state != stQueued:
		return nil
	case r.v.Action == Exclude && r.v.Reason != "":
		return t.unqueue(r, r.v.Reason, r.v.Detail, out)
	case t.budget > 0:
		n, err := t.used(rec.host)
		if err != nil {
			return err
		}
		if n > t.budget {
			return t.unqueue(r, ReasonLimit, fmt.Sprintf("host budget of %d URLs reached", t.budget), out)
		}
	}
	return nil
}

// requeue moves a failed, excluded or fetched URL to the back of its host's queue, attempts
// reset; a fetched URL keeps its page sequence number and status.
func (t *txn) requeue(r revision, out *Revised) error {
	rec := r.rec
	qk, err := t.nextQueueKey(rec.hostID)
	if err != nil {
		return err
	}
	if err := t.qPut(qk, r.at.queueValue()); err != nil {
		return err
	}
	hd := t.d.host(rec.host)
	switch rec.state {
	case stFetched:
		hd.Fetched--
		out.Revisited++
	case stFailed:
		hd.Failed--
		t.d.failedBy[rec.reason]--
		out.RequeuedFailed[rec.reason]++
		rec.status = 0
	default:
		hd.Excluded--
		t.d.excludedBy[rec.reason]--
		out.RequeuedExcluded[rec.reason]++
		rec.status = 0
	}
	hd.Queued++
	rec.state, rec.qkey, rec.attempts, rec.reason, rec.detail = stQueued, qk, 0, "", ""
	return t.put(r.at, &rec)
}

// unqueue records a queued or delayed URL as excluded for reason.
func (t *txn) unqueue(r revision, reason, detail string, out *Revised) error {
	rec := r.rec
	hd := t.d.host(rec.host)
	if t.qGet(rec.qkey) != nil {
		if err := t.qDelete(rec.qkey); err != nil {
			return err
		}
	} else if t.delayed.Get(rec.qkey) != nil {
		if err := t.delayed.Delete(rec.qkey); err != nil {
			return err
		}
		hd.Delayed--
	} else {
		return fmt.Errorf("%w: queued record has no queue entry", ErrCorrupt)
	}
	hd.Queued--
	hd.Excluded++
	t.d.excludedBy[reason]++
	out.Excluded[reason]++
	rec.state, rec.qkey, rec.reason, rec.detail = stExcluded, nil, reason, keptDetail(detail)
	return t.put(r.at, &rec)
}

// public is what State reports of r.
func (r record) public() URLState {
	return URLState{State: stateNames[r.state], Reason: r.reason, Detail: r.detail, Status: r.status,
		Attempts: r.attempts, Depth: r.depth, Parent: r.parent, Host: r.host, PageSeq: r.pageSeq, Role: r.role}
}

// Walk calls fn for every URL of the seen-set, in one read transaction, until fn returns an
// error (which Walk returns), in no particular order (of their fingerprints). fn must not call
// the Frontier.
func (f *Frontier) Walk(fn func(URLRecord) error) error {
	if err := f.index(); err != nil {
		return fmt.Errorf("frontier: walk: %w", err)
	}
	return f.bolt.View(func(tx *bbolt.Tx) error {
		t := f.reader(tx)
		return t.eachRecord(func(_ place, v []byte) error {
			rec, err := t.record(v)
			if err != nil {
				return fmt.Errorf("%w: %v", ErrCorrupt, err)
			}
			return fn(URLRecord{URL: rec.url, URLState: rec.public()})
		})
	})
}

// recordBuckets are the buckets that hold records, in the order Revise and Walk visit them.
var recordBuckets = [][]byte{bucketRecords, bucketURLs}

// recordAt returns the place and the record of entry k, v of bucket name (one of
// recordBuckets).
func recordAt(name, k, v []byte) (place, []byte, error) {
	if bytes.Equal(name, bucketRecords) {
		fp, enc, err := splitRecordValue(k, v)
		return place{fp, k}, enc, err
	}
	return place{k, nil}, v, nil
}

// eachRecord calls fn for every record, with its place, until fn returns an error; a record of
// bucketRecords whose entry is not one is an error wrapping ErrCorrupt.
func (t *txn) eachRecord(fn func(at place, v []byte) error) error {
	for _, name := range recordBuckets {
		b := t.tx.Bucket(name)
		if b == nil {
			continue
		}
		if err := b.ForEach(func(k, v []byte) error {
			at, enc, err := recordAt(name, k, v)
			if err != nil {
				return fmt.Errorf("%w: %v", ErrCorrupt, err)
			}
			return fn(at, enc)
		}); err != nil {
			return err
		}
	}
	return nil
}
