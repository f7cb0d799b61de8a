package frontier

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawl-project/crawl/storage"
	"go.etcd.io/bbolt"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// testFrontier is a Frontier in t.TempDir whose invariants are checked at the end of the test.
type testFrontier struct {
	*Frontier
	t    *testing.T
	dir  string
	db   *storage.DB
	opts *Options // given to Open
}

// newTestFrontier opens a frontier in a fresh directory; cleanup checks its invariants (Check)
// and closes the store.
func newTestFrontier(t *testing.T) *testFrontier {
	t.Helper()
	tf := &testFrontier{t: t, dir: t.TempDir()}
	tf.open()
	t.Cleanup(func() {
		if tf.db == nil {
			return
		}
		tf.check()
		if err := tf.db.Close(); err != nil {
			t.Error(err)
		}
	})
	return tf
}

func (tf *testFrontier) open() {
	tf.t.Helper()
	db, err := storage.Open(tf.dir, &storage.Options{NoSync: true})
	if err != nil {
		tf.t.Fatal(err)
	}
	f, err := Open(db, tf.opts)
	if err != nil {
		db.Close()
		tf.t.Fatal(err)
	}
	tf.db, tf.Frontier = db, f
}

// reopen closes the store without giving back any lease, as a crash would, and opens it again.
func (tf *testFrontier) reopen() {
	tf.t.Helper()
	tf.check()
	if err := tf.db.Close(); err != nil {
		tf.t.Fatal(err)
	}
	tf.open()
	tf.check()
}

func (tf *testFrontier) check() {
	tf.t.Helper()
	if err := tf.Check(); err != nil {
		tf.t.Fatal(err)
	}
}

func (tf *testFrontier) add(urls ...string) int {
	tf.t.Helper()
	n, err := tf.Add(entries(urls...))
	if err != nil {
		tf.t.Fatal(err)
	}
	return n
}

func (tf *testFrontier) lease(now time.Time, host string) Lease {
	tf.t.Helper()
	l, ok, err := tf.Lease(now, host)
	if err != nil || !ok {
		tf.t.Fatalf("Lease(%s) = %v, %v", host, ok, err)
	}
	return l
}

func (tf *testFrontier) noLease(now time.Time, host string) {
	tf.t.Helper()
	if l, ok, err := tf.Lease(now, host); ok || err != nil {
		tf.t.Fatalf("Lease(%s) = %s, %v, %v; want nothing", host, l.URL, ok, err)
	}
}

func (tf *testFrontier) complete(l Lease, r Result) {
	tf.t.Helper()
	if err := tf.Complete(l, r); err != nil {
		tf.t.Fatal(err)
	}
}

func (tf *testFrontier) state(url string) URLState {
	tf.t.Helper()
	s, ok, err := tf.State(url)
	if err != nil || !ok {
		tf.t.Fatalf("State(%s) = %v, %v", url, ok, err)
	}
	return s
}

func hostOf(url string) string {
	h := strings.TrimPrefix(url, "http://")
	if i := strings.IndexByte(h, '/'); i >= 0 {
		h = h[:i]
	}
	return h
}

func entry(url string) Entry { return Entry{URL: url, Host: hostOf(url)} }

func entries(urls ...string) []Entry {
	var es []Entry
	for _, u := range urls {
		es = append(es, entry(u))
	}
	return es
}

func page(url string) *storage.Page {
	return &storage.Page{URL: url, Status: 200, Body: []byte("<html>" + url + "</html>")}
}

