package storage

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/bbolt"
)

// TestOpenNotAFile: a crawl.db that is a directory is not a store, read-only or not.
func TestOpenNotAFile(t *testing.T) {
	for _, ro := range []bool{false, true} {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, FileName), 0o755); err != nil {
			t.Fatal(err)
		}
		db, err := Open(dir, &Options{ReadOnly: ro})
		if err == nil {
			db.Close()
		}
		if !errors.Is(err, ErrNotStore) || !strings.Contains(err.Error(), "a directory") {
			t.Errorf("ReadOnly %v: Open = %v, want ErrNotStore saying it is a directory", ro, err)
		}
	}
}

// TestOpenCutShort: a store whose file lost its tail is refused as damaged, read-only too (a
// read-only open would otherwise show the counters of its first pages as if nothing were
// wrong); Options.Damaged opens it, for Check and Salvage.
func TestOpenCutShort(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	big := make(map[string][]byte)
	for i := 0; i < 2000; i++ {
		big[strings.Repeat("h", 10)+string(rune('a'+i%26))+strings.Repeat("x", i%50)+string(rune(i))] = make([]byte, 500)
	}
	if err := db.SaveHostStates(big); err != nil {
		t.Fatal(err)
	}
	db.Close()
	path := filepath.Join(dir, FileName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{true, false} {
		db, err := Open(dir, &Options{ReadOnly: ro})
		if err == nil {
			db.Close()
		}
		if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), path) {
			t.Errorf("ReadOnly %v: Open of a store cut in half = %v, want ErrDamaged naming %s", ro, err, path)
		}
	}
	db, err = Open(dir, &Options{Damaged: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, total, err := db.Check(1); err != nil || total == 0 {
		t.Errorf("Check of a store cut in half: %v, %d problems; want the damage found", err, total)
	}
}

// TestReadMeta: the meta pages of a store this package wrote are found and agree with bbolt.
func TestReadMeta(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PutMeta("k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	var size int64
	db.Bolt().View(func(tx *bbolt.Tx) error { size = tx.Size(); return nil })
	db.Close()
	f, err := os.Open(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m0, ok0 := readMeta(f, 0)
	m1, ok1 := readMeta(f, int64(os.Getpagesize()))
	if !ok0 || !ok1 || m0.txid == m1.txid {
		t.Fatalf("meta pages %+v %v, %+v %v; want two valid ones with different txids", m0, ok0, m1, ok1)
	}
	newest := m0
	if m1.txid > m0.txid {
		newest = m1
	}
	if int64(newest.pgid*newest.pageSize) != size {
		t.Errorf("newest meta says %d bytes, bbolt's tx.Size() %d", newest.pgid*newest.pageSize, size)
	}
}
