package storage

import (
	"bytes"
	"fmt"
	"testing"

	"go.etcd.io/bbolt"
)

// TestRobotsFetches: robots.txt responses come back in the order kept, body and all, numbered
// apart from the pages, which never include them.
func TestRobotsFetches(t *testing.T) {
	db, _ := newTestDB(t)
	if err := db.Bolt().Update(func(tx *bbolt.Tx) error { _, err := PutPage(tx, testPage(1)); return err }); err != nil {
		t.Fatal(err)
	}
	var kept []*Page
	for i := range 3 {
		p := testPage(i + 5)
		p.URL = "http://h" + string(rune('a'+i)) + ".test/robots.txt"
		if err := db.PutRobotsFetch(p); err != nil {
			t.Fatal(err)
		}
		if p.Seq != uint64(i+1) {
			t.Errorf("robots.txt fetch %d: Seq %d", i, p.Seq)
		}
		kept = append(kept, p)
	}
	var got []*Page
	if err := db.RobotsFetches(func(p *Page) error { got = append(got, p); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(kept) {
		t.Fatalf("%d robots.txt fetches, want %d", len(got), len(kept))
	}
	for i := range kept {
		if !samePage(got[i], kept[i], true) || !bytes.Equal(got[i].Body, kept[i].Body) {
			t.Errorf("robots.txt fetch %d: got %+v, want %+v", i, got[i], kept[i])
		}
	}
	n := 0
	if err := db.Pages(func(p *Page) error { n++; return nil }); err != nil || n != 1 {
		t.Errorf("Pages saw %d pages (%v), want the 1 page only", n, err)
	}
}

// TestRobotsFetchesOldStore: a store from before robots.txt fetches were kept (no bucket) opens
// read-only with none, and opened for writing gains the bucket.
func TestRobotsFetchesOldStore(t *testing.T) {
	db, dir := newTestDB(t)
	if err := db.Bolt().Update(func(tx *bbolt.Tx) error { return tx.DeleteBucket(bucketRobotsFetches) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(dir, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := ro.RobotsFetches(func(*Page) error { n++; return nil }); err != nil || n != 0 {
		t.Errorf("old store read-only: %d robots.txt fetches, %v", n, err)
	}
	ro.Close()
	rw, err := Open(dir, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if err := rw.PutRobotsFetch(testPage(1)); err != nil {
		t.Errorf("old store opened for writing: %v", err)
	}
	if err := rw.RobotsFetches(func(*Page) error { n++; return nil }); err != nil || n != 1 {
		t.Errorf("old store opened for writing: %d robots.txt fetches, %v", n, err)
	}
}

// TestRobotsFetchesConcurrent: fetches kept at once (one commit) each get one record and a
// distinct Seq.
func TestRobotsFetchesConcurrent(t *testing.T) {
	db, _ := newTestDB(t)
	const n = 20
	errs := make(chan error, n)
	for i := range n {
		go func() {
			p := testPage(1)
			p.URL = fmt.Sprintf("http://h%d.test/robots.txt", i)
			errs <- db.PutRobotsFetch(p)
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	seqs, urls := map[uint64]bool{}, map[string]bool{}
	if err := db.RobotsFetches(func(p *Page) error { seqs[p.Seq], urls[p.URL] = true, true; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(seqs) != n || len(urls) != n {
		t.Errorf("%d distinct Seqs and %d URLs kept, want %d each", len(seqs), len(urls), n)
	}
}

// TestSequenceBucketsFillTheirPages: the buckets keyed by sequence (pages, robots.txt fetches)
// are only ever appended to, so their leaf pages are filled to the brim, not split half empty:
// a broad crawl keeps one robots.txt response of about 900 bytes for every host it meets, which
// took 2 KiB of file each at bbolt's default fill. Here, 760-byte records: 0.37 of the leaf
// bytes in use at the default fill, 0.56 at appendFill (three records a page).
func TestSequenceBucketsFillTheirPages(t *testing.T) {
	db, _ := newTestDB(t)
	for i := range 400 {
		p := testPage(i)
		p.URL = fmt.Sprintf("http://h%05d.test/robots.txt", i)
		p.Body = bytes.Repeat([]byte("Allow: /\n"), 20)
		if err := db.PutRobotsFetch(p); err != nil {
			t.Fatal(err)
		}
		if err := db.Bolt().Update(func(tx *bbolt.Tx) error { _, err := PutPage(tx, p); return err }); err != nil {
			t.Fatal(err)
		}
	}
	err := db.Bolt().View(func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{bucketRobotsFetches, bucketPages} {
			s := tx.Bucket(name).Stats()
			fill := float64(s.LeafInuse) / float64(s.LeafAlloc)
			t.Logf("bucket %s: %d keys, %d of %d leaf bytes in use (%.2f)", name, s.KeyN, s.LeafInuse, s.LeafAlloc, fill)
			if fill < 0.5 {
				t.Errorf("bucket %s: %.2f of its leaf pages in use, want at least 0.5", name, fill)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