func TestFIFOPerHost(t *testing.T) {
	tf := newTestFrontier(t)
	if n := tf.add("http://a/1", "http://b/1", "http://a/2", "http://b/2", "http://a/3"); n != 5 {
		t.Fatalf("added %d", n)
	}
	if got := tf.ReadyHosts(t0); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("ReadyHosts = %v", got)
	}
	var order []string
	var leases []Lease
	for range 3 {
		l := tf.lease(t0, "a")
		order = append(order, l.URL)
		leases = append(leases, l)
	}
	tf.noLease(t0, "a")
	if want := []string{"http://a/1", "http://a/2", "http://a/3"}; !slices.Equal(order, want) {
		t.Fatalf("lease order %v, want %v", order, want)
	}
	if got := tf.ReadyHosts(t0); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("ReadyHosts with a fully leased = %v", got)
	}
	if c := tf.Counts(); c.Queued != 5 || c.InFlight != 3 {
		t.Fatalf("Counts = %+v", c)
	}
	// Links go to the back of their host's queue, after what is already there.
	tf.complete(leases[1], Result{Kind: Fetched, Page: page(leases[1].URL),
		Links: []Entry{{URL: "http://a/4", Host: "a", Depth: 1, Parent: leases[1].URL}, entry("http://b/3")}})
	tf.Release(leases[0])
	tf.Release(leases[2])
	for _, want := range []string{"http://a/1", "http://a/3", "http://a/4"} {
		if l := tf.lease(t0, "a"); l.URL != want {
			t.Fatalf("after release: leased %s, want %s", l.URL, want)
		}
	}
	for _, want := range []string{"http://b/1", "http://b/2", "http://b/3"} {
		if l := tf.lease(t0, "b"); l.URL != want {
			t.Fatalf("host b: leased %s, want %s", l.URL, want)
		}
	}
	if s := tf.state("http://a/4"); s.Depth != 1 || s.Parent != "http://a/2" || s.State != "queued" {
		t.Errorf("link state %+v", s)
	}
}

