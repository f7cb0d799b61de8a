package fleet

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// seenSet is the seen-set of a partition this Store owns, in memory: the fingerprints of every
// URL recorded in the partition, as its seen log in Redis holds them (keys.seenLog) once the
// scripts that mu covers have returned. Only the owner appends to the log (every script that
// does is fenced), so the copy it loaded after acquiring stays exact while it keeps the
// ownership. mu is held from a check of URLs against fps to the end of the script that records
// those found new.
type seenSet struct {
	mu    sync.Mutex
	token string              // the ownership whose copy this is
	fps   map[uint64]struct{} // nil: not loaded (or dropped: the next use loads it again)
}

// seenChunk is how many elements of a seen log one read takes.
const seenChunk = 1024

// seenOf returns, locked, the seen-set of o's partition, loading it from the log if this Store
// holds none for o. The caller unlocks it (seenDone).
func (s *Store) seenOf(ctx context.Context, o Ownership) (*seenSet, error) {
	s.mu.Lock()
	if s.owned == nil {
		s.owned = map[int]*seenSet{}
	}
	ss := s.owned[o.Partition]
	if ss == nil || ss.token != o.token {
		ss = &seenSet{token: o.token}
		s.owned[o.Partition] = ss
	}
	s.mu.Unlock()
	ss.mu.Lock()
	if ss.fps != nil {
		return ss, nil
	}
	fps, err := s.loadSeen(ctx, o)
	if err != nil {
		ss.mu.Unlock()
		return nil, err
	}
	ss.fps = fps
	return ss, nil
}

// seenDone unlocks ss after a script that recorded the fingerprints packed (freshWrites') and
// whose error is err: with none, ss holds them from then on; a fenced one drops the
// partition's set (the ownership is void); any other error drops its contents, since the
// script may have run, and the next use reads the log again.
func (s *Store) seenDone(p int, ss *seenSet, packed []byte, err error) {
	switch {
	case err == nil:
		for i := 0; i+8 <= len(packed); i += 8 {
			ss.fps[binary.LittleEndian.Uint64(packed[i:])] = struct{}{}
		}
	case errors.Is(err, ErrFenced):
		ss.fps = nil
		s.mu.Lock()
		if s.owned[p] == ss {
			delete(s.owned, p)
		}
		s.mu.Unlock()
	default:
		ss.fps = nil
	}
	ss.mu.Unlock()
}

// ownsSeen is the ownership of partition p whose seen-set this Store holds, if any: that of
// its last Acquire of p not since released or fenced.
func (s *Store) ownsSeen(p int) (Ownership, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.owned[p]
	if ss == nil {
		return Ownership{}, false
	}
	return Ownership{Partition: p, token: ss.token}, true
}

// holdSeen records that this Store owns partition p under token (Acquire); the set is loaded
// at its first use.
func (s *Store) holdSeen(p int, token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owned == nil {
		s.owned = map[int]*seenSet{}
	}
	if ss := s.owned[p]; ss == nil || ss.token != token {
		s.owned[p] = &seenSet{token: token}
	}
}

// dropSeen forgets partition p's seen-set if it is that of the ownership token (Release, or
// an ownership lost or lapsed): its URLs go to the inbox from then on.
func (s *Store) dropSeen(p int, token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.owned[p]; ss != nil && ss.token == token {
		delete(s.owned, p)
	}
}

// forgetSeen drops the contents of every seen-set this Store holds, so that each is read again
// from its log at its next use: a restarted Redis may have lost appends this Store saw succeed.
func (s *Store) forgetSeen() {
	s.mu.Lock()
	sets := make([]*seenSet, 0, len(s.owned))
	for _, ss := range s.owned {
		sets = append(sets, ss)
	}
	s.mu.Unlock()
	for _, ss := range sets {
		ss.mu.Lock()
		ss.fps = nil
		ss.mu.Unlock()
	}
}

// loadSeen reads o's partition's seen log. A log that is not a list (damage) is deleted first
// by a fenced script (repairLogScript), counted in the partition's "repaired" counter; bytes of
// an element beyond its last whole record (damage) are ignored.
func (s *Store) loadSeen(ctx context.Context, o Ownership) (map[uint64]struct{}, error) {
	p := o.Partition
	key := s.k.seenLog(p)
	n, err := s.rdb.LLen(ctx, key).Result()
	if redis.HasErrorPrefix(err, "WRONGTYPE") {
		rerr := repairLogScript.Run(ctx, s.rdb, []string{s.k.owner(p), key, s.k.counts(p)}, o.token).Err()
		if rerr = scriptErr(rerr); rerr != nil {
			return nil, fmt.Errorf("fleet: repair seen-set of partition %d: %w", p, rerr)
		}
		n, err = 0, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fleet: read seen-set of partition %d: %w", p, err)
	}
	fps := make(map[uint64]struct{})
	for at := int64(0); at < n; at += seenChunk {
		els, err := s.rdb.LRange(ctx, key, at, min(at+seenChunk, n)-1).Result()
		if err != nil {
			return nil, fmt.Errorf("fleet: read seen-set of partition %d: %w", p, err)
		}
		for _, e := range els {
			for i := 0; i+8 <= len(e); i += 8 {
				fps[binary.LittleEndian.Uint64([]byte(e[i:i+8]))] = struct{}{}
			}
		}
	}
	return fps, nil
}

// freshWrites returns the writes among ws whose URLs ss does not hold, each URL once, and the
// fingerprints a script records with them, packed as the log stores them: those of pre (URLs
// the same script records first, which are never among the writes returned) and of the writes
// returned, each that ss does not hold once.
func (ss *seenSet) freshWrites(pre []uint64, ws []seenWrite) (packed []byte, fresh []seenWrite) {
	batch := map[uint64]bool{}
	take := func(fp uint64) bool {
		if _, ok := ss.fps[fp]; ok || batch[fp] {
			return false
		}
		batch[fp] = true
		packed = binary.LittleEndian.AppendUint64(packed, fp)
		return true
	}
	for _, fp := range pre {
		take(fp)
	}
	for _, w := range ws {
		if take(Fingerprint(w.entry.URL)) {
			fresh = append(fresh, w)
		}
	}
	return packed, fresh
}
