package frontier

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRevise: a failed and an excluded URL are queued again with no attempts, a queued and a
// delayed URL are excluded, a fetched URL given Keep stays fetched, counters follow (Check
// verifies them at cleanup), and work proceeds from the revised queue. Small chunks make it
// take several transactions.
func TestRevise(t *testing.T) {
	defer func(n int) { reviseChunk = n }(reviseChunk)
	reviseChunk = 2
	tf := newTestFrontier(t)
	tf.add("http://a/done", "http://a/fail", "http://a/retry", "http://a/keep", "http://a/drop")
	if err := tf.Exclude([]Exclusion{{Entry: Entry{URL: "http://a/deep", Host: "a", Depth: 3}, Reason: ReasonDepth}}); err != nil {
		t.Fatal(err)
	}
	tf.complete(tf.lease(t0, "a"), Result{Kind: Fetched, Page: page("http://a/done")})
	tf.complete(tf.lease(t0, "a"), Result{Kind: Failed, Reason: "connection", Detail: "refused"})
	tf.complete(tf.lease(t0, "a"), Result{Kind: Retry, NotBefore: t0.Add(time.Hour)})

	l := tf.lease(t0, "a")
	if _, err := tf.Revise(func(URLRecord) Verdict { return Verdict{} }); !errors.Is(err, ErrLeased) {
		t.Fatalf("Revise with a lease held: %v, want ErrLeased", err)
	}
	tf.Release(l)

	var seen []string
	got, err := tf.Revise(func(r URLRecord) Verdict {
		seen = append(seen, r.URL+" "+r.State)
		switch {
		case r.State == "failed", r.State == "excluded":
			return Verdict{Action: Requeue}
		case strings.HasSuffix(r.URL, "/drop"), strings.HasSuffix(r.URL, "/retry"):
			return Verdict{Action: Exclude, Reason: ReasonFilter, Detail: "--exclude drop"}
		}
		return Verdict{}
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(seen) // records are visited in the order of their fingerprints
	if want := "http://a/deep excluded|http://a/done fetched|http://a/drop queued|http://a/fail failed|http://a/keep queued|http://a/retry queued"; strings.Join(seen, "|") != want {
		t.Errorf("decide saw %q, want %q", strings.Join(seen, "|"), want)
	}
	if got.RequeuedFailed["connection"] != 1 || got.RequeuedExcluded[ReasonDepth] != 1 || got.Excluded[ReasonFilter] != 2 || got.Total() != 4 {
		t.Errorf("Revised = %+v", got)
	}
	if s := tf.state("http://a/fail"); s.State != "queued" || s.Attempts != 0 || s.Reason != "" {
		t.Errorf("failed URL after Revise: %+v", s)
	}
	if s := tf.state("http://a/retry"); s.State != "excluded" || s.Reason != ReasonFilter {
		t.Errorf("delayed URL after Revise: %+v", s)
	}
	cn := tf.Counts()
	if cn.Queued != 3 || cn.Delayed != 0 || cn.Failed != 0 || cn.Excluded != 2 || cn.Fetched != 1 || cn.ExcludedBy[ReasonDepth] != 0 {
		t.Errorf("counts after Revise: %+v", cn)
	}
	tf.reopen()
	var order []string
	for range 3 {
		l := tf.lease(t0, "a")
		order = append(order, l.URL)
		tf.complete(l, Result{Kind: Fetched, Page: page(l.URL)})
	}
	slices.Sort(order[1:]) // requeued in the order Revise visited them
	if want := "http://a/keep http://a/deep http://a/fail"; strings.Join(order, " ") != want {
		t.Errorf("leased %q after Revise, want %q", strings.Join(order, " "), want)
	}
}

// TestReviseRevisit: Revisit queues fetched URLs again keeping their page, which the lease
// names in Prev; other states ignore it; a revisit that is fetched again points at its new
// page. A long URL is visited like any other (its record holds it).
func TestReviseRevisit(t *testing.T) {
	tf := newTestFrontier(t)
	long := "http://a/" + strings.Repeat("x", 1500)
	tf.add("http://a/1", "http://a/2", long, "http://a/fail")
	seqs := map[string]uint64{}
	for range 3 {
		l := tf.lease(t0, "a")
		p := page(l.URL)
		tf.complete(l, Result{Kind: Fetched, Page: p})
		seqs[l.URL] = p.Seq
	}
	tf.complete(tf.lease(t0, "a"), Result{Kind: Failed, Reason: "connection"})
	var visited []string
	got, err := tf.Revise(func(r URLRecord) Verdict {
		visited = append(visited, r.URL)
		return Verdict{Action: Revisit}
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Revisited != 3 || got.Total() != 3 || len(visited) != 4 {
		t.Fatalf("Revised = %+v after visiting %d URLs; want the three fetched URLs revisited", got, len(visited))
	}
	if cn := tf.Counts(); cn.Queued != 3 || cn.Fetched != 0 || cn.Failed != 1 {
		t.Errorf("counts after Revisit: %+v", cn)
	}
	tf.reopen()
	for range 3 {
		l := tf.lease(t0, "a")
		u := l.URL
		if want, ok := seqs[u]; !ok || l.Prev != want || l.Attempts != 0 {
			t.Fatalf("lease of %.20s: Prev %d, attempts %d; want Prev %d", u, l.Prev, l.Attempts, want)
		}
		p := page(u)
		tf.complete(l, Result{Kind: Fetched, Page: p})
		if s := tf.state(u); s.State != "fetched" || s.PageSeq != p.Seq || p.Seq == seqs[u] {
			t.Errorf("%.20s after its revisit: %+v (new page %d)", u, s, p.Seq)
		}
		delete(seqs, u)
	}
	if l, ok, err := tf.Lease(t0, "a"); ok || err != nil {
		t.Errorf("a fourth lease: %+v %v", l, err)
	}
}

// TestReviseHostBudget: under a host budget, URLs excluded "limit" come back only as far as the
// budget allows, and a lowered budget excludes the host's queued URLs past it.
func TestReviseHostBudget(t *testing.T) {
	tf, _ := newBudgetFrontier(t, 2)
	tf.add("http://a/1", "http://a/2", "http://a/3", "http://a/4")
	requeue := func(r URLRecord) Verdict {
		if r.State == "excluded" {
			return Verdict{Action: Requeue}
		}
		return Verdict{}
	}
	if got, err := tf.Revise(requeue); err != nil || got.Total() != 0 {
		t.Fatalf("Revise at the budget: %+v, %v; want nothing requeued", got, err)
	}
	tf.budget = 3
	if got, err := tf.Revise(requeue); err != nil || got.RequeuedExcluded[ReasonLimit] != 1 {
		t.Fatalf("Revise with the budget raised to 3: %+v, %v; want one URL requeued", got, err)
	}
	tf.budget = 1
	got, err := tf.Revise(func(URLRecord) Verdict { return Verdict{} })
	if err != nil || got.Excluded[ReasonLimit] != 2 {
		t.Fatalf("Revise with the budget lowered to 1: %+v, %v; want 2 URLs excluded", got, err)
	}
	if cn := tf.Counts(); cn.Queued != 1 || cn.ExcludedBy[ReasonLimit] != 3 {
		t.Errorf("counts: %+v", cn)
	}
}

// TestWalk lists every URL once with its state.
func TestWalk(t *testing.T) {
	tf := newTestFrontier(t)
	long := "http://a/" + strings.Repeat("x", 1500)
	tf.add("http://a/1", long)
	var got []string
	if err := tf.Walk(func(r URLRecord) error { got = append(got, r.State+" "+r.URL[:10]); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Errorf("Walk visited %q", got)
	}
}