func TestDedup(t *testing.T) {
	tests := []struct {
		name      string
		seeds     [][]string // successive Add calls
		wantAdded []int
		links     []string // links of the first seed, once fetched
		exclude   []string // excluded links of the first seed
		want      Counts
	}{
		{name: "duplicates in one Add", seeds: [][]string{{"http://a/1", "http://a/1", "http://a/2"}},
			wantAdded: []int{2}, want: Counts{Queued: 1, Fetched: 1}},
		{name: "repeated Add", seeds: [][]string{{"http://a/1"}, {"http://a/1", "http://b/1"}, {"http://b/1"}},
			wantAdded: []int{1, 1, 0}, want: Counts{Queued: 1, Fetched: 1}},
		{name: "links already seen", seeds: [][]string{{"http://a/1", "http://a/2"}},
			wantAdded: []int{2}, links: []string{"http://a/1", "http://a/2", "http://a/3", "http://a/3"},
			want: Counts{Queued: 2, Fetched: 1}},
		{name: "excluded and linked", seeds: [][]string{{"http://a/1"}},
			wantAdded: []int{1}, links: []string{"http://a/2"}, exclude: []string{"http://a/2", "http://a/1", "http://x/1", "http://x/1"},
			want: Counts{Queued: 1, Fetched: 1, Excluded: 1, ExcludedBy: map[string]int{"scope": 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tf := newTestFrontier(t)
			for i, s := range tt.seeds {
				if n := tf.add(s...); n != tt.wantAdded[i] {
					t.Errorf("Add #%d added %d, want %d", i, n, tt.wantAdded[i])
				}
			}
			l := tf.lease(t0, hostOf(tt.seeds[0][0]))
			var ex []Exclusion
			for _, u := range tt.exclude {
				ex = append(ex, Exclusion{Entry: entry(u), Reason: ReasonScope})
			}
			tf.complete(l, Result{Kind: Fetched, Page: page(l.URL), Links: entries(tt.links...), Excluded: ex})
			got := tf.Counts()
			if got.Queued != tt.want.Queued || got.Fetched != tt.want.Fetched || got.Excluded != tt.want.Excluded ||
				len(got.ExcludedBy) != len(tt.want.ExcludedBy) {
				t.Errorf("Counts = %+v, want %+v", got, tt.want)
			}
			if len(tt.exclude) > 0 && tf.state(tt.exclude[0]).State != "queued" {
				t.Error("a URL both linked and excluded must stay queued (linked first)")
			}
		})
	}
}

// TestExcludeThenAdd: an excluded URL is never queued later; a queued one is not excluded.
func TestExcludeThenAdd(t *testing.T) {
	tf := newTestFrontier(t)
	tf.add("http://a/1")
	err := tf.Exclude([]Exclusion{
		{Entry: entry("http://x/1"), Reason: ReasonScope, Detail: "x is not a seed host"},
		{Entry: entry("http://a/1"), Reason: ReasonScope},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := tf.add("http://x/1"); n != 0 {
		t.Errorf("excluded URL added again")
	}
	if s := tf.state("http://x/1"); s.State != "excluded" || s.Reason != "scope" || s.Detail != "x is not a seed host" {
		t.Errorf("State = %+v", s)
	}
	if s := tf.state("http://a/1"); s.State != "queued" {
		t.Errorf("State = %+v", s)
	}
	if err := tf.Exclude([]Exclusion{{Entry: Entry{URL: "mailto:x@a"}, Reason: ReasonScheme}}); err != nil {
		t.Fatalf("exclusion without host: %v", err)
	}
	if s := tf.state("mailto:x@a"); s.State != "excluded" || s.Reason != "scheme" {
		t.Errorf("State = %+v", s)
	}
	if c := tf.Counts(); c.Excluded != 2 || c.ExcludedBy["scheme"] != 1 || c.ExcludedBy["scope"] != 1 {
		t.Errorf("Counts = %+v", c)
	}
	if _, ok, _ := tf.State("http://never/"); ok {
		t.Error("State of an unknown URL found")
	}
}

func TestCompleteKinds(t *testing.T) {
	url := "http://a/x"
	tests := []struct {
		name      string
		result    Result
		wantState URLState
		wantCount Counts
		wantLast  string
	}{
		{"fetched", Result{Kind: Fetched, Page: page(url), Links: []Entry{{URL: "http://b/y", Host: "b", Depth: 1, Parent: url}}},
			URLState{State: "fetched", Status: 200, Attempts: 1, Host: "a", PageSeq: 1},
			Counts{Queued: 1, Fetched: 1}, ""},
		{"fetched without page", Result{Kind: Fetched, Status: 304},
			URLState{State: "fetched", Status: 304, Attempts: 1, Host: "a"},
			Counts{Fetched: 1}, ""},
		{"failed", Result{Kind: Failed, Status: 503, Reason: "http-status", Detail: "503 Service Unavailable"},
			URLState{State: "failed", Status: 503, Attempts: 1, Host: "a", Reason: "http-status", Detail: "503 Service Unavailable"},
			Counts{Failed: 1, FailedBy: map[string]int{"http-status": 1}}, "http-status: 503 Service Unavailable"},
		{"excluded", Result{Kind: Excluded, Reason: ReasonRobots, Detail: "Disallow: /x"},
			URLState{State: "excluded", Host: "a", Reason: "robots", Detail: "Disallow: /x"},
			Counts{Excluded: 1, ExcludedBy: map[string]int{"robots": 1}}, ""},
		{"retry", Result{Kind: Retry, Status: 429, Reason: "429", NotBefore: t0.Add(time.Minute)},
			URLState{State: "queued", Status: 429, Attempts: 1, Host: "a", Reason: "429"},
			Counts{Queued: 1, Delayed: 1}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tf := newTestFrontier(t)
			tf.add(url)
			tf.complete(tf.lease(t0, "a"), tt.result)
			if got := tf.state(url); got != tt.wantState {
				t.Errorf("State = %+v\nwant    %+v", got, tt.wantState)
			}
			got := tf.Counts()
			if got.Queued != tt.wantCount.Queued || got.Delayed != tt.wantCount.Delayed || got.Fetched != tt.wantCount.Fetched ||
				got.Failed != tt.wantCount.Failed || got.Excluded != tt.wantCount.Excluded || got.InFlight != 0 ||
				fmt.Sprint(got.FailedBy) != fmt.Sprint(nonNil(tt.wantCount.FailedBy)) ||
				fmt.Sprint(got.ExcludedBy) != fmt.Sprint(nonNil(tt.wantCount.ExcludedBy)) {
				t.Errorf("Counts = %+v\nwant     %+v", got, tt.wantCount)
			}
			hosts := tf.Hosts() // in no order
			i := slices.IndexFunc(hosts, func(h HostCount) bool { return h.Host == "a" })
			if i < 0 || hosts[i].LastError != tt.wantLast {
				t.Errorf("Hosts = %+v, want a with last error %q", hosts, tt.wantLast)
			}
			if tt.wantState.PageSeq != 0 {
				p, err := tf.db.Page(tt.wantState.PageSeq)
				if err != nil || p.URL != url || string(p.Body) != "<html>"+url+"</html>" {
					t.Errorf("stored page %+v, %v", p, err)
				}
				if tt.result.Page.Seq != tt.wantState.PageSeq {
					t.Errorf("Page.Seq = %d", tt.result.Page.Seq)
				}
			}
			if tt.wantState.State != "queued" && !tf.Idle() && tt.wantCount.Queued == 0 {
				t.Error("not Idle")
			}
		})
	}
}

func nonNil(m map[string]int) map[string]int {
	if m == nil {
		return map[string]int{}
	}
	return m
}

func TestRetryPersists(t *testing.T) {
	tf := newTestFrontier(t)
	tf.add("http://a/1", "http://a/2")
	l := tf.lease(t0, "a")
	later := t0.Add(90 * time.Second)
	tf.complete(l, Result{Kind: Retry, Reason: "503", NotBefore: later})
	if got := tf.NextAt(t0); !got.Equal(later) {
		t.Fatalf("NextAt = %v, want %v", got, later)
	}
	tf.reopen()
	if got := tf.NextAt(t0); !got.Equal(later) {
		t.Fatalf("after reopen: NextAt = %v, want %v", got, later)
	}
	if tf.Idle() {
		t.Fatal("Idle with a delayed URL")
	}
	// Before NotBefore only a/2 can be leased.
	if l := tf.lease(later.Add(-time.Nanosecond), "a"); l.URL != "http://a/2" {
		t.Fatalf("leased %s", l.URL)
	} else {
		tf.complete(l, Result{Kind: Fetched})
	}
	tf.noLease(later.Add(-time.Nanosecond), "a")
	if got := tf.ReadyHosts(later.Add(-time.Nanosecond)); len(got) != 0 {
		t.Fatalf("ReadyHosts before NotBefore = %v", got)
	}
	if got := tf.ReadyHosts(later); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("ReadyHosts at NotBefore = %v", got)
	}
	if !tf.NextAt(later).IsZero() {
		t.Fatal("NextAt not zero after promotion")
	}
	l = tf.lease(later, "a")
	if l.URL != "http://a/1" || l.Attempts != 1 {
		t.Fatalf("lease %+v", l)
	}
	tf.complete(l, Result{Kind: Retry, NotBefore: later.Add(time.Hour)})
	tf.reopen()
	l = tf.lease(later.Add(time.Hour), "a")
	if l.Attempts != 2 {
		t.Fatalf("attempts %d, want 2", l.Attempts)
	}
	tf.complete(l, Result{Kind: Failed, Reason: "gave-up"})
}

// TestCrashBeforeComplete: leases are in memory only; closing the store without Complete (a
// crash) leaves the URL queued, leasable again, with nothing lost.
func TestCrashBeforeComplete(t *testing.T) {
	tf := newTestFrontier(t)
	tf.add("http://a/1", "http://a/2", "http://b/1")
	l1 := tf.lease(t0, "a")
	tf.lease(t0, "b")
	tf.complete(tf.lease(t0, "a"), Result{Kind: Fetched, Page: page("http://a/2"), Links: entries("http://a/3")})
	before := tf.Counts()
	tf.reopen()
	after := tf.Counts()
	if after.InFlight != 0 || after.Queued != before.Queued || after.Fetched != 1 || after.Queued != 3 {
		t.Fatalf("before %+v, after %+v", before, after)
	}
	if l := tf.lease(t0, "a"); l.URL != l1.URL || l.Attempts != 0 {
		t.Fatalf("after crash leased %+v, want %s again", l, l1.URL)
	}
	if l := tf.lease(t0, "a"); l.URL != "http://a/3" {
		t.Fatalf("leased %s", l.URL)
	}
	if l := tf.lease(t0, "b"); l.URL != "http://b/1" {
		t.Fatalf("leased %s", l.URL)
	}
}

func TestErrors(t *testing.T) {
	tf := newTestFrontier(t)
	tf.add("http://a/1", "http://a/2")
	l := tf.lease(t0, "a")
	bad := []struct {
		name string
		err  error
	}{
		{"empty URL", func() error { _, err := tf.Add([]Entry{{Host: "a"}}); return err }()},
		{"empty host", func() error { _, err := tf.Add([]Entry{{URL: "http://a/"}}); return err }()},
		{"NUL in host", func() error { _, err := tf.Add([]Entry{{URL: "http://a/", Host: "a\x00b"}}); return err }()},
		{"negative depth", func() error { _, err := tf.Add([]Entry{{URL: "http://a/", Host: "a", Depth: -1}}); return err }()},
		{"exclusion without reason", tf.Exclude([]Exclusion{{Entry: entry("http://a/9")}})},
		{"kind zero", tf.Complete(l, Result{})},
		{"failed without reason", tf.Complete(l, Result{Kind: Failed})},
		{"excluded without reason", tf.Complete(l, Result{Kind: Excluded})},
		{"bad link", tf.Complete(l, Result{Kind: Fetched, Links: []Entry{{URL: "x"}}})},
	}
	for _, b := range bad {
		if !errors.Is(b.err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", b.name, b.err)
		}
	}
	tf.complete(l, Result{Kind: Fetched})
	if err := tf.Complete(l, Result{Kind: Fetched}); !errors.Is(err, ErrNotLeased) {
		t.Errorf("second Complete: %v", err)
	}
	l2 := tf.lease(t0, "a")
	tf.Release(l2)
	tf.Release(l2) // harmless
	if err := tf.Complete(l2, Result{Kind: Fetched}); !errors.Is(err, ErrNotLeased) {
		t.Errorf("Complete after Release: %v", err)
	}
	if c := tf.Counts(); c.Queued != 1 || c.Fetched != 1 || c.InFlight != 0 {
		t.Errorf("Counts = %+v", c)
	}
}

func TestLongURL(t *testing.T) {
	tf := newTestFrontier(t)
	long := "http://a/" + strings.Repeat("x", 40000)
	long2 := long + "y"
	if n := tf.add(long, long2, long); n != 2 {
		t.Fatalf("added %d", n)
	}
	l := tf.lease(t0, "a")
	if l.URL != long {
		t.Fatal("wrong URL")
	}
	tf.complete(l, Result{Kind: Excluded, Reason: ReasonTooLong, Detail: strings.Repeat("é", 1000)})
	s := tf.state(long)
	if s.State != "excluded" || len(s.Detail) > maxDetail || !strings.HasPrefix(s.Detail, "éé") || strings.ToValidUTF8(s.Detail, "?") != s.Detail {
		t.Errorf("State = %v, %d bytes of detail", s.State, len(s.Detail))
	}
	if tf.state(long2).State != "queued" {
		t.Error("second long URL not queued")
	}
}

func TestHostsOrder(t *testing.T) {
	tf := newTestFrontier(t)
	tf.add("http://a/1", "http://b/1", "http://b/2", "http://c/1")
	for _, h := range []string{"b", "b", "a"} {
		l := tf.lease(t0, h)
		tf.complete(l, Result{Kind: Fetched})
	}
	l := tf.lease(t0, "c")
	tf.complete(l, Result{Kind: Failed, Reason: "dns", Detail: "no such host"})
	got := tf.Hosts()
	slices.SortFunc(got, func(a, b HostCount) int { return strings.Compare(a.Host, b.Host) })
	want := []HostCount{{Host: "a", Fetched: 1}, {Host: "b", Fetched: 2}, {Host: "c", Failed: 1, LastError: "dns: no such host"}}
	if !slices.Equal(got, want) {
		t.Errorf("Hosts = %+v\nwant %+v", got, want)
	}
	if !tf.Idle() {
		t.Error("not Idle")
	}
}

// TestReadOnly: `crawl status` opens the store read-only and reads the counters.
func TestReadOnly(t *testing.T) {
	tf := newTestFrontier(t)
	tf.add("http://a/1", "http://a/2")
	tf.complete(tf.lease(t0, "a"), Result{Kind: Failed, Reason: "timeout"})
	tf.complete(tf.lease(t0, "a"), Result{Kind: Retry, NotBefore: t0.Add(time.Hour)})
	want := tf.Counts()
	if _, err := storage.Open(tf.dir, &storage.Options{ReadOnly: true, Timeout: 10 * time.Millisecond}); !errors.Is(err, storage.ErrLocked) {
		t.Fatalf("read-only Open while the crawl runs: %v, want ErrLocked", err)
	}
	if _, err := storage.Open(tf.dir, &storage.Options{Timeout: 10 * time.Millisecond}); !errors.Is(err, storage.ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	tf.db.Close()
	tf.db = nil
	db, err := storage.Open(tf.dir, &storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f, err := Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Counts(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("read-only Counts = %+v, want %+v", got, want)
	}
	if err := f.Check(); err != nil {
		t.Error(err)
	}
	if got := f.NextAt(t0.Add(2 * time.Hour)); !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("read-only NextAt = %v", got)
	}
	if _, err := f.Add(entries("http://z/")); err == nil {
		t.Error("Add on a read-only store succeeded")
	}
}

// TestPromoteChunks moves more delayed URLs than one promotion transaction takes.
func TestPromoteChunks(t *testing.T) {
	defer func(n int) { promoteChunk = n }(promoteChunk)
	promoteChunk = 3
	tf := newTestFrontier(t)
	var urls []string
	for i := range 10 {
		urls = append(urls, fmt.Sprintf("http://h%d/", i%2)+fmt.Sprint(i))
	}
	tf.add(urls...)
	for i := range 10 {
		l := tf.lease(t0, fmt.Sprintf("h%d", i%2))
		tf.complete(l, Result{Kind: Retry, NotBefore: t0.Add(time.Duration(10-i) * time.Second)})
	}
	if got := tf.NextAt(t0); !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("NextAt = %v", got)
	}
	if got := tf.ReadyHosts(t0.Add(5 * time.Second)); !slices.Equal(got, []string{"h0", "h1"}) {
		t.Fatalf("ReadyHosts = %v", got)
	}
	if c := tf.Counts(); c.Delayed != 5 {
		t.Fatalf("Delayed = %d, want 5", c.Delayed)
	}
	tf.check()
	// Promoted in NotBefore order: i = 9, 7, 5 for h1.
	for _, want := range []string{"http://h1/9", "http://h1/7", "http://h1/5"} {
		if l := tf.lease(t0.Add(5*time.Second), "h1"); l.URL != want {
			t.Fatalf("leased %s, want %s", l.URL, want)
		}
	}
	if got := tf.NextAt(t0.Add(5 * time.Second)); !got.Equal(t0.Add(6 * time.Second)) {
		t.Fatalf("NextAt = %v", got)
	}
}

// TestExactlyOneState runs random operations against a model and checks after each that every
// URL has exactly the state the model expects, and the invariants hold.
func TestExactlyOneState(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	tf := newTestFrontier(t)
	model := make(map[string]string)
	url := func() string { return fmt.Sprintf("http://h%d/%d", rng.IntN(4), rng.IntN(60)) }
	var leases []Lease
	now := t0
	for step := range 400 {
		now = now.Add(time.Duration(rng.IntN(3)) * time.Second)
		switch op := rng.IntN(10); {
		case op == 0:
			u := url()
			tf.add(u)
			if model[u] == "" {
				model[u] = "queued"
			}
		case op == 1:
			u := url()
			if err := tf.Exclude([]Exclusion{{Entry: entry(u), Reason: ReasonFilter}}); err != nil {
				t.Fatal(err)
			}
			if model[u] == "" {
				model[u] = "excluded"
			}
		case op <= 4:
			hosts := tf.ReadyHosts(now)
			if len(hosts) == 0 {
				continue
			}
			l, ok, err := tf.Lease(now, hosts[rng.IntN(len(hosts))])
			if err != nil || !ok {
				t.Fatalf("step %d: ready host, no lease: %v", step, err)
			}
			if model[l.URL] != "queued" {
				t.Fatalf("step %d: leased %s in state %q", step, l.URL, model[l.URL])
			}
			leases = append(leases, l)
		case op == 5 && len(leases) > 0:
			i := rng.IntN(len(leases))
			tf.Release(leases[i])
			leases = slices.Delete(leases, i, i+1)
		case op == 6 && rng.IntN(8) == 0:
			tf.reopen()
			leases = nil
		case len(leases) > 0:
			i := rng.IntN(len(leases))
			l := leases[i]
			leases = slices.Delete(leases, i, i+1)
			var r Result
			switch rng.IntN(4) {
			case 0:
				r = Result{Kind: Fetched, Page: page(l.URL)}
				for range rng.IntN(4) {
					r.Links = append(r.Links, entry(url()))
				}
				for range rng.IntN(2) {
					r.Excluded = append(r.Excluded, Exclusion{Entry: entry(url()), Reason: ReasonDepth})
				}
				model[l.URL] = "fetched"
				for _, e := range r.Links {
					if model[e.URL] == "" {
						model[e.URL] = "queued"
					}
				}
				for _, x := range r.Excluded {
					if model[x.URL] == "" {
						model[x.URL] = "excluded"
					}
				}
			case 1:
				r = Result{Kind: Failed, Reason: "timeout"}
				model[l.URL] = "failed"
			case 2:
				r = Result{Kind: Excluded, Reason: ReasonRobots}
				model[l.URL] = "excluded"
			case 3:
				r = Result{Kind: Retry, NotBefore: now.Add(time.Duration(rng.IntN(5)) * time.Second)}
			}
			tf.complete(l, r)
		}
		tf.check()
	}
	counts := map[string]int{}
	for u, want := range model {
		s := tf.state(u)
		if s.State != want {
			t.Errorf("%s: state %s, want %s", u, s.State, want)
		}
		counts[want]++
	}
	c := tf.Counts()
	if c.Queued != counts["queued"] || c.Fetched != counts["fetched"] || c.Failed != counts["failed"] || c.Excluded != counts["excluded"] {
		t.Errorf("Counts %+v, model %v", c, counts)
	}
	for _, l := range leases {
		tf.Release(l)
	}
}

// TestConcurrentComplete drains a frontier with many goroutines leasing and completing at once
// (run with -race): every URL ends fetched exactly once, and commits were shared.
func TestConcurrentComplete(t *testing.T) {
	tf := newTestFrontier(t)
	const hosts, perHost, workers = 8, 40, 16
	var seeds []string
	for h := range hosts {
		seeds = append(seeds, fmt.Sprintf("http://h%d/0", h))
	}
	tf.add(seeds...)
	var mu sync.Mutex
	fetched := make(map[string]int)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				hs := tf.ReadyHosts(t0)
				if len(hs) == 0 {
					if tf.Idle() {
						return
					}
					runtime.Gosched()
					continue
				}
				l, ok, err := tf.Lease(t0, hs[(w+i)%len(hs)])
				if err != nil {
					errs <- err
					return
				}
				if !ok {
					continue
				}
				var n int
				fmt.Sscanf(l.URL[strings.LastIndexByte(l.URL, '/')+1:], "%d", &n)
				var links []Entry
				if n+1 < perHost {
					links = append(links, Entry{URL: fmt.Sprintf("http://%s/%d", l.Host, n+1), Host: l.Host, Depth: l.Depth + 1})
				}
				if n+2 < perHost {
					links = append(links, Entry{URL: fmt.Sprintf("http://%s/%d", l.Host, n+2), Host: l.Host, Depth: l.Depth + 1})
				}
				if err := tf.Complete(l, Result{Kind: Fetched, Page: page(l.URL), Links: links}); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				fetched[l.URL]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(fetched) != hosts*perHost {
		t.Fatalf("fetched %d URLs, want %d", len(fetched), hosts*perHost)
	}
	for u, n := range fetched {
		if n != 1 {
			t.Errorf("%s fetched %d times", u, n)
		}
	}
	c := tf.Counts()
	if c.Fetched != hosts*perHost || c.Queued != 0 || c.InFlight != 0 {
		t.Errorf("Counts = %+v", c)
	}
	pages := 0
	tf.db.PagesMeta(func(p *storage.Page) error {
		if s := tf.state(p.URL); s.PageSeq != p.Seq {
			t.Errorf("%s: record says page %d, page is %d", p.URL, s.PageSeq, p.Seq)
		}
		pages++
		return nil
	})
	if pages != hosts*perHost {
		t.Errorf("%d pages stored", pages)
	}
}

// TestBatchRerun makes the store's Batch roll back and re-run a Complete transaction (another
// function in the same batch fails after it ran) and checks nothing is counted twice.
func TestBatchRerun(t *testing.T) {
	tf := newTestFrontier(t)
	b := tf.db.Bolt()
	defer func(size int, delay time.Duration) { b.MaxBatchSize, b.MaxBatchDelay = size, delay }(b.MaxBatchSize, b.MaxBatchDelay)
	b.MaxBatchSize, b.MaxBatchDelay = 2, time.Hour

	reruns := 0
	for i := 0; i < 20 && reruns < 3; i++ {
		u := fmt.Sprintf("http://a/%d", i)
		tf.add(u)
		l := tf.lease(t0, "a")
		tf.inflight.Add(1) // make Complete use Batch
		done := make(chan error, 1)
		go func() {
			done <- tf.Complete(l, Result{Kind: Fetched, Page: page(u), Links: entries(u + "/link")})
		}()
		for tf.inflight.Load() < 2 {
			runtime.Gosched()
		}
		rerun := false
		// Fails only if Complete's function ran before it in this transaction, forcing a re-run.
		tf.db.Batch(func(tx *bbolt.Tx) error {
			if tf.reader(tx).qGet([]byte(l.key)) == nil {
				rerun = true
				return errors.New("fail the batch")
			}
			return nil
		})
		err := <-done
		tf.inflight.Add(-1)
		if err != nil {
			t.Fatal(err)
		}
		if rerun {
			reruns++
		}
		if c := tf.Counts(); c.Fetched != i+1 || c.Queued != 1 || c.Excluded != i {
			t.Fatalf("Counts = %+v", c)
		}
		tf.check()
		l2 := tf.lease(t0, "a") // the link
		tf.complete(l2, Result{Kind: Excluded, Reason: ReasonDepth})
	}
	if reruns == 0 {
		t.Fatal("never got Batch to re-run Complete")
	}
	t.Logf("%d re-runs", reruns)
}

func TestTakeReady(t *testing.T) {
	// TakeReady reports each host once per time it becomes ready, so a dispatcher
	// never scans every ready host: new hosts, a host whose last URL was leased and that gets
	// another, and a host whose delayed URL comes due.
	tf := newTestFrontier(t)
	tf.add("http://b/1", "http://a/1", "http://a/2")
	if got := tf.TakeReady(t0); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"a", "b"}) {
		t.Fatalf("first TakeReady = %v, want a and b (ready in one commit, in either order)", got)
	}
	if got := tf.TakeReady(t0); len(got) != 0 {
		t.Fatalf("TakeReady with nothing new = %v", got)
	}
	lb := tf.lease(t0, "b")
	if tf.Ready("b") || !tf.Ready("a") {
		t.Fatalf("Ready(b) %v Ready(a) %v after leasing b's only URL", tf.Ready("b"), tf.Ready("a"))
	}
	tf.add("http://b/2") // b ready again
	tf.lease(t0, "a")    // a still ready: nothing new
	if got := tf.TakeReady(t0); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("TakeReady = %v, want [b]", got)
	}
	lb2 := tf.lease(t0, "b")
	later := t0.Add(time.Minute)
	tf.complete(lb, Result{Kind: Retry, Reason: "503", NotBefore: later})
	tf.complete(lb2, Result{Kind: Fetched, Status: 200, Page: page(lb2.URL)})
	if got := tf.TakeReady(later.Add(-time.Nanosecond)); len(got) != 0 {
		t.Fatalf("TakeReady before the retry is due = %v", got)
	}
	if got := tf.TakeReady(later); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("TakeReady when the retry is due = %v, want [b]", got)
	}
}
