package crawler

import (
	"fmt"
	"testing"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/storage"
)

// writeSizes is a Frontier that records how many links and exclusions each of its writes holds.
type writeSizes struct {
	*frontier.Frontier
	writes []int
}

func (w *writeSizes) Add(es []frontier.Entry) (int, error) {
	w.writes = append(w.writes, len(es))
	return w.Frontier.Add(es)
}

func (w *writeSizes) Exclude(ex []frontier.Exclusion) error {
	w.writes = append(w.writes, len(ex))
	return w.Frontier.Exclude(ex)
}

func (w *writeSizes) Complete(l frontier.Lease, r frontier.Result) error {
	w.writes = append(w.writes, len(r.Links)+len(r.Excluded))
	return w.Frontier.Complete(l, r)
}

// hubResult leases the one URL of a frontier holding only http://hub.test/ and returns the
// lease with a fetched result linking links URLs on as many new hosts and excluding excluded
// others.
func hubResult(t *testing.T, fr *frontier.Frontier, links, excluded int) (frontier.Lease, frontier.Result) {
	t.Helper()
	const hub = "http://hub.test/"
	if _, err := fr.Add([]frontier.Entry{{URL: hub, Host: "hub.test"}}); err != nil {
		t.Fatal(err)
	}
	l, ok, err := fr.Lease(time.Now(), "hub.test")
	if err != nil || !ok {
		t.Fatalf("Lease: %v, %v", ok, err)
	}
	r := frontier.Result{Kind: frontier.Fetched, Page: &storage.Page{URL: hub, Status: 200, Body: []byte("<a href=...>")}}
	for i := range links {
		host := fmt.Sprintf("h%05d.test", i)
		r.Links = append(r.Links, frontier.Entry{URL: "http://" + host + "/", Host: host, Depth: 1, Parent: hub})
	}
	for i := range excluded {
		host := fmt.Sprintf("x%05d.test", i)
		r.Excluded = append(r.Excluded, frontier.Exclusion{Entry: frontier.Entry{URL: "http://" + host + "/", Host: host, Depth: 1, Parent: hub}, Reason: frontier.ReasonScope})
	}
	return l, r
}

func openTestFrontier(t *testing.T, dir string) (*storage.DB, *frontier.Frontier) {
	t.Helper()
	db, err := storage.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	fr, err := frontier.Open(db, nil)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	return db, fr
}

// TestBigResultCommitsInChunks: a page naming thousands of new hosts is committed in writes of
// at most resultChunk links and exclusions each, so that it never holds the store's one writer
// (which every other host's commit waits for) for all of them; everything it names is
// recorded, and the page with it.
func TestBigResultCommitsInChunks(t *testing.T) {
	db, fr := openTestFrontier(t, t.TempDir())
	defer db.Close()
	w := &writeSizes{Frontier: fr}
	c := &Crawler{opened: opened{fr: w}}
	l, r := hubResult(t, fr, 2500, 1700)
	if err := c.complete(l, r); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range w.writes {
		total += n
		if n > resultChunk {
			t.Errorf("a write held %d links and exclusions, want at most %d (writes %v)", n, resultChunk, w.writes)
		}
	}
	if total != 2500+1700 {
		t.Errorf("writes %v hold %d links and exclusions, want %d", w.writes, total, 2500+1700)
	}
	got := fr.Counts()
	if got.Fetched != 1 || got.Queued != 2500 || got.Excluded != 1700 {
		t.Errorf("counts fetched %d, queued %d, excluded %d; want 1, 2500, 1700", got.Fetched, got.Queued, got.Excluded)
	}
}

// TestBigResultStoppedBeforeItsPage: a crawl killed after some of a page's links were
// recorded ahead (addAhead) and before its Complete loses nothing: on reopening, the page's URL
// is queued again (so it is fetched again, its links found again and counted as seen) and the
// links recorded are queued.
func TestBigResultStoppedBeforeItsPage(t *testing.T) {
	dir := t.TempDir()
	db, fr := openTestFrontier(t, dir)
	c := &Crawler{opened: opened{fr: fr}}
	l, r := hubResult(t, fr, 2500, 0)
	left, err := c.addAhead(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Links) != 500 {
		t.Errorf("addAhead left %d links for Complete, want 500", len(left.Links))
	}
	_ = l // never completed: the process dies here
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, fr = openTestFrontier(t, dir)
	defer db.Close()
	if got := fr.Counts(); got.Queued != 1+2000 || got.Fetched != 0 {
		t.Errorf("after reopening: queued %d, fetched %d; want 2001 (the page's URL and the links recorded), 0", got.Queued, got.Fetched)
	}
	if _, ok, err := fr.Lease(time.Now(), "hub.test"); err != nil || !ok {
		t.Errorf("the page's URL cannot be leased again: %v, %v", ok, err)
	}
}
