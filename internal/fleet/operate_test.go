package fleet

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/storage"
)

// An operator's handle (OpenExisting) opens only a crawl that exists, with its configuration;
// Queued lists the URLs waiting, delayed and in flight, and no longer those completed; Value
// and Count read the crawl-wide settings without writing.
func TestOperatorReads(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	rdb := newRedis(t)
	if _, err := OpenExisting(ctx, rdb, "t", "op"); !errors.Is(err, ErrNoCrawl) {
		t.Fatalf("OpenExisting before the crawl exists: %v, want ErrNoCrawl", err)
	}
	s := newStore(t, rdb, "a", &Options{Partitions: 4, LeaseTTL: time.Minute})
	o := queueAndOwn(t, s, "h", 5)
	var ls []Lease
	for range 3 {
		l, ok, _, err := s.Take(ctx, o, "h")
		if err != nil || !ok {
			t.Fatalf("take: %v %v", ok, err)
		}
		ls = append(ls, l)
	}
	if err := s.Complete(ctx, o, ls[0], frontier.Result{Kind: frontier.Retry, NotBefore: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, o, ls[1], frontier.Result{Kind: frontier.Fetched}); err != nil {
		t.Fatal(err)
	}
	op, err := OpenExisting(ctx, rdb, "t", "op")
	if err != nil || op.Partitions() != 4 {
		t.Fatalf("OpenExisting: %v, %d partitions; want the crawl's 4", err, op.Partitions())
	}
	got := map[QueueState][]string{}
	err = op.Queued(ctx, func(q QueuedURL) error {
		got[q.State] = append(got[q.State], q.URL)
		if q.Host != "h" || q.Parent != "http://seed/" || q.Partition != o.Partition {
			t.Errorf("queued %+v; want host h, its parent and partition %d", q, o.Partition)
		}
		if (q.State == QueueWaiting) != q.At.IsZero() {
			t.Errorf("%s %s: time %v; only delayed and in-flight URLs have one", q.State, q.URL, q.At)
		}
		return nil
	}, func(err error) { t.Errorf("unreadable: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	want := map[QueueState][]string{
		QueueWaiting:  {"http://h/3", "http://h/4"},
		QueueDelayed:  {ls[0].URL},
		QueueInFlight: {ls[2].URL},
	}
	for st, urls := range want {
		if !slices.Equal(got[st], urls) {
			t.Errorf("%s: %v, want %v", st, got[st], urls)
		}
	}
	if _, err := s.Settle(ctx, "scope-mode", "host"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Union(ctx, "scope-allowed", []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := op.Value(ctx, "scope-mode"); v != "host" || !ok || err != nil {
		t.Errorf("Value(scope-mode) = %q %v %v, want host", v, ok, err)
	}
	if _, ok, err := op.Value(ctx, "nothing"); ok || err != nil {
		t.Errorf("Value of an unset name: %v %v, want none", ok, err)
	}
	if n, err := op.Count(ctx, "scope-allowed"); n != 2 || err != nil {
		t.Errorf("Count(scope-allowed) = %d %v, want 2", n, err)
	}
}

// Frontier.Complete stores a fetched page in the worker's store it joined before it records
// the result; with no store joined, a page is refused, not dropped.
func TestFrontierStoresPages(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	s := newStore(t, rdb, "a", &Options{Partitions: 2, LeaseTTL: 2 * time.Second})
	f := NewFrontier(s.NewKeeper(), FrontierOptions{Refresh: 10 * time.Millisecond})
	runFrontier(t, f)
	if _, err := f.Add(entries("h", 1)); err != nil {
		t.Fatal(err)
	}
	l := leaseOne(t, f, "h")
	page := &storage.Page{URL: l.URL, Status: 200, Body: []byte("hello")}
	if err := f.Complete(l, frontier.Result{Kind: frontier.Fetched, Page: page}); err == nil {
		t.Fatal("a page completed with no store joined: nil error, want one")
	}
	db, err := storage.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f.Join(db, nil)
	if err := f.Complete(l, frontier.Result{Kind: frontier.Fetched, Page: page}); err != nil {
		t.Fatal(err)
	}
	stored, err := db.Page(page.Seq)
	if err != nil || stored.URL != l.URL || string(stored.Body) != "hello" {
		t.Errorf("stored page %+v (%v); want %s with its body", stored, err, l.URL)
	}
	if c, err := s.Counts(context.Background()); err != nil || c.Fetched != 1 || c.Queued != 0 {
		t.Errorf("counts %+v (%v); want the URL fetched", c, err)
	}
}
