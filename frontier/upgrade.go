package frontier

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"

	"go.etcd.io/bbolt"

	"github.com/crawl-project/crawl/storage"
)

// Stores written before format 3 (formats 1 and 2, docs/frontier.md) keep each URL's record in
// frontier/seen, under seenKey(URL), and their queues in frontier/queue, whose values hold the
// URLs; frontier/queue's sequence also numbered delayed entries. Open upgrades such a store once
// (upgradeLegacy): every record is rewritten as a version 4 record in frontier/urls, every
// legacy queue entry moves to the front of its host's queue in frontier/queues (it was queued
// before the host's others), and both buckets are deleted, all in one transaction. The file is
// copied to BackupSuffix first and the copy removed once the transaction has committed. The
// legacy encodings are read here only; nothing else knows them.
var (
	bucketSeen  = []byte("frontier/seen")
	bucketQueue = []byte("frontier/queue")
)

// BackupSuffix is appended to the store's path to name the copy Open makes of a store in an
// older format before upgrading it; the copy is removed once the upgrade has committed, so one
// left behind means an upgrade did not finish (the store itself is then unchanged).
const BackupSuffix = ".format2.bak"

// legacyData says what a store holds of formats 1 and 2.
type legacyData uint8

const (
	legacyAbsent  legacyData = iota // neither bucket: the store is in the current format
	legacyEmpty                     // the buckets, empty (a format 3 store that never held a legacy record)
	legacyRecords                   // records or queue entries to upgrade
)

func legacyIn(tx *bbolt.Tx) legacyData {
	seen, queue := tx.Bucket(bucketSeen), tx.Bucket(bucketQueue)
	switch {
	case seen == nil && queue == nil:
		return legacyAbsent
	case notEmpty(seen), notEmpty(queue):
		return legacyRecords
	}
	return legacyEmpty
}

func notEmpty(b *bbolt.Bucket) bool {
	if b == nil {
		return false
	}
	k, _ := b.Cursor().First()
	return k != nil
}

// Legacy record versions: 1 stores the queue key and the parent as they are; 2 stores a queue
// key of the record's own host as its sequence number alone (qkeyQueue: a queueKey), and the
// parent with hostRelative; 3 is 2 followed by one byte, the URL's Role, and was written only
// for a Role other than RolePage (a version 2 record is a page's).
const (
	recordVersion1 = 1
	recordVersion  = 2
	recordVersion3 = 3
)

// maxKeyURL is the longest URL used as a seen-set key as is; longer ones are keyed by a hash
// (bbolt keys are limited to 32 KiB, and long keys bloat the branch pages).
const maxKeyURL = 1024

// seenKey is the key of url's legacy record.
func seenKey(url string) []byte {
	if len(url) <= maxKeyURL {
		return []byte(url)
	}
	h := sha256.Sum256([]byte(url))
	return append([]byte{0xff}, h[:]...) // normalized URLs never start with 0xff
}

// upgradeStats is what upgradeLegacy did.
type upgradeStats struct {
	records int // legacy records rewritten
	entries int // legacy queue entries moved
	// dropped counts legacy records of URLs over maxKeyURL bytes that were keyed by a hash and
	// whose URL nothing names (failed or excluded ones, fetched ones without a stored page):
	// they cannot be given a fingerprint, so they are forgotten, their counters with them, and
	// such a URL found again is queued again.
	dropped int
}

// upgradeLegacy upgrades the writable store db in place if it holds records of formats 1 and 2
// (see above); a store whose legacy buckets are empty just loses them. It must run before the
// frontier loads its counters, with nothing else using the store.
func (f *Frontier) upgradeLegacy() (upgradeStats, error) {
	var st upgradeStats
	var has legacyData
	if err := f.bolt.View(func(tx *bbolt.Tx) error { has = legacyIn(tx); return nil }); err != nil {
		return st, err
	}
	if has == legacyAbsent {
		return st, nil
	}
	backup := ""
	var names map[string]string
	if has == legacyRecords {
		backup = f.db.Path() + BackupSuffix
		if err := f.bolt.View(func(tx *bbolt.Tx) error { return tx.CopyFile(backup, 0o600) }); err != nil {
			return st, fmt.Errorf("copy the store before upgrading it: %w", err)
		}
		var err error
		if names, err = f.hashedPageURLs(); err != nil {
			return st, err
		}
	}
	err := f.bolt.Update(func(tx *bbolt.Tx) error {
		key, err := parseFPKey(tx.Bucket(bucketMeta).Get(fpKeyName)) // Open made one if there was none
		if err != nil {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		f.key = key
		d := newDelta()
		u := &upgrader{t: f.newTxn(tx, d), d: d, names: names, st: &st}
		if err := u.run(); err != nil {
			return err
		}
		return d.write(tx)
	})
	switch {
	case err != nil && backup != "":
		return st, fmt.Errorf("upgrade from format 2 (the store is unchanged; a copy of it is in %s): %w", backup, err)
	case err != nil:
		return st, fmt.Errorf("upgrade from format 2 (the store is unchanged): %w", err)
	}
	if backup != "" {
		if err := os.Remove(backup); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return st, err
		}
	}
	return st, nil
}

