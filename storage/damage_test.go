package storage

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crawl-project/crawl/internal/storetest"
	"go.etcd.io/bbolt"
)

// TestDamagedStore: a leaf page with a wrong id makes Open return ErrDamaged naming the file
// (no panic), Check lists it, and Salvage, which reads such a page anyway (only its header is
// wrong), copies every record into a store that opens and passes Check.
func TestDamagedStore(t *testing.T) {
	db, dir := newTestDB(t)
	const n = 400
	for i := range n {
		p := testPage(i % 200)
		p.URL += "?n=" + strings.Repeat("0", i%7) + string(rune('a'+i%26))
		if err := db.Update(func(tx *bbolt.Tx) error { _, err := PutPage(tx, p); return err }); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	path := filepath.Join(dir, FileName)
	if got := storetest.MustDamageLeaves(t, path, func(i, n int) bool { return i == n/2 }); got != 1 {
		t.Fatalf("damaged %d pages, want 1", got)
	}

	if _, err := Open(dir, &Options{ReadOnly: true}); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), path) {
		t.Fatalf("opening the damaged store: %v; want ErrDamaged naming %s", err, path)
	}
	db, err := Open(dir, &Options{Damaged: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Pages(func(*Page) error { return nil })
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), path) {
		t.Fatalf("reading every page: %v; want ErrDamaged naming %s", err, path)
	}
	problems, total, err := db.Check(5)
	if err != nil || total == 0 || len(problems) == 0 {
		t.Fatalf("Check: %v, %d problems (%q); want the damage listed", err, total, problems)
	}
	t.Logf("check: %d problems, first %q", total, problems[0])

	to := filepath.Join(t.TempDir(), "salvaged")
	st, err := db.Salvage(to, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("salvage: %+v", st)
	if st.Lost == 0 || st.Keys == 0 {
		t.Errorf("salvage %+v: want records copied and the damage counted", st)
	}
	s, err := Open(to, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("the salvaged store does not open: %v", err)
	}
	defer s.Close()
	if problems, total, err := s.Check(5); err != nil || total != 0 {
		t.Errorf("the salvaged store fails its check: %v %q", err, problems)
	}
	got := 0
	if err := s.PagesMeta(func(*Page) error { got++; return nil }); err != nil {
		t.Fatal(err)
	}
	if got != n {
		t.Errorf("salvaged %d of %d pages' metadata; want all: only a page's header was damaged", got, n)
	}
}

// TestSalvageEscapesNames: what Salvage and Check say about a damaged bucket names it with its
// bytes escaped (a NUL or an escape sequence in a bucket name never reaches a terminal raw).
func TestSalvageEscapesNames(t *testing.T) {
	db, dir := newTestDB(t)
	const name = "hosts\x00a\x1b[31m"
	if err := db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket([]byte(name))
		if err != nil {
			return err
		}
		for i := range 2000 {
			if err := b.Put([]byte(strings.Repeat("k", 20)+string(rune('a'+i%26))+strings.Repeat("0", i%40)+string(rune(i))), make([]byte, 100)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	path := filepath.Join(dir, FileName)
	if n := storetest.MustDamageLeavesOf(t, path, name, func(i, n int) bool { return i == 0 }); n != 1 {
		t.Fatalf("damaged %d pages, want 1", n)
	}
	db, err := Open(dir, &Options{Damaged: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	problems, _, err := db.Check(5)
	if err != nil {
		t.Fatal(err)
	}
	st, err := db.Salvage(filepath.Join(t.TempDir(), "salvaged"), nil)
	if err != nil {
		t.Fatal(err)
	}
	said := strings.Join(append(problems, st.Damage...), "\n")
	if strings.ContainsAny(said, "\x00\x1b") || !strings.Contains(said, `hosts\x00a\x1b[31m`) {
		t.Errorf("Check and Salvage say %q; want the bucket named with its bytes escaped", said)
	}
}

// TestDamagePanics: inside a transaction, an index out of range (a decoder trusting a length
// the file gave) is ErrDamaged naming the file and the function; any other panic goes on.
func TestDamagePanics(t *testing.T) {
	db, dir := newTestDB(t)
	short := []byte{1, 2, 3}
	err := db.View(func(*bbolt.Tx) error { _ = short[len(short)+4]; return nil })
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), filepath.Join(dir, FileName)) || !strings.Contains(err.Error(), "TestDamagePanics") {
		t.Errorf("an index out of range in View: %v; want ErrDamaged naming the file and where", err)
	}
	for _, bug := range []func(){func() { panic("a bug") }, func() { var p *Page; _ = p.URL }} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("a panic that is no damage was swallowed")
				}
			}()
			db.View(func(*bbolt.Tx) error { bug(); return nil })
		}()
	}
}
