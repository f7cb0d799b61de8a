package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"

	"go.etcd.io/bbolt"
)

// Check runs bbolt's consistency check (tx.Check) over the whole file: every page reachable
// once, none both used and free, keys in order. It returns the first max problems found and
// how many there were in all. A damaged page is a problem, not an error; err is for a store
// that cannot be read at all.
func (db *DB) Check(max int) (problems []string, total int, err error) {
	err = db.View(func(tx *bbolt.Tx) error {
		for e := range tx.Check() {
			if total++; len(problems) < max {
				problems = append(problems, e.Error())
			}
		}
		return nil
	})
	return problems, total, err
}

// SalvageStats says what Salvage copied and what it could not read.
type SalvageStats struct {
	Buckets int      // buckets copied, nested ones included
	Keys    int      // records copied
	Lost    int      // places where bbolt could not read on: the records there are lost
	Damage  []string // the first of those places: bucket path and what bbolt said
	// BodiesLost counts the pages whose metadata was copied but not their body: they are left
	// out of the new store, so that every page it holds exports.
	BodiesLost int
}

// salvageChunk bounds the records Salvage copies per commit of the new store.
const salvageChunk = 20_000

// Salvage copies every record of db that bbolt can read — pages, bodies, the frontier's
// records, host state, everything — with its bucket and the bucket's sequence, into a new
// store in dir (created; dir must hold no store yet). Where a bucket's records cannot be read
// on, it seeks past the damaged part and goes on; what lay there is lost and counted. Whatever
// the damage, the new store opens. A frontier copied so may still disagree with itself where
// records were lost (frontier.Check says where).
func (db *DB) Salvage(dir string) (SalvageStats, error) {
	var st SalvageStats
	if _, err := os.Stat(filepath.Join(dir, FileName)); !errors.Is(err, fs.ErrNotExist) {
		return st, fmt.Errorf("storage: salvage into %s: a store is there already", dir)
	}
	dst, err := Open(dir, nil)
	if err != nil {
		return st, err
	}
	s := &salvager{dst: dst, st: &st}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	err = db.View(func(tx *bbolt.Tx) error {
		var names [][]byte
		if d := protect(func() {
			tx.ForEach(func(name []byte, _ *bbolt.Bucket) error {
				names = append(names, bytes.Clone(name))
				return nil
			})
		}); d != nil {
			s.lost(nil, d)
		}
		for _, name := range names {
			if bytes.Equal(name, formatBucket) {
				continue // the new store has its own marker
			}
			var b *bbolt.Bucket
			if d := protect(func() { b = tx.Bucket(name) }); d != nil {
				s.lost([][]byte{name}, d)
				continue
			}
			if err := s.bucket([][]byte{name}, b); err != nil {
				return err
			}
		}
		return s.flush()
	})
	if err == nil {
		st.BodiesLost, err = dropBodiless(dst)
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	return st, err
}

// protect runs fn and returns the value of a panic raised in bbolt, nil if there was none; any
// other panic goes on.
func protect(fn func()) (damage any) {
	defer func() {
		if r := recover(); r != nil {
			if !fromBolt() {
				panic(r)
			}
			damage = r
		}
	}()
	fn()
	return nil
}

// salvageItem is one thing to write into the new store: a bucket (with its sequence) or a
// record, under its bucket path.
type salvageItem struct {
	path   [][]byte
	bucket bool
	seq    uint64
	k, v   []byte
}

type salvager struct {
	dst     *DB
	st      *SalvageStats
	pending []salvageItem
}

func (s *salvager) lost(path [][]byte, d any) {
	s.st.Lost++
	if len(s.st.Damage) < 20 {
		s.st.Damage = append(s.st.Damage, fmt.Sprintf("%s: %v", bytes.Join(path, []byte("/")), d))
	}
}

func (s *salvager) add(it salvageItem) error {
	s.pending = append(s.pending, it)
	if len(s.pending) >= salvageChunk {
		return s.flush()
	}
	return nil
}

// bucket copies b, at path, record by record, skipping what cannot be read.
func (s *salvager) bucket(path [][]byte, b *bbolt.Bucket) error {
	s.st.Buckets++
	if err := s.add(salvageItem{path: path, bucket: true, seq: b.Sequence()}); err != nil {
		return err
	}
	c := b.Cursor()
	var k, v, last []byte
	if d := protect(func() { k, v = c.First() }); d != nil {
		s.lost(path, d)
		c, k, v = skipPast(b, nil)
	}
	for k != nil {
		if last != nil && bytes.Compare(k, last) <= 0 { // out of order: the page lies
			s.lost(path, fmt.Sprintf("key %x after %x", k, last))
			if c, k, v = skipPast(b, last); k == nil {
				break
			}
		}
		last = bytes.Clone(k)
		if v == nil {
			var nb *bbolt.Bucket
			if d := protect(func() { nb = b.Bucket(k) }); d != nil {
				s.lost(append(path, last), d)
			} else if nb != nil {
				if err := s.bucket(append(append([][]byte(nil), path...), last), nb); err != nil {
					return err
				}
			}
		} else {
			s.st.Keys++
			if err := s.add(salvageItem{path: path, k: last, v: bytes.Clone(v)}); err != nil {
				return err
			}
		}
		if d := protect(func() { k, v = c.Next() }); d != nil {
			s.lost(path, d)
			c, k, v = skipPast(b, last)
		}
	}
	return nil
}

// skipPast returns a cursor on b at the first readable record after the damaged part that
// follows key after (nil: from the start), or a nil key if none is found. It seeks to ever
// coarser successors of after (its last byte incremented, then the one before with the rest
// cut…), so it may pass over some readable records, never over one before after.
func skipPast(b *bbolt.Bucket, after []byte) (*bbolt.Cursor, []byte, []byte) {
	for i := len(after) - 1; i >= 0; i-- {
		if after[i] == 0xff {
			continue
		}
		cand := append(bytes.Clone(after[:i]), after[i]+1)
		c := b.Cursor()
		var k, v []byte
		if d := protect(func() { k, v = c.Seek(cand) }); d == nil && (k == nil || bytes.Compare(k, after) > 0) {
			return c, k, v
		}
	}
	return nil, nil, nil
}

// flush writes the pending items into the new store in one transaction.
func (s *salvager) flush() error {
	if len(s.pending) == 0 {
		return nil
	}
	err := s.dst.Update(func(tx *bbolt.Tx) error {
		for _, it := range s.pending {
			b, err := tx.CreateBucketIfNotExists(it.path[0])
			if err != nil {
				return err
			}
			for _, name := range it.path[1:] {
				if b, err = b.CreateBucketIfNotExists(name); err != nil {
					return err
				}
			}
			if it.bucket {
				if err := b.SetSequence(it.seq); err != nil {
					return err
				}
				continue
			}
			if err := b.Put(it.k, it.v); err != nil {
				return err
			}
		}
		return nil
	})
	s.pending = s.pending[:0]
	if err != nil {
		return fmt.Errorf("storage: salvage into %s: %w", s.dst.path, err)
	}
	return nil
}

// dropBodiless deletes from db the pages whose body is missing (it was lost), and returns how
// many it deleted.
func dropBodiless(db *DB) (int, error) {
	n := 0
	err := db.Update(func(tx *bbolt.Tx) error {
		pages, bodies := tx.Bucket(bucketPages), tx.Bucket(bucketBodies)
		var lost [][]byte
		err := pages.ForEach(func(k, v []byte) error {
			if len(k) != 8 {
				return nil
			}
			p, err := decodePage(binary.BigEndian.Uint64(k), v, nil, false)
			switch {
			case err != nil: // unreadable metadata: as lost as its body
			case bodies.Get(k) != nil, p.RevisitOf != 0, p.SameAs != 0 && bodies.Get(seqKey(p.SameAs)) != nil:
				return nil
			}
			lost = append(lost, bytes.Clone(k))
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range lost {
			if err := pages.Delete(k); err != nil {
				return err
			}
		}
		n = len(lost)
		return nil
	})
	return n, err
}