// hashedPageURLs returns the URLs of the fetched legacy records keyed by a hash that have a
// stored page, by record key: the page names the URL the key is a hash of.
func (f *Frontier) hashedPageURLs() (map[string]string, error) {
	seqs := map[string]uint64{}
	if err := f.bolt.View(func(tx *bbolt.Tx) error {
		seen := tx.Bucket(bucketSeen)
		if seen == nil {
			return nil
		}
		c := seen.Cursor()
		for k, v := c.Seek([]byte{0xff}); k != nil; k, v = c.Next() {
			if r, err := decodeRecord(v); err == nil && r.state == stFetched && r.pageSeq != 0 {
				seqs[string(k)] = r.pageSeq
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	names := make(map[string]string, len(seqs))
	for k, seq := range seqs {
		p, err := f.db.PageMeta(seq)
		if errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if bytes.Equal(seenKey(p.URL), []byte(k)) {
			names[k] = p.URL
		}
	}
	return names, nil
}

// upgrader rewrites the legacy records and queues of one write transaction.
type upgrader struct {
	t     *txn
	d     *delta
	seen  *bbolt.Bucket
	names map[string]string // URLs of hashed keys, from hashedPageURLs
	st    *upgradeStats
}

func (u *upgrader) run() error {
	tx := u.t.tx
	u.seen = tx.Bucket(bucketSeen)
	if q := tx.Bucket(bucketQueue); q != nil {
		// Delayed keys were numbered by the legacy queue's sequence: go on from there.
		if q.Sequence() > u.t.delayed.Sequence() {
			if err := u.t.delayed.SetSequence(q.Sequence()); err != nil {
				return err
			}
		}
		if err := u.queues(q); err != nil {
			return err
		}
	}
	if u.seen != nil {
		if err := u.rest(); err != nil {
			return err
		}
	}
	for _, name := range [][]byte{bucketSeen, bucketQueue} {
		if err := tx.DeleteBucket(name); err != nil && !errors.Is(err, bbolt.ErrBucketNotFound) {
			return err
		}
	}
	return nil
}

// queues moves each host's legacy queue entries, in order, to the front of its queue, and
// rewrites their records.
func (u *upgrader) queues(q *bbolt.Bucket) error {
	type entry struct {
		key []byte
		url string
	}
	var host string
	var entries []entry
	flush := func() error {
		if len(entries) == 0 {
			return nil
		}
		id, err := u.t.hostID(host)
		if err != nil {
			return err
		}
		if id == 0 {
			return fmt.Errorf("%w: legacy queue entries of the host \"\"", ErrCorrupt)
		}
		hq, _, err := u.t.hostQueue(idQueuePrefix(id), true)
		if err != nil {
			return err
		}
		// The host's format 3 entries, to be put back behind the legacy ones.
		var later [][]byte
		if err := hq.ForEach(func(_, v []byte) error { later = append(later, bytes.Clone(v)); return nil }); err != nil {
			return err
		}
		if len(later) > 0 {
			c := hq.Cursor()
			for k, _ := c.First(); k != nil; k, _ = c.First() {
				if err := c.Delete(); err != nil {
					return err
				}
			}
		}
		next := func() ([]byte, error) {
			seq, err := hq.NextSequence()
			return idQueueKey(id, seq), err
		}
		for _, e := range entries {
			sk := seenKey(e.url)
			v := u.seen.Get(sk)
			if v == nil {
				return fmt.Errorf("%w: legacy queue entry %q: no record of %s", ErrCorrupt, e.key, e.url)
			}
			r, err := decodeRecord(v)
			if err != nil || r.state != stQueued || !bytes.Equal(r.qkey, e.key) {
				return fmt.Errorf("%w: legacy queue entry %q: the record of %s is not queued there (%v)", ErrCorrupt, e.key, e.url, err)
			}
			if r.qkey, err = next(); err != nil {
				return err
			}
			fp, err := u.put(e.url, r)
			if err != nil {
				return err
			}
			if err := u.t.qPut(r.qkey, fpQueueValue(fp)); err != nil {
				return err
			}
			if err := u.seen.Delete(sk); err != nil {
				return err
			}
			u.st.entries++
		}
		for _, v := range later {
			fp, ok := queueRef(v)
			if !ok {
				return fmt.Errorf("%w: queue entry %q of %s holds no fingerprint", ErrCorrupt, v, host)
			}
			rv := u.t.urls.Get(fp)
			if rv == nil {
				return fmt.Errorf("%w: queue entry of %s: no record %x", ErrCorrupt, host, fp)
			}
			r, err := u.t.record(rv)
			if err != nil {
				return fmt.Errorf("%w: record %x: %v", ErrCorrupt, fp, err)
			}
			if r.qkey, err = next(); err != nil {
				return err
			}
			if err := u.t.urls.Put(bytes.Clone(fp), r.encode4()); err != nil {
				return err
			}
			if err := u.t.qPut(r.qkey, v); err != nil {
				return err
			}
		}
		entries = entries[:0]
		return nil
	}
	c := q.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(k) < 10 || k[len(k)-9] != 0 || k[0] == 0 {
			return fmt.Errorf("%w: legacy queue key %x", ErrCorrupt, k)
		}
		h := string(k[:len(k)-9])
		if h != host {
			if err := flush(); err != nil {
				return err
			}
			host = h
		}
		url, err := queueURL(h, v)
		if err != nil {
			return fmt.Errorf("%w: legacy queue entry %q: %v", ErrCorrupt, k, err)
		}
		entries = append(entries, entry{bytes.Clone(k), url})
	}
	return flush()
}

// rest rewrites the legacy records that were not in a legacy queue: fetched, failed,
// excluded, and delayed ones.
func (u *upgrader) rest() error {
	c := u.seen.Cursor()
	for k, v := c.First(); k != nil; k, v = c.First() {
		r, err := decodeRecord(v)
		if err != nil {
			return fmt.Errorf("%w: legacy record %q: %v", ErrCorrupt, k, err)
		}
		url, ok := u.url(k, r)
		switch {
		case ok:
			if r.state == stQueued && u.t.delayed.Get(r.qkey) == nil {
				return fmt.Errorf("%w: queued %s: no queue or delayed entry %x", ErrCorrupt, url, r.qkey)
			}
			if _, err := u.put(url, r); err != nil {
				return err
			}
		case r.state == stQueued:
			return fmt.Errorf("%w: queued legacy record %x: no entry names its URL", ErrCorrupt, k)
		default:
			u.forget(r)
		}
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// url returns the URL of the legacy record r under key k: the key itself, or for a key hashed
// from a long URL the URL its delayed entry or stored page names; ok is false if none does.
func (u *upgrader) url(k []byte, r record) (string, bool) {
	if len(k) > 0 && k[0] != 0xff {
		return string(k), true
	}
	if r.state == stQueued {
		if v := u.t.delayed.Get(r.qkey); v != nil {
			if _, _, url, err := parseDelayed(r.qkey, v); err == nil && bytes.Equal(seenKey(url), k) {
				return url, true
			}
		}
		return "", false
	}
	url, ok := u.names[string(k)]
	return url, ok
}

// put writes r, the record of url, as a version 4 record and returns its fingerprint.
func (u *upgrader) put(url string, r record) (uint64, error) {
	fp := sum(u.t.key, url)
	k := fpBytes(fp)
	if v := u.t.urls.Get(k); v != nil {
		other, _ := u.t.record(v)
		return 0, fmt.Errorf("%w: %s has a legacy record and a current one (of %q)", ErrCorrupt, url, other.url)
	}
	id, err := u.t.hostID(r.host)
	if err != nil {
		return 0, err
	}
	r.url, r.hostID, r.parentRef = url, id, nil
	if err := u.t.urls.Put(k, r.encode4()); err != nil {
		return 0, err
	}
	u.st.records++
	return fp, nil
}

// forget drops the counters of a record that cannot be upgraded (upgradeStats.dropped).
func (u *upgrader) forget(r record) {
	h := u.d.host(r.host)
	switch r.state {
	case stFetched:
		h.Fetched--
	case stFailed:
		h.Failed--
		u.d.failedBy[r.reason]--
	case stExcluded:
		h.Excluded--
		u.d.excludedBy[r.reason]--
	}
	u.st.dropped++
}

// queueKey is a legacy queue's key: the host, 0x00, and the sequence number.
func queueKey(host string, seq uint64) []byte {
	k := make([]byte, 0, len(host)+9)
	k = append(k, host...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, seq)
}

// decodeRecord parses a legacy record (versions 1 to 3), copying everything out of b (b is
// bbolt memory).
func decodeRecord(b []byte) (record, error) {
	var r record
	if len(b) >= 2 && b[0] == recordVersion4 {
		return r, errBadRecord // read by decodeRecord4
	}
	if len(b) < 2 || b[0] < recordVersion1 || b[0] > recordVersion3 || b[1] < stQueued || b[1] > stExcluded {
		return r, errBadRecord
	}
	if b[0] >= recordVersion {
		return decodeRecord2(b)
	}
	r.state = b[1]
	b = b[2:]
	var nums [5]uint64
	for i := range nums {
		n, w := binary.Uvarint(b)
		if w <= 0 {
			return r, errBadRecord
		}
		nums[i], b = n, b[w:]
	}
	if nums[0] > math.MaxInt32 || nums[1] > math.MaxInt32 || nums[2] > math.MaxInt32 || nums[4] > math.MaxInt32 {
		return r, errBadRecord
	}
	r.depth, r.attempts, r.status, r.pageSeq, r.hops = int(nums[0]), int(nums[1]), int(nums[2]), nums[3], int(nums[4])
	var strs [5][]byte
	for i := range strs {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return r, errBadRecord
		}
		strs[i], b = b[w:w+int(n)], b[w+int(n):]
	}
	if len(b) != 0 {
		return r, errBadRecord
	}
	if len(strs[0]) > 0 {
		r.qkey = append([]byte(nil), strs[0]...)
	}
	r.host, r.parent, r.reason, r.detail = string(strs[1]), string(strs[2]), string(strs[3]), string(strs[4])
	return r, nil
}

// decodeRecord2 parses a version 2 or 3 record.
func decodeRecord2(b []byte) (record, error) {
	var r record
	d := decoder{b: b[2:]}
	r.state = b[1]
	r.depth, r.attempts, r.status = d.small(), d.small(), d.small()
	r.pageSeq, r.hops = d.uvarint(), d.small()
	var qseq uint64
	var qkey []byte
	kind := d.byte()
	switch kind {
	case qkeyNone:
	case qkeyQueue:
		qseq = d.uvarint()
	case qkeyVerbatim:
		qkey = d.bytes()
		if len(qkey) == 0 {
			d.bad = true
		}
	default:
		d.bad = true
	}
	host := d.bytes()
	parent := d.bytes()
	reason, detail := d.bytes(), d.bytes()
	if b[0] == recordVersion3 {
		if r.role = Role(d.byte()); r.role == RolePage || r.role > RoleRequisite {
			d.bad = true
		}
	}
	if d.bad || len(d.b) != 0 {
		return record{}, errBadRecord
	}
	r.host, r.reason, r.detail = string(host), string(reason), string(detail)
	switch kind {
	case qkeyQueue:
		r.qkey = queueKey(r.host, qseq)
	case qkeyVerbatim:
		r.qkey = bytes.Clone(qkey)
	}
	if len(parent) > 0 {
		var err error
		if r.parent, err = fromHostRelative(r.host, parent[0], parent[1:]); err != nil {
			return record{}, err
		}
	}
	return r, nil
}

// queueURL returns the URL of host's queue entry value v, which must not hold a fingerprint.
func queueURL(host string, v []byte) (string, error) {
	if _, ok := queueRef(v); ok {
		return "", errBadRecord
	}
	if len(v) > 0 && v[0] < 'A' {
		return fromHostRelative(host, v[0], v[1:])
	}
	return string(v), nil
}

// queueValue is the value of host's queue entry for url: a form byte (relHTTP or relHTTPS)
// and the rest of the URL, or the whole URL, which starts with a letter (a version 1 value is
// always the whole URL).
func queueValue(host, url string) []byte {
	form, rest := hostRelative(host, url)
	if form == relWhole {
		return []byte(url)
	}
	return append([]byte{form}, rest...)
}
