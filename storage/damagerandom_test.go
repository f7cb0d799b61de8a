package storage

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/storetest"
	"go.etcd.io/bbolt"
)

// damageSeeds is how many seeds TestRandomDamage draws of each kind of damage; go test
// -damage-seeds 200 ./storage widens it.
var damageSeeds = flag.Int("damage-seeds", 4, "seeds of each kind of damage TestRandomDamage draws")

// Damage is one kind of damage done to a copy of a store file.
type damage struct {
	name string
	do   func(f *storetest.File, rng *rand.Rand) bool // false: not applicable to this file
}

// damageKinds are the kinds of damage the random damage tests draw from.
var damageKinds = []damage{
	{"200 random bytes", func(f *storetest.File, rng *rand.Rand) bool { f.RandomBytes(rng, 200); return true }},
	{"2000 random bytes", func(f *storetest.File, rng *rand.Rand) bool { f.RandomBytes(rng, 2000); return true }},
	{"20000 random bytes", func(f *storetest.File, rng *rand.Rand) bool { f.RandomBytes(rng, 20000); return true }},
	{"a bit flipped", func(f *storetest.File, rng *rand.Rand) bool { f.FlipBit(rng, false); return true }},
	{"a bit flipped in a page in use", func(f *storetest.File, rng *rand.Rand) bool { f.FlipBit(rng, true); return true }},
	{"a range zeroed", func(f *storetest.File, rng *rand.Rand) bool { f.Zero(rng, 64<<10); return true }},
	{"cut short", func(f *storetest.File, rng *rand.Rand) bool { f.Truncate(rng); return true }},
	{"a page pointing to itself", func(f *storetest.File, rng *rand.Rand) bool { return f.SelfLoop(rng) }},
	{"a byte of the root bucket's page", func(f *storetest.File, rng *rand.Rand) bool { f.RootByte(rng); return true }},
	{"an overflow count of 2^32-1", func(f *storetest.File, rng *rand.Rand) bool { f.Overflow(rng, 1<<32-1); return true }},
	{"an overflow count of 3", func(f *storetest.File, rng *rand.Rand) bool { f.Overflow(rng, 3); return true }},
}

// TestRandomDamage: whatever the damage, Open returns the store or ErrDamaged naming its file;
// every read of a store that opens ends (no panic, no fault, no loop) with its records or
// ErrDamaged; Check and Salvage of any store that opens with Options.Damaged end too, and the
// salvaged store passes Check.
func TestRandomDamage(t *testing.T) {
	db, dir := newTestDB(t)
	for i := range 600 {
		p := testPage(i % 300)
		p.URL += fmt.Sprintf("?n=%d", i)
		if i%3 == 0 { // rendered pages: damage reaches their DOMs too
			p.Render = &RenderInfo{Cut: RenderCut(i % 4), Requests: i}
			p.Rendered = []byte(fmt.Sprintf("<html><body><p>rendered %d %s</p></body></html>", i, strings.Repeat("r", i)))
		}
		if err := db.Update(func(tx *bbolt.Tx) error {
			if _, err := PutPage(tx, p); err != nil {
				return err
			}
			b, err := tx.CreateBucketIfNotExists([]byte("nested\x00name"))
			if err != nil {
				return err
			}
			if b, err = b.CreateBucketIfNotExists([]byte(fmt.Sprintf("n%d", i%5))); err != nil {
				return err
			}
			return b.Put([]byte(p.URL), []byte(strings.Repeat("v", i)))
		}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	good, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range damageKinds {
		for seed := range uint64(*damageSeeds) {
			t.Run(fmt.Sprintf("%s/seed %d", kind.name, seed), func(t *testing.T) {
				f, err := storetest.ReadFile(append([]byte(nil), good...))
				if err != nil {
					t.Fatal(err)
				}
				if !kind.do(f, rand.New(rand.NewPCG(seed, 45))) {
					t.Skip("no such page")
				}
				dir := t.TempDir()
				path := filepath.Join(dir, FileName)
				if err := os.WriteFile(path, f.Data, 0o644); err != nil {
					t.Fatal(err)
				}
				within(t, 30*time.Second, func() { readDamaged(t, dir, path) })
			})
		}
	}
}

// within runs fn, failing t if it takes longer than d or leaves the heap over 1 GiB.
func within(t *testing.T, d time.Duration, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("not done within %v", d)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapSys > 1<<30 {
		t.Fatalf("heap of %d MiB", ms.HeapSys>>20)
	}
}

// readDamaged reads the store in dir every way there is, checking each outcome.
func readDamaged(t *testing.T, dir, path string) {
	damaged := func(what string, err error) {
		t.Helper()
		if err != nil && (!errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), path)) {
			t.Errorf("%s: %v; want nil or ErrDamaged naming %s", what, err, path)
		}
	}
	for _, ro := range []bool{true, false} {
		db, err := Open(dir, &Options{ReadOnly: ro, NoSync: true})
		damaged(fmt.Sprintf("Open (read-only %v)", ro), err)
		if err != nil {
			continue
		}
		damaged("Pages", db.Pages(func(*Page) error { return nil }))
		_, _, err = db.StoredBodies()
		damaged("StoredBodies", err)
		damaged("HostStates", db.HostStates(func(string, []byte) error { return nil }))
		damaged("RobotsFetches", db.RobotsFetches(func(*Page) error { return nil }))
		if !ro {
			damaged("StorePage", func() error { _, err := db.StorePage(testPage(7)); return err }())
		}
		db.Close()
	}
	db, err := Open(dir, &Options{Damaged: true})
	damaged("Open (damaged)", err)
	if err != nil {
		return
	}
	defer db.Close()
	problems, total, err := db.Check(3)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	t.Logf("Check: %d problems %q", total, problems)
	to := filepath.Join(t.TempDir(), "salvaged")
	st, err := db.Salvage(to, nil)
	if err != nil {
		t.Fatalf("Salvage: %v", err)
	}
	t.Logf("Salvage: %d records, %d places lost", st.Keys, st.Lost)
	s, err := Open(to, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("the salvaged store does not open: %v", err)
	}
	defer s.Close()
	if problems, total, err := s.Check(3); err != nil || total != 0 {
		t.Errorf("the salvaged store fails Check: %v %q", err, problems)
	}
	if problems, total, err := s.CheckPages(3); err != nil || total != 0 {
		t.Errorf("the salvaged store's pages do not all decode: %v %q", err, problems)
	}
}

// FuzzPageWalk: the walk of any file ends without a panic, in every mode.
func FuzzPageWalk(f *testing.F) {
	dir := f.TempDir()
	db, err := Open(dir, &Options{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	for i := range 40 {
		if err := db.Update(func(tx *bbolt.Tx) error { _, err := PutPage(tx, testPage(i)); return err }); err != nil {
			f.Fatal(err)
		}
	}
	db.Close()
	good, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), FileName)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, mode := range []walkMode{walkOpen, walkCheck, walkSalvage} {
			walkFile(path, mode, 5, 0, nopVisitor{})
		}
	})
}

type nopVisitor struct{}

func (nopVisitor) bucket([][]byte, uint64) error         { return nil }
func (nopVisitor) record([][]byte, []byte, []byte) error { return nil }
