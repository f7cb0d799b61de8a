package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Check walks the whole file's page graph (read with pread, never through the mapping, so it
// cannot fault, loop or run out of memory on any damage): every page within the file and
// reached once, of the right type, its elements within it, keys in order, the free pages
// apart from those in use and none left out. It returns the first max problems found and how
// many there were in all. A damaged page is a problem, not an error; err is for a file that
// cannot be read at all.
func (db *DB) Check(max int) (problems []string, total int, err error) {
	res, err := walkFile(db.path, walkCheck, max, 0, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("storage: check %s: %w", db.path, err)
	}
	if res.total == 0 && db.broken != nil {
		// The walk at Open found what this one did not: the file changed meanwhile.
		return []string{db.broken.Error()}, 1, nil
	}
	return res.problems, res.total, nil
}

// CheckPages decodes every stored page's metadata, body and rendered DOM, as an export reads them, and
// returns the first max that do not decode and how many there were. It needs a store whose
// pages Check passes.
func (db *DB) CheckPages(max int) (problems []string, total int, err error) {
	err = db.View(func(tx *bbolt.Tx) error {
		pages := tx.Bucket(bucketPages)
		if pages == nil {
			return nil
		}
		in := contentsOf(tx)
		n := 0
		return pages.ForEach(func(k, v []byte) error {
			if n++; n%trimPages == 0 {
				_ = trimTx(tx)
			}
			var err error
			if len(k) != 8 {
				err = fmt.Errorf("a page key of %d bytes (%x)", len(k), k)
			} else {
				_, err = decodePage(binary.BigEndian.Uint64(k), v, in, true)
			}
			if err != nil {
				if total++; len(problems) < max {
					problems = append(problems, "pages: "+err.Error())
				}
			}
			return nil
		})
	})
	return problems, total, err
}

// SalvageStats says what Salvage copied and what it could not read.
type SalvageStats struct {
	Buckets int      // buckets copied, nested ones included
	Keys    int      // records copied
	Lost    int      // places where the file could not be read on: the records there are lost
	Damage  []string // the first of those places: bucket path (escaped) and what was wrong
	// BodiesLost counts the pages whose metadata was copied but not their body or rendered
	// DOM: they are left out of the new store, so that every page it holds exports.
	BodiesLost int
}

// Bounds of what Salvage holds before it commits to the new store.
const (
	salvageChunk = 20_000   // records
	salvageBytes = 64 << 20 // bytes of keys and values
)

