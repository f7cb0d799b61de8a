package frontier

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/crawl-project/crawl/storage"
	"go.etcd.io/bbolt"
)

// RepairStats says what Repair changed.
type RepairStats struct {
	HostIDs     int  // host names and IDs whose other half was lost, restored
	Sequences   int  // bucket sequences behind their keys (a bucket lost and made anew), advanced
	Dropped     int  // records that could not be read: their URLs are lost
	Moved       int  // records kept under another URL's fingerprint, moved to their own
	Requeued    int  // queued URLs whose queue entry was lost, queued again at their host's back
	Unqueued    int  // URLs in another state that still named a queue entry: the name removed
	Refetch     int  // fetched URLs whose page was lost, queued to be fetched again
	ParentsLost int  // records whose parent's record was lost: the parent is forgotten
	Rebuilt     int  // queued URLs whose record was lost, recorded again from their entry
	Recorded    int  // fetched URLs whose record was lost, recorded again from their stored page
	Orphans     int  // queue and delayed entries of no queued URL, removed
	QueuedLost  int  // queue entries of a lost record that no stored page names: removed, the URLs lost
	Counters    bool // the stored counters disagreed with the records and were rewritten
	// KeyLost: the fingerprint key was lost; a new one was made, and every record moved to the
	// key its URL has under it (Moved counts them; their parents are forgotten).
	KeyLost bool
}

// Changed reports whether Repair changed anything.
func (s RepairStats) Changed() bool { return s != RepairStats{} }

// repairChunk bounds the records or entries Repair changes per transaction.
const repairChunk = 10_000

// RepairOptions are Repair's seams; nil means none.
type RepairOptions struct {
	// Host returns the host key (as Entry.Host) of a stored page's URL. With it, a stored page
	// whose URL's record was lost is recorded again as fetched; nil: it is not.
	Host func(url string) string
	// Links returns the entries the crawl made of stored page p (its links, redirect target
	// and requisites, as Complete was given them). Repair tries them, with the pages' own URLs
	// and parents, to name a queue entry whose record was lost: such an entry holds only its
	// URL's fingerprint. Nil: only the pages' URLs and parents are tried.
	Links func(p *storage.Page) []Entry
}

// Repair makes the frontier of db agree with itself again where records or entries were lost,
// as after storage.Salvage: the URL records are the truth. Host IDs lost from either of their
// two indexes are restored from the other, and sequences are moved past every key in use, so no
// new key can overwrite an old one. A URL whose record was lost is recorded again where the
// store still names it: queued from its delayed entry (which holds the URL), or from its queue
// entry if a stored page or opts.Links names a URL of the entry's fingerprint; else fetched from
// its stored page (if opts.Host is given). A queued URL whose queue entry is gone is queued again
// at the back of its host's queue; a fetched URL whose page is gone is queued to be fetched
// again; entries of no queued URL go (QueuedLost counts those whose URL nothing names); the
// host, total and per-reason counters are rewritten from the records. A record that cannot be
// read is dropped (and counted). Call it on a store that no Frontier has open; Check passes
// afterwards unless host IDs themselves were damaged. A store in a legacy format must be opened
// (and so upgraded) first.
func Repair(db *storage.DB, opts *RepairOptions) (RepairStats, error) {
	var st RepairStats
	if db.ReadOnly() {
		return st, errors.New("frontier: repair: the store is open read-only")
	}
	f := &Frontier{db: db, bolt: db}
	err := db.Update(func(tx *bbolt.Tx) error {
		if legacyIn(tx) == legacyRecords {
			return ErrOldFormat
		}
		if tx.Bucket(bucketMeta) == nil || tx.Bucket(bucketURLs) == nil {
			return errNothingToRepair
		}
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		k, err := parseFPKey(tx.Bucket(bucketMeta).Get(fpKeyName))
		if err != nil {
			var b []byte
			k, b = newFPKey()
			if err := tx.Bucket(bucketMeta).Put(fpKeyName, b); err != nil {
				return err
			}
			st.KeyLost = true
		}
		f.key = k
		return nil
	})
	if errors.Is(err, errNothingToRepair) {
		return st, nil
	}
	var o RepairOptions
	if opts != nil {
		o = *opts
	}
	rebuild := func(st *RepairStats) error { return f.rebuildRecords(db, o, st) }
	// repairRecords runs twice: a record whose parent's record the first pass dropped (it did
	// not decode, or it was a copy of another) forgets its parent in the second.
	for _, step := range []func(*RepairStats) error{f.unappend, f.repairIndexes, rebuild, f.repairRecords, f.repairRecords, f.removeOrphans, f.rewriteCounters} {
		if err == nil {
			err = step(&st)
		}
	}
	if err != nil {
		return st, fmt.Errorf("frontier: repair %s: %w", db.Path(), err)
	}
	return st, nil
}

