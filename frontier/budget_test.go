package frontier

import (
	"fmt"
	"testing"

	"github.com/crawl-project/crawl/storage"
)

// newBudgetFrontier is newTestFrontier with Options.HostBudget set; reopening keeps the budget.
func newBudgetFrontier(t *testing.T, budget int) (*testFrontier, func()) {
	t.Helper()
	tf := &testFrontier{t: t, dir: t.TempDir()}
	open := func() {
		db, err := storage.Open(tf.dir, &storage.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		f, err := Open(db, &Options{HostBudget: budget})
		if err != nil {
			db.Close()
			t.Fatal(err)
		}
		tf.db, tf.Frontier = db, f
	}
	open()
	t.Cleanup(func() {
		tf.check()
		if err := tf.db.Close(); err != nil {
			t.Error(err)
		}
	})
	reopen := func() {
		tf.check()
		if err := tf.db.Close(); err != nil {
			t.Fatal(err)
		}
		open()
		tf.check()
	}
	return tf, reopen
}

// TestHostBudget: a host's queued + fetched + failed URLs never exceed the budget; URLs beyond it
// are recorded as excluded "limit" in the same transaction; an exclusion frees budget; the
// budget is counted from the store, so it holds across a restart; other hosts are unaffected.
func TestHostBudget(t *testing.T) {
	tf, reopen := newBudgetFrontier(t, 3)
	if n := tf.add("http://a/1", "http://a/2", "http://b/1", "http://a/3", "http://a/4", "http://a/5"); n != 4 {
		t.Fatalf("added %d, want 4 (a/1-3, b/1)", n)
	}
	for _, u := range []string{"http://a/4", "http://a/5"} {
		if s := tf.state(u); s.State != "excluded" || s.Reason != ReasonLimit || s.Detail == "" {
			t.Errorf("%s: %+v, want excluded limit with a detail", u, s)
		}
	}

	// A fetched page's links to its full host are excluded; its links elsewhere are queued.
	l := tf.lease(t0, "a")
	tf.complete(l, Result{Kind: Fetched, Page: page(l.URL), Links: entries("http://a/6", "http://b/2", "http://a/6")})
	if s := tf.state("http://a/6"); s.State != "excluded" || s.Reason != ReasonLimit {
		t.Errorf("a/6: %+v, want excluded limit", s)
	}
	if s := tf.state("http://b/2"); s.State != "queued" {
		t.Errorf("b/2: %+v, want queued", s)
	}

	// Failing a URL keeps its budget spent; excluding one (robots) gives it back.
	l = tf.lease(t0, "a")
	tf.complete(l, Result{Kind: Failed, Reason: "timeout"})
	l = tf.lease(t0, "a")
	tf.complete(l, Result{Kind: Fetched, Page: page(l.URL), Links: entries("http://a/7")})
	if s := tf.state("http://a/7"); s.State != "excluded" {
		t.Errorf("a/7: %+v, want excluded (3 of 3 spent)", s)
	}
	reopen()
	if n := tf.add("http://a/8"); n != 0 {
		t.Errorf("after reopen: added %d of a full host, want 0", n)
	}

	tf2, _ := newBudgetFrontier(t, 2)
	tf2.add("http://c/1", "http://c/2")
	l = tf2.lease(t0, "c")
	tf2.complete(l, Result{Kind: Excluded, Reason: ReasonRobots})
	if n := tf2.add("http://c/3", "http://c/4"); n != 1 {
		t.Errorf("after a robots exclusion freed one slot: added %d, want 1", n)
	}
	if got := tf2.Counts().ExcludedBy; got[ReasonLimit] != 1 || got[ReasonRobots] != 1 {
		t.Errorf("excluded by %v, want limit 1, robots 1", got)
	}
}

// TestHostBudgetRetryKeepsSlot: a URL waiting for a retry still holds its slot.
func TestHostBudgetRetryKeepsSlot(t *testing.T) {
	tf, _ := newBudgetFrontier(t, 1)
	tf.add("http://a/1")
	l := tf.lease(t0, "a")
	tf.complete(l, Result{Kind: Retry, NotBefore: t0.Add(1)})
	if n := tf.add("http://a/2"); n != 0 {
		t.Errorf("added %d while a/1 waits for a retry, want 0", n)
	}
}

// TestHostBudgetCountsPastRecords: a host over its budget has its over-budget URLs recorded as
// excluded only until it has max(HostBudget, OverBudgetRecords) exclusions; the rest are
// counted as dropped, in Add and in Complete alike, and the count survives a restart.
func TestHostBudgetCountsPastRecords(t *testing.T) {
	tf, reopen := newBudgetFrontier(t, 2)
	urls := func(from, n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("http://a/%d", from+i))
		}
		return out
	}
	tf.add(urls(0, OverBudgetRecords+2+300)...)
	c := tf.Counts()
	if c.Queued != 2 || c.Excluded != OverBudgetRecords || c.ExcludedBy[ReasonLimit] != OverBudgetRecords || c.Dropped != 300 {
		t.Fatalf("counts %+v; want 2 queued, %d excluded as limit, 300 dropped", c, OverBudgetRecords)
	}
	if _, seen, _ := tf.State(fmt.Sprintf("http://a/%d", OverBudgetRecords+2+299)); seen {
		t.Error("a dropped URL was recorded")
	}
	l := tf.lease(t0, "a")
	tf.complete(l, Result{Kind: Fetched, Page: page(l.URL), Links: entries(urls(5000, 50)...)})
	reopen()
	if c := tf.Counts(); c.Dropped != 350 || c.Excluded != OverBudgetRecords || c.Fetched != 1 {
		t.Errorf("after a page of 50 more links and a restart: %+v; want 350 dropped", c)
	}
}
