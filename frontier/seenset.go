package frontier

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"sync"

	"github.com/crawl-project/crawl/storage"
	"go.etcd.io/bbolt"
)

// Answer is what the in-memory seen-set says about a fingerprint.
type answer uint8

const (
	answerSeen answer = iota + 1 // a committed URL has this fingerprint: treat the URL as seen
	answerNew                    // no URL in the store has it: the URL is new
	answerAsk                    // the set cannot tell: read the store
)

// Completeness says whether every URL of the store has its fingerprint in the set.
type completeness uint8

const (
	setComplete completeness = iota // every committed URL is in the set: a miss means new
	setPartial                      // the set reached its bound: a miss must be checked on disk
)

// seenSet holds the fingerprints of the URLs the store's seen-set holds, so that a link already
// seen is answered without touching the store, and for each the place of its record: its key in
// bucketRecords, or 0 for a record in bucketURLs (see docs/frontier.md for the layout and its
// cost, about 13 bytes per URL). Fingerprints claimed by a write transaction are pending until
// it commits (then they join the set) or rolls back (then they are released); a pending one is
// answered answerAsk, so a transaction never trusts a fingerprint that may not be on disk.
//
// Every record of bucketRecords has its fingerprint in the set: the bound (max) stops the set
// taking fingerprints whose record is in bucketURLs, and the frontier appends a record to
// bucketRecords only while the set has room for it (roomy).
//
// A seenSet is safe for concurrent use; a nil *seenSet answers answerAsk and keeps nothing.
type seenSet struct {
	mu      sync.Mutex
	base    []uint64             // sorted
	locs    []uint32             // locs[i]: the place of base[i]'s record
	dir     []uint32             // dir[i]: first index of base whose top dirBits bits are >= i; len 1<<dirBits + 1
	dirBits uint                 // bits of a fingerprint that index dir
	delta   map[uint64]uint32    // committed, not yet merged into base, with their places
	pending map[uint64]pendingFP // claimed by transactions not yet ended
	max     int                  // most fingerprints kept
	state   completeness
}

// pendingFP is a claimed fingerprint: how many transactions claim it, and the place its record
// was written at (0: none yet, or in bucketURLs).
type pendingFP struct {
	n   int32
	loc uint32
}

// fpLoc is a fingerprint with the place of its record.
type fpLoc struct {
	fp  uint64
	loc uint32
}

// newSeenSet returns an empty set bounded to max fingerprints: fill it with add, then call
// sorted.
func newSeenSet(max int) *seenSet {
	s := &seenSet{max: max, delta: make(map[uint64]uint32), pending: make(map[uint64]pendingFP)}
	s.base = reserve[uint64](s, max)
	s.locs = reserve[uint32](s, max)
	return s
}

// add appends fp, whose record is in bucketURLs, to a set not yet shared, and reports false (marking the set partial) if it is full.
func (s *seenSet) add(fp uint64) bool {
	if len(s.base) == s.max {
		s.state = setPartial
		return false
	}
	s.base = append(s.base, fp)
	s.locs = append(s.locs, 0)
	return true
}

// sorted adds records, the fingerprints of bucketRecords with their places (in any order), to
// what add added, past the bound if need be (the set is then partial), and makes the set ready
// for use.
func (s *seenSet) sorted(records []fpLoc) *seenSet {
	slices.Sort(s.base) // every place added so far is 0
	s.base = slices.Compact(s.base)
	s.locs = s.locs[:len(s.base)]
	sortByFP(records)
	s.mergeSorted(records)
	if len(s.base) > s.max {
		s.state = setPartial
	}
	s.index()
	return s
}

// loadChunk is how many keys loadSeen reads per read transaction.
var loadChunk = 1 << 16 // a variable for tests

