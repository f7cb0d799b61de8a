package export

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/storage"
)

// memStore is a Store in memory: pages in fetch order, Seq 1, 2, ...
type memStore struct {
	pages  []*storage.Page
	robots []*storage.Page
	err    error // returned by Pages after the pages
}

func (s *memStore) each(ps []*storage.Page, fn func(*storage.Page) error) error {
	for _, p := range ps {
		c := *p
		if err := fn(&c); err != nil {
			return err
		}
	}
	return s.err
}
func (s *memStore) Pages(fn func(*storage.Page) error) error     { return s.each(s.pages, fn) }
func (s *memStore) PagesMeta(fn func(*storage.Page) error) error { return s.each(s.pages, fn) }
func (s *memStore) RobotsFetches(fn func(*storage.Page) error) error {
	return s.each(s.robots, fn)
}
func (s *memStore) Page(seq uint64) (*storage.Page, error) {
	if seq == 0 || seq > uint64(len(s.pages)) {
		return nil, fmt.Errorf("no page %d", seq)
	}
	c := *s.pages[seq-1]
	return &c, nil
}
func (s *memStore) PageMeta(seq uint64) (*storage.Page, error) { return s.Page(seq) }

var mergeT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// store builds a memStore from "URL@SECONDS" specs; a spec "URL@S<N" is a revisit of page N.
func store(specs ...string) *memStore {
	s := &memStore{}
	for i, spec := range specs {
		u, at, _ := strings.Cut(spec, "@")
		var secs int
		var of uint64
		fmt.Sscanf(strings.Replace(at, "<", " ", 1), "%d %d", &secs, &of)
		s.pages = append(s.pages, &storage.Page{Seq: uint64(i + 1), URL: u, FetchedAt: mergeT0.Add(time.Duration(secs) * time.Second), RevisitOf: of})
	}
	return s
}

// list runs src and describes its pages as "URL@SECONDS#SEQ".
func list(t *testing.T, src Source) string {
	t.Helper()
	var out []string
	err := src(func(p *storage.Page) error {
		s := fmt.Sprintf("%s@%d#%d", p.URL, int(p.FetchedAt.Sub(mergeT0).Seconds()), p.Seq)
		if p.RevisitOf != 0 {
			s += fmt.Sprintf("<%d", p.RevisitOf)
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, " ")
}

func TestMerge(t *testing.T) {
	cases := []struct {
		name       string
		stores     []*memStore
		want       string
		superseded int64
	}{
		{"one store is itself", []*memStore{store("b@5", "a@3", "b@9<1")}, "b@5#1 a@3#2 b@9#3<1", 0},
		{"latest store wins, with its versions",
			[]*memStore{store("a@1", "b@2", "a@3<1"), store("b@4", "c@5", "a@2")},
			// a: latest in store 0 (t=3): both of its versions; b: store 1's; c: store 1's.
			"a@1#2 a@3#6<2 b@4#3 c@5#5", 2},
		{"tie: the store given first", []*memStore{store("x@7"), store("x@7"), store("y@1")}, "y@1#5 x@7#3", 1},
		{"each store's own order kept", []*memStore{store("p@5", "q@1"), store("r@3")}, "r@3#3 p@5#2 q@1#4", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ss := make([]Store, len(tc.stores))
			for i, s := range tc.stores {
				ss[i] = s
			}
			m, err := Merge(ss...)
			if err != nil {
				t.Fatal(err)
			}
			if got := list(t, m.Pages); got != tc.want || m.Superseded() != tc.superseded {
				t.Errorf("pages %q (%d superseded), want %q (%d)", got, m.Superseded(), tc.want, tc.superseded)
			}
			if got := list(t, m.PagesMeta); got != tc.want {
				t.Errorf("PagesMeta %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMergePageLookup(t *testing.T) {
	m, err := Merge(store("a@1"), store("b@2", "b@3<1"))
	if err != nil {
		t.Fatal(err)
	}
	// Page 2 of store 1 (of 2) is 2×2+1 = 5; it revisits page 1, now 3.
	p, err := m.PageMeta(5)
	if err != nil || p.URL != "b" || p.Seq != 5 || p.RevisitOf != 3 {
		t.Fatalf("PageMeta(5) = %+v, %v", p, err)
	}
	if o, err := m.Page(p.RevisitOf); err != nil || o.URL != "b" || !o.FetchedAt.Equal(mergeT0.Add(2*time.Second)) {
		t.Fatalf("Page(%d) = %+v, %v", p.RevisitOf, o, err)
	}
	if p, err := m.Page(2); err != nil || p.URL != "a" || p.Seq != 2 {
		t.Fatalf("Page(2) = %+v, %v", p, err)
	}
}

func TestMergeErrors(t *testing.T) {
	bad := store("z@9")
	bad.err = errors.New("disk on fire")
	m, err := Merge(store("a@1", "b@2"), store("c@3"))
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	n := 0
	err = m.Pages(func(*storage.Page) error {
		if n++; n == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 2 {
		t.Errorf("fn's error: %v after %d pages", err, n)
	}
	if _, err := Merge(store("a@1"), bad); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("a store's error while choosing: %v", err)
	}
}
