package frontier

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"

	"go.etcd.io/bbolt"
)

// maxHost bounds the length of a host key.
const maxHost = 1024

// delta collects a transaction's counter changes: written to disk in the transaction, applied
// in memory after it committed.
type delta struct {
	hosts      map[string]*hostCounts
	ids        map[string]uint32 // IDs given to hosts in the transaction
	failedBy   map[string]int
	excludedBy map[string]int
	dropped    int // URLs over their host's budget counted, not recorded
}

func newDelta() *delta {
	return &delta{hosts: make(map[string]*hostCounts), ids: make(map[string]uint32), failedBy: make(map[string]int), excludedBy: make(map[string]int)}
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
	for name := range d.ids {
		d.host(name) // written below with its new ID
	}
	// In key order: bbolt inserts into a node's sorted slice, so keys in random order cost a
	// copy of the node per key, quadratic in the hosts a transaction names.
	for _, name := range slices.Sorted(maps.Keys(d.hosts)) {
		hd := d.hosts[name]
		c, id, err := decodeHost(hb.Get(hostBucketKey(name)))
		if err != nil {
			return fmt.Errorf("%w: host %q: %v", ErrCorrupt, name, err)
		}
		c.add(hd)
		if n := d.ids[name]; n != 0 {
			id = n
		}
		if err := hb.Put(hostBucketKey(name), c.encode(id)); err != nil {
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
	return addCounter(cb, countDropped, d.dropped)
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

// txn is one transaction's view of the frontier's buckets.
type txn struct {
	tx             *bbolt.Tx
	records        *bbolt.Bucket // nil on a read-only store without it
	urls           *bbolt.Bucket // nil on a read-only store without it
	seen           *seenSet      // where the records of bucketRecords are (nil: the store has none to find)
	delayed, hosts *bbolt.Bucket
	queues         *bbolt.Bucket // nil on a read-only store without it
	hostIDs        *bbolt.Bucket
	ids            map[string]uint32 // host IDs read or given in this transaction
	names          map[uint32]string // and the other way round
	refs           map[string][]byte // parentRef of the parents looked up in this transaction
	key            fpKey
	d              *delta
	budget         int                   // Options.HostBudget; 0: none
	stored         map[string]hostCounts // host counters on disk, read once per transaction
	// added holds the records of new URLs by fingerprint until flush writes them in key order:
	// bbolt inserts into a node's sorted slice, so a page's many links put in document order
	// would cost time quadratic in their number (a page with 100 000 links took seconds).
	added map[uint64][]byte
	// claims collects the fingerprints of the URLs the transaction adds; nil: none kept.
	claims *claims
}

// reader returns a view of tx's buckets for reading (no counters).
func (f *Frontier) reader(tx *bbolt.Tx) *txn {
	return &txn{tx: tx, records: tx.Bucket(bucketRecords), urls: tx.Bucket(bucketURLs), seen: f.seen, queues: tx.Bucket(bucketQueues), delayed: tx.Bucket(bucketDelayed),
		hosts: tx.Bucket(bucketHosts), hostIDs: tx.Bucket(bucketHostIDs), key: f.key}
}

// record parses a record, naming its host and its parent.
func (t *txn) record(v []byte) (record, error) {
	r, err := decodeRecord4(v, t.hostName)
	if err != nil || r.parentRef == nil {
		return r, err
	}
	_, pv := t.get(r.parentRef)
	if pv == nil {
		return record{}, fmt.Errorf("%w: no parent record %x", ErrCorrupt, r.parentRef)
	}
	p, err := decodeRecord4(pv, t.hostName)
	if err != nil {
		return record{}, fmt.Errorf("%w: parent record %x: %v", ErrCorrupt, r.parentRef, err)
	}
	r.parent = p.url
	return r, nil
}

// parentRef returns the key of the record of parent in bucketURLs, or nil if it has none there.
func (t *txn) parentRef(parent string) ([]byte, error) {
	if parent == "" {
		return nil, nil
	}
	if ref, ok := t.refs[parent]; ok {
		return ref, nil
	}
	at, _, found, err := t.find(parent)
	if err != nil {
		return nil, err
	}
	var ref []byte
	if found {
		ref = at.key
	}
	if t.refs == nil {
		t.refs = make(map[string][]byte)
	}
	t.refs[parent] = ref
	return ref, nil
}

// hostName returns the host of ID id.
func (t *txn) hostName(id uint32) (string, error) {
	if name, ok := t.names[id]; ok {
		return name, nil
	}
	var v []byte
	if t.hostIDs != nil {
		v = t.hostIDs.Get(hostIDKey(id))
	}
	if v == nil {
		return "", fmt.Errorf("%w: no host of ID %d", ErrCorrupt, id)
	}
	t.remember(string(v), id)
	return string(v), nil
}

func (t *txn) remember(host string, id uint32) {
	if t.ids == nil {
		t.ids, t.names = make(map[string]uint32), make(map[uint32]string)
	}
	t.ids[host], t.names[id] = id, host
}

// lookupHostID returns host's ID, 0 if it has none (or host is "").
func (t *txn) lookupHostID(host string) (uint32, error) {
	if id, ok := t.ids[host]; ok || host == "" || t.hosts == nil {
		return id, nil
	}
	_, id, err := decodeHost(t.hosts.Get(hostBucketKey(host)))
	if err != nil {
		return 0, fmt.Errorf("%w: host %q: %v", ErrCorrupt, host, err)
	}
	if id != 0 {
		t.remember(host, id)
	}
	return id, nil
}

// hostID returns host's ID, giving it one if it has none (0 for the host "").
func (t *txn) hostID(host string) (uint32, error) {
	id, err := t.lookupHostID(host)
	if err != nil || id != 0 || host == "" {
		return id, err
	}
	seq, err := t.hostIDs.NextSequence()
	if err != nil {
		return 0, err
	}
	if seq > math.MaxUint32 {
		return 0, fmt.Errorf("frontier: more than %d hosts", uint32(math.MaxUint32))
	}
	id = uint32(seq)
	if err := t.hostIDs.Put(hostIDKey(id), []byte(host)); err != nil {
		return 0, err
	}
	t.d.ids[host] = id
	t.remember(host, id)
	return id, nil
}

// hostQueue returns the bucket of queue key k (an idQueueKey or an idQueuePrefix: its host's
// bucket in bucketQueues, created if create) and k's key in it; a nil bucket if there is none.
func (t *txn) hostQueue(k []byte, create bool) (*bbolt.Bucket, []byte, error) {
	name, seq, ok := splitIDQueueKey(k)
	if len(k) == 5 && k[0] == 0 { // an idQueuePrefix
		name, ok = k[1:], true
	}
	if !ok {
		return nil, nil, fmt.Errorf("%w: queue key %x", ErrCorrupt, k)
	}
	if t.queues == nil {
		return nil, nil, nil
	}
	b := t.queues.Bucket(name)
	if b == nil && create {
		var err error
		if b, err = t.queues.CreateBucket(name); err != nil {
			return nil, nil, err
		}
	}
	if b != nil && t.d != nil {
		b.FillPercent = 1 // entries are appended (seq grows) and taken from the front
	}
	return b, seq, nil
}

// qGet returns the value of queue entry k, nil if there is none (or k is not a queue key).
func (t *txn) qGet(k []byte) []byte {
	b, key, _ := t.hostQueue(k, false)
	if b == nil {
		return nil
	}
	return b.Get(key)
}

// qPut writes queue entry k.
func (t *txn) qPut(k, v []byte) error {
	b, key, err := t.hostQueue(k, true)
	if err != nil {
		return err
	}
	return b.Put(key, v)
}

// qDelete deletes queue entry k.
func (t *txn) qDelete(k []byte) error {
	b, key, err := t.hostQueue(k, false)
	if err != nil || b == nil {
		return err
	}
	return b.Delete(key)
}

// nextQueueKey returns the key at the back of the queue of host ID id: its bucket in
// bucketQueues, whose sequence numbers are its own.
func (t *txn) nextQueueKey(id uint32) ([]byte, error) {
	q, _, err := t.hostQueue(idQueuePrefix(id), true)
	if err != nil {
		return nil, err
	}
	seq, err := q.NextSequence()
	return idQueueKey(id, seq), err
}

// newTxn returns a view of the write transaction tx that adds its counter changes to d.
func (f *Frontier) newTxn(tx *bbolt.Tx, d *delta) *txn {
	t := f.reader(tx)
	t.d, t.budget = d, f.budget
	// Keys of the delayed set (by time) mostly grow: pack its pages fuller than the default
	// half when they split (hostQueue does the same for the queues). The setting lasts one
	// transaction.
	t.delayed.FillPercent = appendFill
	// Records are appended to bucketRecords; a record that changes state grows by a few
	// bytes, so its page is left a little room.
	t.records.FillPercent = appendFill
	return t
}

const appendFill = 0.9

// place is where a URL's record is kept: its fingerprint key, and its key in bucketRecords (nil:
// it is in bucketURLs under its fingerprint key).
type place struct {
	key []byte
	seq []byte
}

// get returns the record of fingerprint key fp and its place, or a nil record if it has none.
func (t *txn) get(fp []byte) (place, []byte) {
	if loc, ok := t.seen.locate(binary.BigEndian.Uint64(fp)); ok && t.records != nil {
		k := recordKey(loc)
		if v := t.records.Get(k); len(v) >= 8 && bytes.Equal(v[:8], fp) {
			return place{fp, k}, v[8:]
		}
	}
	if t.urls != nil {
		if v := t.urls.Get(fp); v != nil {
			return place{fp, nil}, v
		}
	}
	return place{}, nil
}

// find returns the record of url and where it is, and whether there is one: under url's
// fingerprint, if that record is url's. The record's url field is set.
func (t *txn) find(url string) (place, record, bool, error) {
	at, v := t.get(fpBytes(sum(t.key, url)))
	if v == nil {
		return place{}, record{}, false, nil
	}
	r, err := t.record(v)
	if err != nil {
		return place{}, record{}, false, fmt.Errorf("%w: record of %s: %v", ErrCorrupt, url, err)
	}
	if r.url != url {
		return place{}, record{}, false, nil
	}
	return at, r, true, nil
}

// put writes r at p.
func (t *txn) put(p place, r *record) error {
	if p.seq != nil {
		return t.records.Put(p.seq, recordValue(p.key, r.encode4()))
	}
	return t.urls.Put(p.key, r.encode4())
}

// queueValue returns the value of a queue entry for the record at p.
func (p place) queueValue() []byte {
	return append([]byte{queueFP}, p.key...)
}

// entry returns where the record of host's queue entry k, v is and the record (url set); an
// error wrapping ErrCorrupt if there is none, or it is not queued with key k.
func (t *txn) entry(host string, k, v []byte) (place, record, error) {
	var p place
	var r record
	found := false
	var err error
	if fp, ok := queueRef(v); ok {
		if at, rv := t.get(bytes.Clone(fp)); rv != nil {
			p, found = at, true
			r, err = t.record(rv)
		}
	}
	if err != nil || !found || r.state != stQueued || !bytes.Equal(r.qkey, k) {
		return place{}, record{}, fmt.Errorf("%w: queue entry %q (%q) has no matching queued record (%v)", ErrCorrupt, k, v, err)
	}
	return p, r, nil
}

// known reports whether url, of fingerprint fp, is known: added by this transaction, in the
// in-memory seen-set, or on disk (read only when the in-memory set cannot tell). A URL it
// reports unknown has its fingerprint claimed for this transaction. A URL whose fingerprint is
// another known URL's is known (docs/frontier.md).
func (t *txn) known(url string, fp uint64) bool {
	if _, ok := t.added[fp]; ok {
		return true
	}
	if t.claims == nil {
		return t.onDisk(fp)
	}
	switch t.claims.set.lookup(fp) {
	case answerSeen:
		return true
	case answerAsk:
		if t.onDisk(fp) {
			return true
		}
	}
	t.claims.set.claim(fp)
	t.claims.fps = append(t.claims.fps, fp)
	return false
}

// onDisk reports whether a record has fingerprint fp.
func (t *txn) onDisk(fp uint64) bool {
	_, v := t.get(fpBytes(fp))
	return v != nil
}

// add records a new URL's record, to be written by flush.
func (t *txn) add(fp uint64, v []byte) {
	if t.added == nil {
		t.added = make(map[uint64][]byte)
	}
	t.added[fp] = v
}

// flush writes the added records, in the order of their fingerprints; call it once, before the
// counters. They are appended to bucketRecords while the in-memory seen-set, which must find
// them there, has room for them; else they go to bucketURLs (in key order: bbolt inserts into a
// node's sorted slice, so keys in random order would cost a copy of the node per key).
func (t *txn) flush() error {
	fps := slices.Sorted(maps.Keys(t.added))
	keys := make([]byte, 0, 16*len(fps)) // bbolt keeps the keys until the commit
	appending := t.claims != nil && t.claims.set.roomy()
	var placed []fpLoc
	for _, fp := range fps {
		keys = binary.BigEndian.AppendUint64(keys, fp)
		key := keys[len(keys)-8:]
		if appending {
			seq, err := t.records.NextSequence()
			if err != nil {
				return err
			}
			if seq <= math.MaxUint32 {
				keys = binary.BigEndian.AppendUint64(keys, seq)
				if err := t.records.Put(keys[len(keys)-8:], recordValue(key, t.added[fp])); err != nil {
					return err
				}
				placed = append(placed, fpLoc{fp, uint32(seq)})
				continue
			}
			appending = false
		}
		if err := t.urls.Put(key, t.added[fp]); err != nil {
			return err
		}
	}
	if len(placed) > 0 {
		t.claims.set.placed(placed)
	}
	t.added = nil
	return nil
}

// counts returns host's counters as stored before this transaction plus what the transaction
// changed so far.
func (t *txn) counts(host string) (hostCounts, error) {
	c, ok := t.stored[host]
	if !ok {
		var err error
		if c, err = decodeHostCounts(t.hosts.Get(hostBucketKey(host))); err != nil {
			return c, fmt.Errorf("%w: host %q: %v", ErrCorrupt, host, err)
		}
		if t.stored == nil {
			t.stored = make(map[string]hostCounts)
		}
		t.stored[host] = c
	}
	if d := t.d.hosts[host]; d != nil {
		c.add(d)
	}
	return c, nil
}

// used returns how much of its budget host has spent: its queued, fetched and failed URLs, as
// counts gives them.
func (t *txn) used(host string) (int, error) {
	c, err := t.counts(host)
	return c.Queued + c.Fetched + c.Failed, err
}
