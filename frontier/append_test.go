package frontier

import (
	"fmt"
	"testing"

	"go.etcd.io/bbolt"
)

// keysIn returns how many keys bucket name holds.
func keysIn(tf *testFrontier, name []byte) int {
	tf.t.Helper()
	n := 0
	if err := tf.db.Bolt().View(func(tx *bbolt.Tx) error {
		n = tx.Bucket(name).Stats().KeyN
		return nil
	}); err != nil {
		tf.t.Fatal(err)
	}
	return n
}

// TestLinksAppend completes pages with 35 new links each in a store of 20,000 queued URLs and
// counts the pages each commit writes: the new records are appended (bucketRecords) and the
// queue entries too, so a commit writes a few leaves whatever the size of the store, not one
// per new link as records spread over the key space would.
func TestLinksAppend(t *testing.T) {
	tf := newTestFrontier(t)
	for i := 0; i < 20_000; i += 5000 {
		es := make([]Entry, 5000)
		for j := range es {
			es[j] = entry(fmt.Sprintf("http://a/queued/%d", i+j))
		}
		if n, err := tf.Add(es); err != nil || n != len(es) {
			t.Fatalf("Add: %d, %v", n, err)
		}
	}
	for p := range 5 {
		l := tf.lease(t0, "a")
		links := make([]Entry, 35)
		for i := range links {
			links[i] = entry(fmt.Sprintf("http://a/new/%d/%d", p, i))
			links[i].Parent = l.URL
		}
		before := tf.db.Bolt().Stats().TxStats
		tf.complete(l, Result{Kind: Fetched, Page: page(l.URL), Links: links})
		after := tf.db.Bolt().Stats().TxStats
		// The page and its body, the fetched record, the new records, the queue entries, the
		// counters, and the branches above them; 35 spread records alone would be 35 leaves.
		if n := after.GetWrite() - before.GetWrite(); n > 20 {
			t.Errorf("page %d: its commit wrote %d pages, want at most 20", p, n)
		}
	}
	if n := keysIn(tf, bucketRecords); n != 20_000+5*35 {
		t.Errorf("%d appended records, want %d", n, 20_000+5*35)
	}
}

// TestRecordsPastTheBound fills the in-memory seen-set to its bound: the records it has room
// for are appended, the others kept in bucketURLs, and every URL is found, leased, completed
// and checked, before and after a reopen.
func TestRecordsPastTheBound(t *testing.T) {
	tf := &testFrontier{t: t, dir: t.TempDir(), opts: &Options{SeenInMemory: 6}}
	tf.open()
	t.Cleanup(func() { tf.check(); tf.db.Close() })
	for i := range 10 {
		if n := tf.add(fmt.Sprintf("http://a/%d", i)); n != 1 {
			t.Fatalf("add a/%d: %d", i, n)
		}
	}
	if a, u := keysIn(tf, bucketRecords), keysIn(tf, bucketURLs); a != 6 || u != 4 {
		t.Errorf("%d appended, %d by fingerprint; want 6 and 4", a, u)
	}
	for round := range 2 {
		for i := range 10 {
			if n := tf.add(fmt.Sprintf("http://a/%d", i)); n != 0 {
				t.Errorf("round %d: a/%d queued again", round, i)
			}
			if s := tf.state(fmt.Sprintf("http://a/%d", i)); s.State != "queued" && round == 0 {
				t.Errorf("a/%d: %s", i, s.State)
			}
		}
		tf.reopen()
	}
	for i := range 10 {
		l := tf.lease(t0, "a")
		if want := fmt.Sprintf("http://a/%d", i); l.URL != want {
			t.Fatalf("leased %s, want %s", l.URL, want)
		}
		tf.complete(l, Result{Kind: Fetched, Page: page(l.URL)})
	}
	tf.reopen()
	if c := tf.Counts(); c.Fetched != 10 || c.Queued != 0 {
		t.Errorf("Counts = %+v", c)
	}
}

