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
// seen is answered without touching the store (see docs/frontier.md for the layout and its cost,
// about 9 bytes per URL). Fingerprints claimed by a write transaction are pending until it
// commits (then they join the set) or rolls back (then they are released); a pending one is
// answered answerAsk, so a transaction never trusts a fingerprint that may not be on disk.
//
// A seenSet is safe for concurrent use; a nil *seenSet answers answerAsk and keeps nothing.
type seenSet struct {
	mu      sync.Mutex
	base    []uint64            // sorted
	dir     []uint32            // dir[i]: first index of base whose top dirBits bits are >= i; len 1<<dirBits + 1
	dirBits uint                // bits of a fingerprint that index dir
	delta   map[uint64]struct{} // committed, not yet merged into base
	pending map[uint64]int32    // claimed by transactions not yet ended, with how many claim each
	max     int                 // most fingerprints kept
	state   completeness
}

// newSeenSet returns an empty set bounded to max fingerprints: fill it with add, then call
// sorted.
func newSeenSet(max int) *seenSet {
	s := &seenSet{max: max, delta: make(map[uint64]struct{}), pending: make(map[uint64]int32)}
	s.base = reserveFPs(s, max)
	return s
}

// add appends fp to an unsorted set not yet shared, and reports false (marking the set
// partial) if it is full.
func (s *seenSet) add(fp uint64) bool {
	if len(s.base) == s.max {
		s.state = setPartial
		return false
	}
	s.base = append(s.base, fp)
	return true
}

// sorted sorts what add added and makes the set ready for use.
func (s *seenSet) sorted() *seenSet {
	slices.Sort(s.base)
	s.base = slices.Compact(s.base)
	s.index()
	return s
}

// loadChunk is how many keys loadSeen reads per read transaction.
var loadChunk = 1 << 16 // a variable for tests

// loadSeen returns a set of the fingerprints of db's URL records (the keys of bucketURLs),
// bounded to limit. It reads loadChunk keys per transaction
// and gives the pages it read back to the kernel after each (storage.DB.TrimRSS), so that
// loading a big store does not map all of it at once. Nothing may write the frontier meanwhile.
func loadSeen(db *storage.DB, limit int) (*seenSet, error) {
	s := newSeenSet(limit)
	var after []byte
	for more := true; more && s.state == setComplete; {
		err := db.View(func(tx *bbolt.Tx) error {
			b := tx.Bucket(bucketURLs)
			if b == nil {
				more = false
				return nil
			}
			c := b.Cursor()
			k, _ := c.First()
			if after != nil {
				if k, _ = c.Seek(after); bytes.Equal(k, after) {
					k, _ = c.Next()
				}
			}
			n := 0
			for ; k != nil && n < loadChunk; k, _ = c.Next() {
				n++
				after = k
				if len(k) != 8 {
					return db.Damage(fmt.Sprintf("a URL record's key is %d bytes (%x), not a fingerprint's 8", len(k), k))
				}
				if !s.add(binary.BigEndian.Uint64(k)) {
					return nil
				}
			}
			after, more = bytes.Clone(after), k != nil
			return nil
		})
		if err != nil {
			return nil, err
		}
		_ = db.TrimRSS() // best effort: only memory is at stake
	}
	return s.sorted(), nil
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
	if _, ok := s.delta[fp]; ok {
		return true
	}
	t := s.top(fp)
	for _, v := range s.base[s.dir[t]:s.dir[t+1]] {
		if v >= fp {
			return v == fp
		}
	}
	return false
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
	case s.pending[fp] > 0 || s.state == setPartial:
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
	s.pending[fp]++
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
		if n := s.pending[fp] - 1; n > 0 {
			s.pending[fp] = n
		} else {
			delete(s.pending, fp)
		}
		if !committed || s.hasLocked(fp) {
			continue
		}
		if len(s.base)+len(s.delta) >= s.max {
			s.state = setPartial
			continue
		}
		s.delta[fp] = struct{}{}
	}
	if len(s.delta) >= max(1<<14, len(s.base)/64) {
		s.merge()
	}
}

// merge moves delta into base; s.mu must be held. It merges in place from the back, so base
// grows by append's rule and no second copy of it is made unless its capacity runs out.
func (s *seenSet) merge() {
	add := make([]uint64, 0, len(s.delta))
	for fp := range s.delta {
		add = append(add, fp)
	}
	slices.Sort(add)
	n := len(s.base)
	s.base = slices.Grow(s.base, len(add))[:n+len(add)]
	i, j := n-1, len(add)-1
	for k := len(s.base) - 1; j >= 0; k-- {
		if i >= 0 && s.base[i] > add[j] {
			s.base[k] = s.base[i]
			i--
		} else {
			s.base[k] = add[j]
			j--
		}
	}
	clear(s.delta)
	s.index()
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
