//go:build linux

package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crawl-project/crawl/internal/storetest"
	"go.etcd.io/bbolt"
)

// sealedStore returns the directory of a store of n pages, closed cleanly (so sealed).
func sealedStore(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	db, err := Open(dir, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		p := testPage(i % 200)
		p.URL += fmt.Sprintf("?n=%d", i)
		if err := db.Update(func(tx *bbolt.Tx) error { _, err := PutPage(tx, p); return err }); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// openedAs opens the store in dir with opts and returns how Open judged the file, failing t
// if it does not open.
func openedAs(t *testing.T, dir string, opts *Options) (*DB, openKind) {
	t.Helper()
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return db, db.opened
}

func hasSeal(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, SealFileName))
	return err == nil
}

// TestSealSkipsWalk: a store closed cleanly opens without the page walk, read-only or for
// writing; while it is open for writing it has no seal (a crawl killed then leaves its store
// to be walked), and closing it seals it again.
func TestSealSkipsWalk(t *testing.T) {
	dir := sealedStore(t, 300)
	if !hasSeal(dir) {
		t.Fatal("no seal after a clean close")
	}
	db, how := openedAs(t, dir, &Options{ReadOnly: true})
	if how != openSealed {
		t.Errorf("read-only open of a sealed store: %v, want openSealed", how)
	}
	db.Close()
	if !hasSeal(dir) {
		t.Fatal("a read-only open removed the seal")
	}

	db, how = openedAs(t, dir, &Options{NoSync: true})
	if how != openSealed {
		t.Errorf("open of a sealed store for writing: %v, want openSealed", how)
	}
	if hasSeal(dir) {
		t.Error("a store open for writing keeps its seal")
	}
	if err := db.Update(func(tx *bbolt.Tx) error { _, err := PutPage(tx, testPage(9)); return err }); err != nil {
		t.Fatal(err)
	}
	// A crawl killed now: its store, copied as it is, is walked at the next Open.
	crashed := t.TempDir()
	data, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(crashed, FileName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if !hasSeal(dir) || !sealed(filepath.Join(dir, FileName)) {
		t.Error("no valid seal after the store was written and closed")
	}
	db, how = openedAs(t, crashed, &Options{ReadOnly: true})
	if how != openWalked {
		t.Errorf("open of a store whose crawl did not close it: %v, want openWalked", how)
	}
	db.Close()
}

// TestSealCatchesChanges: a seal is trusted only for the very file and bytes it was written
// for. Damage done after a clean close is found, even where the file's times do not show the
// write; a seal copied with its store, or one that does not parse, only costs a walk.
func TestSealCatchesChanges(t *testing.T) {
	damageLeaf := func(t *testing.T, dir string) {
		t.Helper()
		if n := storetest.MustDamageLeaves(t, filepath.Join(dir, FileName), func(i, n int) bool { return i == n/2 }); n != 1 {
			t.Fatalf("damaged %d pages, want 1", n)
		}
	}
	for _, tc := range []struct {
		name    string
		change  func(t *testing.T, dir string) string // returns the directory to open
		damaged bool
	}{
		{"a leaf damaged", func(t *testing.T, dir string) string { damageLeaf(t, dir); return dir }, true},
		{"a leaf damaged, the seal made to name the file as it is now", func(t *testing.T, dir string) string {
			// A write that kept the file's times (within their clock tick): only the checksum
			// tells.
			path := filepath.Join(dir, FileName)
			b, err := os.ReadFile(filepath.Join(dir, SealFileName))
			if err != nil {
				t.Fatal(err)
			}
			s, ok := parseSeal(b)
			if !ok {
				t.Fatalf("seal %q does not parse", b)
			}
			damageLeaf(t, dir)
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if s.id, ok = identify(f); !ok {
				t.Fatal("no file id")
			}
			if err := os.WriteFile(filepath.Join(dir, SealFileName), []byte(s.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			return dir
		}, true},
		{"the store and its seal copied", func(t *testing.T, dir string) string {
			to := t.TempDir()
			for _, name := range []string{FileName, SealFileName} {
				b, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(to, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			return to
		}, false},
		{"a seal that does not parse", func(t *testing.T, dir string) string {
			if err := os.WriteFile(filepath.Join(dir, SealFileName), []byte("crawl-seal/1 dev=x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			return dir
		}, false},
		{"a seal too long to read", func(t *testing.T, dir string) string {
			b, _ := os.ReadFile(filepath.Join(dir, SealFileName))
			if err := os.WriteFile(filepath.Join(dir, SealFileName), append(b, strings.Repeat(" ", 1<<20)...), 0o644); err != nil {
				t.Fatal(err)
			}
			return dir
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.change(t, sealedStore(t, 400))
			path := filepath.Join(dir, FileName)
			db, err := Open(dir, &Options{ReadOnly: true})
			if tc.damaged {
				if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), path) {
					t.Fatalf("Open: %v; want ErrDamaged naming %s", err, path)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if db.opened != openWalked {
				t.Errorf("opened %v, want openWalked", db.opened)
			}
		})
	}
}

// TestNoSealAfterDamage: a store in which a transaction met damage is not sealed at Close, so
// the next Open walks it.
func TestNoSealAfterDamage(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(*bbolt.Tx) error { return fmt.Errorf("%w: a record that does not decode", ErrDamaged) })
	if !errors.Is(err, ErrDamaged) {
		t.Fatal(err)
	}
	db.Close()
	if hasSeal(dir) {
		t.Error("a store that met damage was sealed")
	}
}

func (k openKind) String() string {
	switch k {
	case openNew:
		return "openNew"
	case openWalked:
		return "openWalked"
	case openSealed:
		return "openSealed"
	case openNoMeta:
		return "openNoMeta"
	}
	return fmt.Sprintf("openKind(%d)", int(k))
}