// TestRepairMovesAppendedRecords repairs a store with appended records, one of them unreadable:
// the others are kept (moved under their fingerprints), the unreadable one dropped, and the
// frontier checks and crawls on.
func TestRepairMovesAppendedRecords(t *testing.T) {
	tf := newTestFrontier(t)
	tf.add("http://a/1", "http://a/2", "http://a/3")
	l := tf.lease(t0, "a")
	tf.complete(l, Result{Kind: Fetched, Page: page(l.URL), Links: []Entry{{URL: "http://a/4", Host: "a", Parent: l.URL, Depth: 1}}})
	_, db := openBare(t, tf)
	if err := db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketRecords).Put(recordKey(999), []byte{1, 2}) // not a record
	}); err != nil {
		t.Fatal(err)
	}
	st, err := Repair(db, nil)
	db.Close()
	if err != nil || st.Dropped != 1 {
		t.Fatalf("Repair = %+v, %v; want 1 dropped", st, err)
	}
	tf.open()
	tf.check()
	if n := keysIn(tf, bucketRecords); n != 0 {
		t.Errorf("%d appended records left", n)
	}
	if s := tf.state("http://a/4"); s.State != "queued" || s.Parent != "http://a/1" {
		t.Errorf("a/4: %+v", s)
	}
	for _, want := range []string{"http://a/2", "http://a/3", "http://a/4"} {
		l := tf.lease(t0, "a")
		if l.URL != want {
			t.Fatalf("leased %s, want %s", l.URL, want)
		}
		tf.complete(l, Result{Kind: Fetched, Page: page(l.URL)})
	}
	tf.add("http://a/5") // appended again
	if n := keysIn(tf, bucketRecords); n != 1 {
		t.Errorf("%d appended records after the repair, want 1", n)
	}
}

// TestOpensFormat3Store opens a store written before records were appended (testdata/README.md):
// its records stay in bucketURLs and are found there, its queues lease in order, and the links
// of a page fetched now are appended; all checks, before and after a reopen.
func TestOpensFormat3Store(t *testing.T) {
	tf := &testFrontier{t: t, dir: fixtureFile(t, "format3-store.db.gz", nil)}
	tf.open()
	t.Cleanup(func() { tf.check(); tf.db.Close() })
	tf.check()
	if a, u := keysIn(tf, bucketRecords), keysIn(tf, bucketURLs); a != 0 || u != 6 {
		t.Fatalf("%d appended, %d by fingerprint; want 0 and 6", a, u)
	}
	for url, want := range map[string]string{"http://a.example/": "fetched", "http://a.example/q1": "fetched",
		"http://a.example/q2": "queued", "http://a.example/retry": "queued", "http://a.example/fail": "failed",
		"https://b.example/": "queued"} {
		if s := tf.state(url); s.State != want {
			t.Errorf("%s: %s, want %s", url, s.State, want)
		}
	}
	l := tf.lease(t0, "a.example")
	if l.URL != "http://a.example/q2" || l.Parent != "http://a.example/" {
		t.Fatalf("leased %s (parent %s), want http://a.example/q2", l.URL, l.Parent)
	}
	tf.complete(l, Result{Kind: Fetched, Page: page(l.URL), Links: []Entry{
		{URL: "http://a.example/new", Host: "a.example", Depth: 2, Parent: l.URL},
		{URL: "http://a.example/q1", Host: "a.example", Depth: 2, Parent: l.URL}}})
	tf.reopen()
	if a, u := keysIn(tf, bucketRecords), keysIn(tf, bucketURLs); a != 1 || u != 6 {
		t.Errorf("%d appended, %d by fingerprint; want 1 and 6", a, u)
	}
	if s := tf.state("http://a.example/new"); s.State != "queued" || s.Parent != "http://a.example/q2" || s.Depth != 2 {
		t.Errorf("new link: %+v", s)
	}
	if l := tf.lease(t0, "a.example"); l.URL != "http://a.example/new" {
		t.Errorf("leased %s, want http://a.example/new", l.URL)
	}
	if c := tf.Counts(); c.Queued != 3 || c.Delayed != 1 || c.Fetched != 3 || c.Failed != 1 || c.InFlight != 1 {
		t.Errorf("Counts = %+v", c)
	}
}