// loadSeen returns a set of the fingerprints of db's URL records (the keys of bucketURLs, the
// fingerprints in bucketRecords' values), bounded to limit but for those of bucketRecords, which
// it always holds. It reads loadChunk keys per transaction and gives the pages it read back to
// the kernel after each (storage.DB.TrimRSS), so that loading a big store does not map all of
// it at once. Nothing may write the frontier meanwhile.
func loadSeen(db *storage.DB, limit int) (*seenSet, error) {
	s := newSeenSet(limit)
	var records []fpLoc
	if err := scanChunks(db, bucketRecords, func(k, v []byte) (bool, error) {
		fp, _, err := splitRecordValue(k, v)
		if err != nil {
			return false, db.Damage(err.Error())
		}
		records = append(records, fpLoc{binary.BigEndian.Uint64(fp), uint32(binary.BigEndian.Uint64(k))})
		return true, nil
	}); err != nil {
		return nil, err
	}
	if err := scanChunks(db, bucketURLs, func(k, _ []byte) (bool, error) {
		if len(k) != 8 {
			return false, db.Damage(fmt.Sprintf("a URL record's key is %d bytes (%x), not a fingerprint's 8", len(k), k))
		}
		if len(s.base)+len(records) >= limit {
			s.state = setPartial
			return false, nil
		}
		return s.add(binary.BigEndian.Uint64(k)), nil
	}); err != nil {
		return nil, err
	}
	return s.sorted(records), nil
}

// scanChunks calls fn for the keys and values of bucket name in db, in key order, loadChunk
// per read transaction, trimming the mapped pages after each, until fn returns false or an
// error.
func scanChunks(db *storage.DB, name []byte, fn func(k, v []byte) (bool, error)) error {
	var after []byte
	for more := true; more; {
		err := db.View(func(tx *bbolt.Tx) error {
			b := tx.Bucket(name)
			if b == nil {
				more = false
				return nil
			}
			c := b.Cursor()
			k, v := c.First()
			if after != nil {
				if k, v = c.Seek(after); bytes.Equal(k, after) {
					k, v = c.Next()
				}
			}
			n := 0
			for ; k != nil && n < loadChunk; k, v = c.Next() {
				n++
				after = k
				ok, err := fn(k, v)
				if err != nil {
					return err
				}
				if !ok {
					more = false
					return nil
				}
			}
			after, more = bytes.Clone(after), k != nil
			return nil
		})
		if err != nil {
			return err
		}
		_ = db.TrimRSS() // best effort: only memory is at stake
	}
	return nil
}

// index rebuilds dir for base; s.mu must be held (or s not yet shared).
func (s *seenSet) index() {
	s.dirBits = 0
	if n := len(s.base) / 8; n > 1 {
		s.dirBits = uint(bits.Len(uint(n)) - 1) // about 8 to 16 fingerprints per slot
	}
	s.dir = slices.Grow(s.dir[:0], 1<<s.dirBits+1)[:1<<s.dirBits+1]
	i := 0
	for slot := range s.dir {
		for i < len(s.base) && s.top(s.base[i]) < uint64(slot) {
			i++
		}
		s.dir[slot] = uint32(i)
	}
}

func (s *seenSet) top(fp uint64) uint64 {
	if s.dirBits == 0 {
		return 0
	}
	return fp >> (64 - s.dirBits)
}

// hasLocked reports whether fp is committed; s.mu must be held.
func (s *seenSet) hasLocked(fp uint64) bool {
	_, ok := s.findLocked(fp)
	return ok
}

// findLocked returns the place of committed fp's record, and whether fp is committed; s.mu must
// be held.
func (s *seenSet) findLocked(fp uint64) (uint32, bool) {
	if loc, ok := s.delta[fp]; ok {
		return loc, true
	}
	t := s.top(fp)
	lo := int(s.dir[t])
	for i, v := range s.base[lo:s.dir[t+1]] {
		if v >= fp {
			return s.locs[lo+i], v == fp
		}
	}
	return 0, false
}

// locate returns the key in bucketRecords of the record of fp, committed or written by a
// transaction that has not ended, and whether it has one there.
func (s *seenSet) locate(fp uint64) (uint32, bool) {
	if s == nil {
		return 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if loc, ok := s.findLocked(fp); ok {
		return loc, loc != 0
	}
	p := s.pending[fp]
	return p.loc, p.loc != 0
}

// roomy reports whether the set can take, besides what it holds and what is pending, the
// fingerprints pending now: whether a transaction may append their records to bucketRecords.
func (s *seenSet) roomy() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == setComplete && len(s.base)+len(s.delta)+len(s.pending) <= s.max
}

