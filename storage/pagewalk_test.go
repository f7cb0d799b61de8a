package storage

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"go.etcd.io/bbolt"
)

// countingReader counts what is read through it.
type countingReader struct {
	r     *os.File
	bytes atomic.Int64
}

func (c *countingReader) ReadAt(b []byte, off int64) (int, error) {
	c.bytes.Add(int64(len(b)))
	return c.r.ReadAt(b, off)
}

// TestWalkReadsScatteredTreeOnce: the walk at Open of a store whose pages bbolt scattered over
// the file (records put at random keys over many transactions, so each commit writes its
// leaves where the free list has room) reads about the file once, not a read-ahead window per
// page.
func TestWalkReadsScatteredTreeOnce(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	v := make([]byte, 200)
	for range 300 {
		if err := db.Update(func(tx *bbolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("scattered"))
			if err != nil {
				return err
			}
			for range 100 {
				k := binary.BigEndian.AppendUint64(nil, rng.Uint64())
				if err := b.Put(k, v); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	f, err := os.Open(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	c := &countingReader{r: f}
	res, err := walkReader(c, uint64(fi.Size()), walkOpen, 1, 1, nil)
	if err != nil || res.total != 0 {
		t.Fatalf("walk: %v %q", err, res.problems)
	}
	read := c.bytes.Load()
	t.Logf("the walk read %d bytes of a %d-byte file (%.2f×)", read, fi.Size(), float64(read)/float64(fi.Size()))
	if read > 2*fi.Size() {
		t.Errorf("the walk read %d bytes of a %d-byte file; want at most twice the file", read, fi.Size())
	}
}
