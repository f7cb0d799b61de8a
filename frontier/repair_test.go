package frontier

import (
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/crawl-project/crawl/storage"
	"go.etcd.io/bbolt"
)

// TestRepairAfterLoss damages a stopped frontier the way lost pages of a salvaged store do —
// records, queue and delayed entries and counters gone or wrong — and checks that Repair brings
// it back to passing Check with every readable queued URL leasable, and that a second Repair
// finds nothing to do.
func TestRepairAfterLoss(t *testing.T) {
	tf := newTestFrontier(t)
	tf.add("http://a/1", "http://a/2", "http://a/3", "http://a/4", "http://b/1", "http://b/2", "http://b/3")
	l := tf.lease(t0, "a") // a/1: fetched, the parent of a/5 and b/4
	links := entries("http://a/5", "http://b/4")
	for i := range links {
		links[i].Parent = l.URL
	}
	tf.complete(l, Result{Kind: Fetched, Page: page(l.URL), Links: links})
	l = tf.lease(t0, "a") // a/2: failed
	tf.complete(l, Result{Kind: Failed, Status: 404, Reason: "404"})
	l = tf.lease(t0, "b") // b/1: delayed for a retry
	tf.complete(l, Result{Kind: Retry, Status: 503, Reason: "503", NotBefore: t0.Add(time.Hour)})
	l = tf.lease(t0, "b") // b/2: excluded
	tf.complete(l, Result{Kind: Excluded, Reason: ReasonDepth})
	l = tf.lease(t0, "b") // b/3: fetched, and its page will be lost
	tf.complete(l, Result{Kind: Fetched, Page: page(l.URL)})
	key, db := reopenRaw(t, tf)
	f := &Frontier{key: key}
	fp := func(u string) []byte { return fpBytes(sum(key, u)) }
	if err := db.Update(func(tx *bbolt.Tx) error {
		tr := f.reader(tx)
		rec := func(u string) record {
			r, err := decodeRecord4(tr.urls.Get(fp(u)), tr.hostName)
			if err != nil {
				t.Fatalf("record of %s: %v", u, err)
			}
			return r
		}
		b1, a3, a4, b3 := rec("http://b/1"), rec("http://a/3"), rec("http://a/4"), rec("http://b/3")
		for _, err := range []error{
			tr.qDelete(a3.qkey),                                      // a/3 loses its queue entry
			tr.delayed.Delete(b1.qkey),                               // b/1 its delayed entry
			tr.urls.Delete(fp("http://a/1")),                         // the parent record is lost
			tr.urls.Put(fp("http://a/9"), []byte{4, 0xff, 0}),        // a record that cannot be read
			tr.qPut(idQueueKey(a4.hostID, 999), fpQueueValue(12345)), // an entry of no URL
			tx.Bucket(bucketCounts).Put([]byte(countFetched), counterBytes(999)),
			tx.Bucket(bucketHostIDs).Delete(hostIDKey(b1.hostID)), // host b's ID loses its name
			tx.Bucket([]byte("pages")).Delete(binary.BigEndian.AppendUint64(nil, b3.pageSeq)),
		} {
			if err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Sequences: the entry of no URL was put past its queue's sequence.
	repairOnce(t, db, nil, RepairStats{HostIDs: 1, Sequences: 1, Dropped: 1, Requeued: 2, Refetch: 1, ParentsLost: 2, QueuedLost: 1, Counters: true})

	tf.open()
	tf.check()
	c := tf.Counts()
	if c.Queued != 6 || c.Fetched != 0 || c.Failed != 1 || c.Excluded != 1 || c.Delayed != 0 {
		t.Errorf("Counts = %+v; want 6 queued (a/3, a/4, a/5, b/1, b/3, b/4), 1 failed, 1 excluded", c)
	}
	got := map[string]bool{}
	for _, h := range []string{"a", "b"} {
		for {
			l, ok, err := tf.Lease(t0, h)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			got[l.URL] = true
			if l.URL == "http://a/5" && l.Parent != "" {
				t.Errorf("a/5's parent is %q; its record was lost", l.Parent)
			}
			tf.complete(l, Result{Kind: Fetched, Page: page(l.URL)})
		}
	}
	for _, u := range []string{"http://a/3", "http://a/4", "http://a/5", "http://b/1", "http://b/3", "http://b/4"} {
		if !got[u] {
			t.Errorf("%s was not leased after the repair (leased: %v)", u, got)
		}
	}
}

// TestRepairRebuildsLostRecords loses the records of URLs in every state the store still names
// elsewhere — a fetched URL (its page), a queued link (its queue entry, named by its page's
// links), a delayed URL (its delayed entry) — and one queued seed nothing names, and checks that
// Repair records the named ones again, counts the other as lost, and that the crawl goes on.
func TestRepairRebuildsLostRecords(t *testing.T) {
	tf := newTestFrontier(t)
	tf.add("http://a/1", "http://a/2", "http://a/3", "http://b/1")
	l := tf.lease(t0, "a") // a/1: fetched, the parent of a/5 and a/6
	links := entries("http://a/5", "http://a/6")
	for i := range links {
		links[i].Parent, links[i].Depth = l.URL, 1
	}
	tf.complete(l, Result{Kind: Fetched, Page: page(l.URL), Links: links})
	l = tf.lease(t0, "b") // b/1: delayed for a retry
	tf.complete(l, Result{Kind: Retry, Status: 503, Reason: "503", NotBefore: t0.Add(time.Hour)})
	key, db := reopenRaw(t, tf)
	if err := db.Update(func(tx *bbolt.Tx) error {
		for _, u := range []string{"http://a/1", "http://a/3", "http://a/5", "http://b/1"} {
			if err := tx.Bucket(bucketURLs).Delete(fpBytes(sum(key, u))); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	opts := &RepairOptions{Host: hostOf, Links: func(p *storage.Page) []Entry {
		if p.URL == "http://a/1" {
			return links
		}
		return nil
	}}
	repairOnce(t, db, opts, RepairStats{Rebuilt: 2, Recorded: 1, QueuedLost: 1, Counters: true})

	tf.open()
	tf.check()
	if c := tf.Counts(); c.Queued != 4 || c.Delayed != 1 || c.Fetched != 1 {
		t.Errorf("Counts = %+v; want 4 queued (a/2, a/5, a/6, b/1) of which 1 delayed, 1 fetched (a/1)", c)
	}
	if s := tf.state("http://a/1"); s.State != "fetched" {
		t.Errorf("a/1 is %+v; want fetched, its page kept", s)
	}
	var got []string
	for {
		l, ok, err := tf.Lease(t0, "a")
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, l.URL)
		if l.URL == "http://a/5" && (l.Parent != "http://a/1" || l.Depth != 1) {
			t.Errorf("a/5 leased with parent %q depth %d; want http://a/1 and 1, as its page named it", l.Parent, l.Depth)
		}
		tf.complete(l, Result{Kind: Fetched, Page: page(l.URL)})
	}
	if want := []string{"http://a/2", "http://a/5", "http://a/6"}; !slices.Equal(got, want) {
		t.Errorf("leased %v after the repair; want %v (a/3 was lost with its record)", got, want)
	}
	l = tf.lease(t0.Add(2*time.Hour), "b")
	if l.URL != "http://b/1" {
		t.Errorf("leased %s from b; want the delayed http://b/1", l.URL)
	}
}

// repairOnce repairs db with opts, wants stats want, wants a second Repair to change nothing,
// and closes db.
func repairOnce(t *testing.T, db *storage.DB, opts *RepairOptions, want RepairStats) {
	t.Helper()
	st, err := Repair(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	if st != want {
		t.Errorf("Repair = %+v, want %+v", st, want)
	}
	if st, err := Repair(db, opts); err != nil || st.Changed() {
		t.Errorf("second Repair = %+v, %v; want nothing changed", st, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// reopenRaw checks tf, closes its frontier and opens its store bare, for a test to damage;
// it returns the frontier's fingerprint key and the store.
func reopenRaw(t *testing.T, tf *testFrontier) (fpKey, *storage.DB) {
	t.Helper()
	key, db := openBare(t, tf)
	// Repair's first step moves the appended records to bucketURLs, where the tests damage
	// them: take it now.
	if err := (&Frontier{db: db, bolt: db}).unappend(new(RepairStats)); err != nil {
		t.Fatal(err)
	}
	return key, db
}

// openBare checks tf, closes its frontier and opens its store bare; it returns the frontier's
// fingerprint key and the store.
func openBare(t *testing.T, tf *testFrontier) (fpKey, *storage.DB) {
	t.Helper()
	tf.check()
	key := tf.key
	if err := tf.db.Close(); err != nil {
		t.Fatal(err)
	}
	tf.db = nil
	db, err := storage.Open(tf.dir, &storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return key, db
}