// placed records that the records of claimed fingerprints were written in bucketRecords at
// their places.
func (s *seenSet) placed(fps []fpLoc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range fps {
		if p, ok := s.pending[f.fp]; ok {
			p.loc = f.loc
			s.pending[f.fp] = p
		}
	}
}

// lookup answers for fp.
func (s *seenSet) lookup(fp uint64) answer {
	if s == nil {
		return answerAsk
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.hasLocked(fp):
		return answerSeen
	case s.pending[fp].n > 0 || s.state == setPartial:
		return answerAsk
	}
	return answerNew
}

// claim marks fp pending for a transaction about to write its URL.
func (s *seenSet) claim(fp uint64) {
	if s == nil {
		return
	}
	s.mu.Lock()
	p := s.pending[fp]
	p.n++
	s.pending[fp] = p
	s.mu.Unlock()
}

// end ends the claims of a transaction on fps: committed, they join the set (as far as its
// bound allows); otherwise they are released.
func (s *seenSet) end(fps []uint64, committed bool) {
	if s == nil || len(fps) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, fp := range fps {
		p := s.pending[fp]
		if p.n--; p.n > 0 {
			if !committed {
				p.loc = 0 // the record was rolled back with its transaction
			}
			s.pending[fp] = p
		} else {
			delete(s.pending, fp)
		}
		if !committed || s.hasLocked(fp) {
			continue
		}
		if p.loc == 0 && len(s.base)+len(s.delta) >= s.max {
			s.state = setPartial
			continue
		}
		s.delta[fp] = p.loc // one in bucketRecords is kept whatever the bound (see roomy)
	}
	if len(s.delta) >= max(1<<14, len(s.base)/64) {
		s.merge()
	}
}

// merge moves delta into base; s.mu must be held. It merges in place from the back, so base
// grows by append's rule and no second copy of it is made unless its capacity runs out.
func (s *seenSet) merge() {
	add := make([]fpLoc, 0, len(s.delta))
	for fp, loc := range s.delta {
		add = append(add, fpLoc{fp, loc})
	}
	sortByFP(add)
	s.mergeSorted(add)
	clear(s.delta)
	s.index()
}

// mergeSorted merges add, sorted and holding no fingerprint of base, into base, in place from
// the back.
func (s *seenSet) mergeSorted(add []fpLoc) {
	n := len(s.base)
	s.base = slices.Grow(s.base, len(add))[:n+len(add)]
	s.locs = slices.Grow(s.locs, len(add))[:n+len(add)]
	i, j := n-1, len(add)-1
	for k := len(s.base) - 1; j >= 0; k-- {
		if i >= 0 && s.base[i] > add[j].fp {
			s.base[k], s.locs[k] = s.base[i], s.locs[i]
			i--
		} else {
			s.base[k], s.locs[k] = add[j].fp, add[j].loc
			j--
		}
	}
}

// holds reports whether fp is committed in the set, or the set cannot say (nil or partial):
// Check's test that a complete set holds every URL of the store.
func (s *seenSet) holds(fp uint64) bool {
	if s == nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == setPartial || s.hasLocked(fp)
}

// size returns how many fingerprints the set holds.
func (s *seenSet) size() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.base) + len(s.delta)
}

// claims are the fingerprints one write transaction claimed in a seenSet.
type claims struct {
	set *seenSet
	fps []uint64
}

// reset releases the claims of a run of the transaction's function that was rolled back
// (bbolt's Batch may run it again): call it first in each run.
func (c *claims) reset() {
	c.set.end(c.fps, false)
	c.fps = c.fps[:0]
}

// done ends the claims once the transaction committed (err == nil) or failed.
func (c *claims) done(err error) {
	c.set.end(c.fps, err == nil)
	c.fps = nil
}
