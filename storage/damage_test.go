package storage

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/bbolt"
)

// DamagePages changes the page id in the header of the leaf pages of the store file at path
// that pick chooses (given the leaf's index among them and their count), as bytes flipped on
// disk would; bbolt asserts on such a page when it reads it. The meta pages and the root
// bucket's pages are left alone, so the store still opens. It returns how many pages it damaged.
func damagePages(t *testing.T, path string, pick func(i, n int) bool) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const ps = 4096
	m0, m1 := data[16:], data[ps+16:]
	meta := m0
	if binary.LittleEndian.Uint64(m1[48:]) > binary.LittleEndian.Uint64(m0[48:]) { // txid
		meta = m1
	}
	// The root bucket's tree: its branch pages list their children as 16-byte elements (pos,
	// ksize, pgid) after the 16-byte page header.
	rootTree := map[uint64]bool{}
	var walk func(id uint64)
	walk = func(id uint64) {
		rootTree[id] = true
		h := data[id*ps:]
		if binary.LittleEndian.Uint16(h[8:]) != 0x01 {
			return
		}
		for e := range int(binary.LittleEndian.Uint16(h[10:])) {
			walk(binary.LittleEndian.Uint64(h[16+16*e+8:]))
		}
	}
	walk(binary.LittleEndian.Uint64(meta[16:]))
	var leaves []int
	for i := 2; (i+1)*ps <= len(data); i++ {
		h := data[i*ps:]
		if binary.LittleEndian.Uint64(h) == uint64(i) && binary.LittleEndian.Uint16(h[8:]) == 0x02 && !rootTree[uint64(i)] {
			leaves = append(leaves, i)
		}
	}
	n := 0
	for j, i := range leaves {
		if pick(j, len(leaves)) {
			binary.LittleEndian.PutUint64(data[i*ps:], uint64(i)+1_000_000)
			n++
		}
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDamagedStore: a leaf page with a wrong id makes reads return ErrDamaged naming the file
// (no panic), Check lists it, and Salvage copies every other record into a store that opens.
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
	if got := damagePages(t, path, func(i, n int) bool { return i == n/2 }); got != 1 {
		t.Fatalf("damaged %d pages, want 1", got)
	}

	db, err := Open(dir, &Options{ReadOnly: true})
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
	st, err := db.Salvage(to)
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
	if got < n/2 || got >= n {
		t.Errorf("salvaged %d of %d pages' metadata; want most, not all", got, n)
	}
}
