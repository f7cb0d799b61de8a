package frontier

import (
	"bytes"
	"encoding/binary"

	"github.com/crawl-project/crawl/storage"
	"go.etcd.io/bbolt"
)

// lostURL is a queue or delayed entry whose URL's record was lost, and what names its URL.
type lostURL struct {
	qkey   []byte // the entry's key
	hostID uint32 // of a queue entry: its queue's host ID
	host   string // of a delayed entry: the host it holds
	e      Entry  // e.URL is "" until something names the URL; Depth and Parent as a page gave them
	named  bool   // a stored page gave e's Depth and Parent
}

// rebuildRecords records again the URLs whose record was lost but that the store still names:
// queued from their delayed entry, or from their queue entry when a stored page (its URL, its
// parent or o.Links) names a URL of the entry's fingerprint; fetched from their last stored page
// when o.Host is given. The counters are left to rewriteCounters.
func (f *Frontier) rebuildRecords(db *storage.DB, o RepairOptions, st *RepairStats) error {
	lost := map[uint64]*lostURL{}
	unnamed := 0 // queue entries whose URL nothing has named yet
	err := f.bolt.View(func(tx *bbolt.Tx) error {
		t := f.reader(tx)
		if err := t.queues.ForEach(func(name, _ []byte) error {
			q := t.queues.Bucket(name)
			if q == nil || len(name) != 4 {
				return nil
			}
			id := binary.BigEndian.Uint32(name)
			return q.ForEach(func(seq, v []byte) error {
				fp, ok := queueRef(v)
				if !ok || len(seq) != 8 || t.urls.Get(fp) != nil {
					return nil
				}
				if n := binary.BigEndian.Uint64(fp); lost[n] == nil { // a second entry goes as an orphan
					lost[n] = &lostURL{qkey: idQueueKey(id, binary.BigEndian.Uint64(seq)), hostID: id}
					unnamed++
				}
				return nil
			})
		}); err != nil {
			return err
		}
		return t.delayed.ForEach(func(k, v []byte) error {
			_, host, url, err := parseDelayed(k, v)
			if n := sum(t.key, url); err == nil && url != "" && host != "" && t.urls.Get(fpBytes(n)) == nil && lost[n] == nil {
				lost[n] = &lostURL{qkey: bytes.Clone(k), host: host, e: Entry{URL: url}}
			}
			return nil
		})
	})
	if err != nil {
		return err
	}

	// name gives a lost entry the URL of e if e's fingerprint is the entry's, with the depth
	// and parent of the shallowest page that names it.
	name := func(e Entry) {
		l := lost[sum(f.key, e.URL)]
		if l == nil || l.e.URL != "" && l.e.URL != e.URL || l.named && l.e.Depth <= e.Depth {
			return
		}
		if l.e.URL == "" {
			unnamed--
		}
		l.e, l.named = e, true
	}
	last := map[uint64]uint64{} // the last stored page of each URL
	var seqs []uint64
	if err := db.PagesMeta(func(p *storage.Page) error {
		seqs = append(seqs, p.Seq)
		last[sum(f.key, p.URL)] = p.Seq
		name(Entry{URL: p.URL, Depth: p.Depth, Parent: p.Parent})
		if p.Parent != "" {
			name(Entry{URL: p.Parent, Depth: max(p.Depth-1, 0)})
		}
		return nil
	}); err != nil {
		return err
	}
	fetched := map[uint64]*storage.Page{} // of the URLs with no record
	if o.Host != nil {
		if err := f.bolt.View(func(tx *bbolt.Tx) error {
			urls := tx.Bucket(bucketURLs)
			for fp, seq := range last {
				if urls.Get(fpBytes(fp)) == nil {
					fetched[fp] = &storage.Page{Seq: seq}
				}
			}
			return nil
		}); err != nil {
			return err
		}
		for fp, p := range fetched {
			if fetched[fp], err = db.PageMeta(p.Seq); err != nil {
				return err
			}
		}
	}
	for _, seq := range seqs {
		if unnamed == 0 || o.Links == nil {
			break
		}
		if p, err := db.Page(seq); err == nil { // a page that cannot be read names nothing
			for _, e := range o.Links(p) {
				name(e)
			}
		}
	}

	type rebuild struct {
		fp uint64
		l  *lostURL
		p  *storage.Page
	}
	var todo []rebuild // fetched ones first, so that queued ones can name them as parents
	for fp, p := range fetched {
		if l := lost[fp]; l == nil || l.e.URL == "" {
			todo = append(todo, rebuild{fp: fp, p: p})
		}
	}
	for fp, l := range lost {
		if l.e.URL != "" {
			todo = append(todo, rebuild{fp: fp, l: l})
		}
	}
	for len(todo) > 0 {
		n := min(len(todo), repairChunk)
		d := *st // counted into st only once committed
		err := f.bolt.Update(func(tx *bbolt.Tx) error {
			t := f.newTxn(tx, newDelta()) // counters are rewritten from the records afterwards
			for _, b := range todo[:n] {
				var err error
				if b.p != nil {
					err = t.recordFetched(b.fp, b.p, o.Host(b.p.URL), &d)
				} else {
					err = t.recordQueued(b.fp, b.l, &d)
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		*st, todo = d, todo[n:]
	}
	return nil
}

// recordFetched records the URL of stored page p, of fingerprint fp and host host, as fetched.
func (t *txn) recordFetched(fp uint64, p *storage.Page, host string, st *RepairStats) error {
	if host == "" || t.urls.Get(fpBytes(fp)) != nil {
		return nil
	}
	id, err := t.hostID(host)
	if err != nil {
		return err
	}
	r := record{state: stFetched, depth: p.Depth, attempts: 1, status: p.Status, pageSeq: p.Seq, host: host, hostID: id,
		url: p.URL, parent: p.Parent, parentRef: t.lostParentRef(p.Parent)}
	st.Recorded++
	return t.urls.Put(fpBytes(fp), r.encode4())
}

// recordQueued records the URL of lost entry l, of fingerprint fp, as queued in that entry.
func (t *txn) recordQueued(fp uint64, l *lostURL, st *RepairStats) error {
	if t.urls.Get(fpBytes(fp)) != nil {
		return nil
	}
	host, id := l.host, l.hostID
	var err error
	if id != 0 {
		if host, err = t.hostName(id); err != nil {
			return nil // the queue's host is unknown: the entry goes as an orphan
		}
	} else if id, err = t.hostID(host); err != nil {
		return err
	}
	r := record{state: stQueued, depth: l.e.Depth, hops: l.e.Hops, qkey: l.qkey, host: host, hostID: id, url: l.e.URL,
		parent: l.e.Parent, parentRef: t.lostParentRef(l.e.Parent), role: l.e.Role}
	if l.hostID == 0 {
		r.attempts = 1 // a delayed URL waits to be tried again
	}
	st.Rebuilt++
	return t.urls.Put(fpBytes(fp), r.encode4())
}

// lostParentRef returns the key of parent's record if it has a readable one, else nil (the
// record then keeps parent's URL).
func (t *txn) lostParentRef(parent string) []byte {
	if parent == "" {
		return nil
	}
	k := fpBytes(sum(t.key, parent))
	if r, err := decodeRecord4(t.urls.Get(k), t.hostName); err == nil && r.url == parent {
		return k
	}
	return nil
}