var errNothingToRepair = errors.New("no frontier")

// unappend moves every record of bucketRecords to bucketURLs under its fingerprint key (where
// the steps after it look for records), repairChunk per transaction: each record is in one of
// the two at every commit. An entry that is not a record is dropped (Dropped). An appended
// record replaces one of bucketURLs under the same key: the appended one is the one the
// frontier finds.
func (f *Frontier) unappend(st *RepairStats) error {
	for more := true; more; {
		var dropped int
		err := f.bolt.Update(func(tx *bbolt.Tx) error {
			dropped = 0
			recs, urls := tx.Bucket(bucketRecords), tx.Bucket(bucketURLs)
			c := recs.Cursor()
			n := 0
			for k, v := c.First(); k != nil; k, v = c.First() {
				if n == repairChunk {
					return nil
				}
				n++
				if fp, enc, err := splitRecordValue(k, v); err != nil {
					dropped++
				} else if err := urls.Put(bytes.Clone(fp), bytes.Clone(enc)); err != nil {
					return err
				}
				if err := c.Delete(); err != nil {
					return err
				}
			}
			more = false
			return nil
		})
		if err != nil {
			return err
		}
		st.Dropped += dropped
	}
	return nil
}

// repairIndexes restores a host's name ↔ ID entry from whichever index kept it, and moves the
// host ID, delayed and queue sequences past the keys in use.
func (f *Frontier) repairIndexes(st *RepairStats) error {
	return f.bolt.Update(func(tx *bbolt.Tx) error {
		hosts, ids := tx.Bucket(bucketHosts), tx.Bucket(bucketHostIDs)
		type pair struct {
			name string
			id   uint32
		}
		var toIDs, toHosts []pair
		var maxID uint64
		if err := hosts.ForEach(func(k, v []byte) error {
			if _, id, err := decodeHost(v); err == nil && id != 0 && ids.Get(hostIDKey(id)) == nil {
				toIDs = append(toIDs, pair{hostFromBucketKey(k), id})
			}
			return nil
		}); err != nil {
			return err
		}
		if err := ids.ForEach(func(k, v []byte) error {
			if len(k) != 4 {
				return nil
			}
			id := binary.BigEndian.Uint32(k)
			maxID = max(maxID, uint64(id))
			if hosts.Get(hostBucketKey(string(v))) == nil {
				toHosts = append(toHosts, pair{string(v), id})
			}
			return nil
		}); err != nil {
			return err
		}
		for _, p := range toIDs {
			maxID = max(maxID, uint64(p.id))
			if err := ids.Put(hostIDKey(p.id), []byte(p.name)); err != nil {
				return err
			}
		}
		for _, p := range toHosts { // counters zero here: rewriteCounters sets them
			if err := hosts.Put(hostBucketKey(p.name), (&hostCounts{}).encode(p.id)); err != nil {
				return err
			}
		}
		st.HostIDs += len(toIDs) + len(toHosts)
		advance := func(b *bbolt.Bucket, last uint64) error {
			if b.Sequence() >= last {
				return nil
			}
			st.Sequences++
			return b.SetSequence(last)
		}
		if err := advance(ids, maxID); err != nil {
			return err
		}
		var lastDelayed uint64
		if err := tx.Bucket(bucketDelayed).ForEach(func(k, _ []byte) error {
			if len(k) == 16 {
				lastDelayed = max(lastDelayed, binary.BigEndian.Uint64(k[8:]))
			}
			return nil
		}); err != nil {
			return err
		}
		if err := advance(tx.Bucket(bucketDelayed), lastDelayed); err != nil {
			return err
		}
		qs := tx.Bucket(bucketQueues)
		var names [][]byte
		if err := qs.ForEach(func(name, v []byte) error {
			if v == nil {
				names = append(names, bytes.Clone(name))
			}
			return nil
		}); err != nil {
			return err
		}
		for _, name := range names {
			q := qs.Bucket(name)
			if k, _ := q.Cursor().Last(); len(k) == 8 {
				if err := advance(q, binary.BigEndian.Uint64(k)); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// repairRecords finds the records that are unreadable, misplaced, or disagree with their queue
// entries or parents, and fixes them a chunk at a time.
func (f *Frontier) repairRecords(st *RepairStats) error {
	var bad [][]byte
	err := f.bolt.View(func(tx *bbolt.Tx) error {
		t := f.reader(tx)
		return t.urls.ForEach(func(k, v []byte) error {
			if r, err := decodeRecord4(v, t.hostName); err != nil || t.recordProblem(k, r) {
				bad = append(bad, bytes.Clone(k))
			}
			return nil
		})
	})
	for len(bad) > 0 && err == nil {
		n := min(len(bad), repairChunk)
		d := *st // counted into st only once committed
		err = f.bolt.Update(func(tx *bbolt.Tx) error {
			t := f.newTxn(tx, newDelta()) // counters are rewritten from the records afterwards
			for _, k := range bad[:n] {
				if err := t.repairRecord(k, &d); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil {
			*st, bad = d, bad[n:]
		}
	}
	return err
}

// recordProblem reports whether the readable record r under key k needs repairRecord.
func (t *txn) recordProblem(k []byte, r record) bool {
	switch {
	case !bytes.Equal(fpBytes(sum(t.key, r.url)), k):
		return true
	case r.parentRef != nil && t.urls.Get(r.parentRef) == nil:
		return true
	case r.state == stFetched && r.pageSeq != 0 && !storage.HasPage(t.tx, r.pageSeq):
		return true
	case r.state != stQueued:
		return r.qkey != nil
	}
	return !t.hasEntry(k, r)
}

// hasEntry reports whether the queued record r under key k has the queue or delayed entry it
// names, and that entry is its.
func (t *txn) hasEntry(k []byte, r record) bool {
	if ev := t.delayed.Get(r.qkey); ev != nil {
		_, h, url, err := parseDelayed(r.qkey, ev)
		return err == nil && h == r.host && url == r.url
	}
	fp, ok := queueRef(t.qGet(r.qkey))
	return ok && bytes.Equal(fp, k) && bytes.HasPrefix(r.qkey, idQueuePrefix(r.hostID))
}

// repairRecord fixes the record under key k: drops it if unreadable, moves it to its URL's
// fingerprint, forgets a lost parent, and gives a queued URL a queue entry (another state none).
func (t *txn) repairRecord(k []byte, st *RepairStats) error {
	v := t.urls.Get(k)
	if v == nil {
		return nil
	}
	r, err := decodeRecord4(v, t.hostName)
	if err != nil {
		st.Dropped++
		return t.urls.Delete(k)
	}
	if own := fpBytes(sum(t.key, r.url)); !bytes.Equal(own, k) {
		if err := t.urls.Delete(k); err != nil {
			return err
		}
		if t.urls.Get(own) != nil { // its URL is recorded already, in its own place
			st.Dropped++
			return nil
		}
		st.Moved++
		k = own
	}
	if r.parentRef != nil && t.urls.Get(r.parentRef) == nil {
		r.parentRef = nil
		st.ParentsLost++
	}
	refetch := r.state == stFetched && r.pageSeq != 0 && !storage.HasPage(t.tx, r.pageSeq)
	if refetch {
		r.state, r.pageSeq, r.status, r.attempts = stQueued, 0, 0, 0
	}
	switch {
	case r.state != stQueued && r.qkey != nil:
		r.qkey = nil
		st.Unqueued++
	case r.state == stQueued && !t.hasEntry(k, r):
		if r.qkey, err = t.nextQueueKey(r.hostID); err != nil {
			return err
		}
		if err := t.qPut(r.qkey, place{key: k}.queueValue()); err != nil {
			return err
		}
		if refetch {
			st.Refetch++
		} else {
			st.Requeued++
		}
	}
	return t.urls.Put(k, r.encode4())
}

// removeOrphans removes the queue and delayed entries that no queued record names, counting
// apart the queue entries whose URL's record was lost (QueuedLost).
func (f *Frontier) removeOrphans(st *RepairStats) error {
	type place int
	const (
		inQueue   place = iota // key of the host queue bucket queue
		inDelayed              // key of bucketDelayed
		inQueues               // key of bucketQueues that is no host's queue
	)
	type orphan struct {
		at         place
		queue, key []byte
		lost       bool // a queue entry whose URL's record was lost
	}
	var orphans []orphan
	err := f.bolt.View(func(tx *bbolt.Tx) error {
		t := f.reader(tx)
		if err := t.queues.ForEach(func(name, _ []byte) error {
			q := t.queues.Bucket(name)
			if q == nil || len(name) != 4 {
				orphans = append(orphans, orphan{at: inQueues, key: bytes.Clone(name)})
				return nil
			}
			return q.ForEach(func(seq, v []byte) error {
				qkey := append(append([]byte{0}, name...), seq...)
				if !t.namedBy(qkey, v) {
					fp, ok := queueRef(v)
					lost := ok && t.urls.Get(fp) == nil
					orphans = append(orphans, orphan{at: inQueue, queue: bytes.Clone(name), key: bytes.Clone(seq), lost: lost})
				}
				return nil
			})
		}); err != nil {
			return err
		}
		return t.delayed.ForEach(func(k, v []byte) error {
			if !t.namedBy(k, v) {
				orphans = append(orphans, orphan{at: inDelayed, key: bytes.Clone(k)})
			}
			return nil
		})
	})
	for len(orphans) > 0 && err == nil {
		n := min(len(orphans), repairChunk)
		err = f.bolt.Update(func(tx *bbolt.Tx) error {
			qs, delayed := tx.Bucket(bucketQueues), tx.Bucket(bucketDelayed)
			for _, o := range orphans[:n] {
				var err error
				switch o.at {
				case inDelayed:
					err = delayed.Delete(o.key)
				case inQueues:
					if err = qs.DeleteBucket(o.key); errors.Is(err, bbolt.ErrIncompatibleValue) {
						err = qs.Delete(o.key)
					}
				case inQueue:
					if q := qs.Bucket(o.queue); q != nil {
						err = q.Delete(o.key)
					}
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil {
			for _, o := range orphans[:n] {
				if o.lost {
					st.QueuedLost++
				} else {
					st.Orphans++
				}
			}
			orphans = orphans[n:]
		}
	}
	return err
}

// namedBy reports whether the queue or delayed entry qkey, v is named by its queued record.
func (t *txn) namedBy(qkey, v []byte) bool {
	var rv []byte
	if fp, ok := queueRef(v); ok && len(qkey) == 13 {
		rv = t.urls.Get(fp)
	} else if _, _, url, err := parseDelayed(qkey, v); err == nil && len(qkey) == 16 {
		rv = t.urls.Get(fpBytes(sum(t.key, url)))
	}
	if rv == nil {
		return false
	}
	r, err := decodeRecord4(rv, t.hostName)
	return err == nil && r.state == stQueued && bytes.Equal(r.qkey, qkey)
}

// rewriteCounters sets the host, total and per-reason counters to what the records say,
// keeping each host's ID and last error.
func (f *Frontier) rewriteCounters(st *RepairStats) error {
	c := &checker{f: f, hosts: map[string]*tally{}, failedBy: map[string]int{}, excludedBy: map[string]int{}, disk: map[string]int{}}
	ids := make(map[string]uint32)
	err := f.bolt.View(func(tx *bbolt.Tx) error {
		t := f.reader(tx)
		if err := t.urls.ForEach(func(k, v []byte) error {
			r, err := decodeRecord4(v, t.hostName)
			if err != nil {
				return fmt.Errorf("record %x unreadable after repair: %v", k, err)
			}
			ids[r.host] = r.hostID
			c.count(r, r.state == stQueued && t.delayed.Get(r.qkey) != nil)
			return nil
		}); err != nil {
			return err
		}
		return tx.Bucket(bucketCounts).ForEach(func(k, v []byte) error {
			if n, err := counterValue(v); err == nil {
				c.disk[string(k)] = n
			} else {
				c.disk[string(k)] = -1 // unreadable: differs from any count
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	return f.bolt.Update(func(tx *bbolt.Tx) error {
		hb, cb := tx.Bucket(bucketHosts), tx.Bucket(bucketCounts)
		var keys [][]byte
		if err := hb.ForEach(func(k, _ []byte) error { keys = append(keys, bytes.Clone(k)); return nil }); err != nil {
			return err
		}
		for _, k := range keys {
			if host := hostFromBucketKey(k); c.hosts[host] == nil {
				c.host(host) // no record left: its counters are zero
			}
		}
		var sum hostCounts
		for host, tl := range c.hosts {
			old, id, err := decodeHost(hb.Get(hostBucketKey(host)))
			if err != nil {
				old, id = hostCounts{Queued: -1}, 0 // unreadable: rewritten
			}
			if n := ids[host]; n != 0 {
				id = n
			}
			now := tl.rec
			now.LastError = old.LastError
			sum.add(&hostCounts{Queued: now.Queued, Delayed: now.Delayed, Fetched: now.Fetched, Failed: now.Failed, Excluded: now.Excluded})
			if old == now && err == nil {
				continue
			}
			st.Counters = true
			if err := hb.Put(hostBucketKey(host), now.encode(id)); err != nil {
				return err
			}
		}
		want := map[string]int{countQueued: sum.Queued, countDelayed: sum.Delayed, countFetched: sum.Fetched,
			countFailed: sum.Failed, countExcluded: sum.Excluded}
		for r, n := range c.failedBy {
			want[prefixFailed+r] = n
		}
		for r, n := range c.excludedBy {
			want[prefixExclude+r] = n
		}
		for name, n := range c.disk { // a counter no record backs, or unreadable, goes
			if n < 0 || want[name] == 0 && name != countDropped {
				st.Counters = true
				if err := cb.Delete([]byte(name)); err != nil {
					return err
				}
			}
		}
		for name, n := range want {
			if n != 0 && c.disk[name] != n {
				st.Counters = true
				if err := cb.Put([]byte(name), counterBytes(n)); err != nil {
					return err
				}
			}
		}
		return nil
	})
}