// Salvage copies every record of db that can be read — pages, bodies, the frontier's records,
// host state, everything — with its bucket and the bucket's sequence, into a new store in dir
// (created; dir must hold no store yet). It reads the file page by page as Check does, never
// trusting the page graph, so any store that opens (with Options.Damaged) is salvaged: what
// lies in a damaged page is lost and counted, the rest is copied. Then finish, if not nil,
// runs on the new store (the frontier's repair). The new store is built under a temporary name
// in dir and takes the name crawl.db only when all that is done, so a salvage that is killed
// leaves no store behind. A frontier copied so may still disagree with itself where records
// were lost (frontier.Check says where; frontier.Repair mends it).
func (db *DB) Salvage(dir string, finish func(*DB) error) (SalvageStats, error) {
	var st SalvageStats
	final := filepath.Join(dir, FileName)
	if _, err := os.Stat(final); !errors.Is(err, fs.ErrNotExist) {
		return st, fmt.Errorf("storage: salvage into %s: a store is there already", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return st, fmt.Errorf("storage: salvage into %s: %w", dir, err)
	}
	removeStaleSalvages(dir)
	tmp, err := os.MkdirTemp(dir, salvagePrefix)
	if err != nil {
		return st, fmt.Errorf("storage: salvage into %s: %w", dir, err)
	}
	defer os.RemoveAll(tmp)
	dst, err := Open(tmp, nil)
	if err != nil {
		return st, err
	}
	s := &salvager{dst: dst, st: &st}
	res, err := walkFile(db.path, walkSalvage, 20, 0, s)
	st.Lost, st.Damage = res.total, res.problems
	if err == nil {
		err = s.flush()
	}
	if err == nil {
		st.BodiesLost, err = dropBodiless(dst)
	}
	if err == nil && finish != nil {
		err = finish(dst)
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return st, err
	}
	// Linking fails if a store appeared meanwhile: it is never replaced.
	if err := os.Link(filepath.Join(tmp, FileName), final); err != nil {
		return st, fmt.Errorf("storage: salvage into %s: %w", dir, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return st, nil
}

// salvagePrefix names the directories Salvage builds its store in.
const salvagePrefix = ".salvage-"

// removeStaleSalvages deletes what a salvage killed midway left in dir (older than a minute,
// so that one running right now keeps its directory).
func removeStaleSalvages(dir string) {
	names, _ := filepath.Glob(filepath.Join(dir, salvagePrefix+"*"))
	for _, n := range names {
		if fi, err := os.Stat(n); err == nil && fi.IsDir() && time.Since(fi.ModTime()) > time.Minute {
			os.RemoveAll(n)
		}
	}
}

// salvageItem is one thing to write into the new store: a bucket (with its sequence) or a
// record, under its bucket path.
type salvageItem struct {
	path   [][]byte
	bucket bool
	seq    uint64
	k, v   []byte
}

// salvager writes what the walk reads into the new store, in commits of bounded size.
type salvager struct {
	dst     *DB
	st      *SalvageStats
	pending []salvageItem
	bytes   int
}

func (s *salvager) bucket(path [][]byte, seq uint64) error {
	if bytes.Equal(path[0], formatBucket) {
		return nil // the new store has its own marker
	}
	s.st.Buckets++
	return s.add(salvageItem{path: path, bucket: true, seq: seq})
}

func (s *salvager) record(path [][]byte, k, v []byte) error {
	if bytes.Equal(path[0], formatBucket) {
		return nil
	}
	s.st.Keys++
	return s.add(salvageItem{path: path, k: k, v: v})
}

func (s *salvager) add(it salvageItem) error {
	s.pending = append(s.pending, it)
	if s.bytes += len(it.k) + len(it.v); len(s.pending) >= salvageChunk || s.bytes >= salvageBytes {
		return s.flush()
	}
	return nil
}

// flush writes the pending items into the new store in one transaction.
func (s *salvager) flush() error {
	if len(s.pending) == 0 {
		return nil
	}
	err := s.dst.Update(func(tx *bbolt.Tx) error {
		for _, it := range s.pending {
			err := putItem(tx, it)
			switch {
			case errors.Is(err, berrors.ErrIncompatibleValue), errors.Is(err, berrors.ErrKeyTooLarge), errors.Is(err, berrors.ErrValueTooLarge):
				// A record and a bucket of one name (a flag changed on disk): the first kept.
				if s.st.Lost++; len(s.st.Damage) < 20 {
					s.st.Damage = append(s.st.Damage, fmt.Sprintf("%s: key %q: %v", pageName(it.path), it.k, err))
				}
			case err != nil:
				return err
			}
		}
		return nil
	})
	s.pending, s.bytes = s.pending[:0], 0
	if err != nil {
		return fmt.Errorf("storage: salvage into %s: %w", s.dst.path, err)
	}
	return nil
}

// putItem writes it into tx.
func putItem(tx *bbolt.Tx, it salvageItem) error {
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
		return b.SetSequence(it.seq)
	}
	return b.Put(it.k, it.v)
}

// dropBodiless deletes from db the pages whose metadata, body or rendered DOM is missing or
// does not decode (it was lost or damaged), and returns how many it deleted.
func dropBodiless(db *DB) (int, error) {
	n := 0
	err := db.Update(func(tx *bbolt.Tx) error {
		pages, in := tx.Bucket(bucketPages), contentsOf(tx)
		var lost [][]byte
		// The page buckets hold no buckets: one there is a record whose flag changed on disk,
		// and would stand in the way of a page stored under its key.
		for _, b := range []*bbolt.Bucket{in.bodies, in.rendered} {
			var nested [][]byte
			if err := b.ForEach(func(k, v []byte) error {
				if v == nil {
					nested = append(nested, bytes.Clone(k))
				}
				return nil
			}); err != nil {
				return err
			}
			for _, k := range nested {
				if err := b.DeleteBucket(k); err != nil {
					return err
				}
			}
		}
		err := pages.ForEach(func(k, v []byte) error {
			if len(k) != 8 || v == nil {
				lost = append(lost, bytes.Clone(k))
				return nil
			}
			if _, err := decodePage(binary.BigEndian.Uint64(k), v, in, true); err != nil {
				lost = append(lost, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range lost {
			err := pages.Delete(k)
			if errors.Is(err, berrors.ErrIncompatibleValue) {
				err = pages.DeleteBucket(k)
			}
			if err != nil {
				return err
			}
		}
		n = len(lost)
		return nil
	})
	return n, err
}
