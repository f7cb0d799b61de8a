package export

import (
	"errors"
	"hash/fnv"
	"iter"

	"github.com/crawl-project/crawl/storage"
)

// Store is one crawl store as an export reads it; *storage.DB is one.
type Store interface {
	Pages(fn func(p *storage.Page) error) error
	PagesMeta(fn func(p *storage.Page) error) error
	Page(seq uint64) (*storage.Page, error)
	PageMeta(seq uint64) (*storage.Page, error)
	RobotsFetches(fn func(p *storage.Page) error) error
}

// Stores reads several crawl stores (the workers' stores of a crawl shared by a fleet) as one
// Store, so that every writer works on it unchanged:
//
//   - Each URL is written from one store only: the store holding its latest fetch (by
//     storage.Page.FetchedAt; on a tie the store given first). That store's versions of the
//     URL are all kept, as a single store's are, so a revisit record still finds the page it
//     refers to; other stores' fetches of the URL are left out (Superseded). Robots.txt
//     fetches follow the same rule among themselves, and so do the sub-resources of
//     rendered pages (storage.Page.Subresource): a URL fetched as a page and as a
//     sub-resource is two things, neither superseding the other.
//   - Pages come in one stream merged by fetch time, each store's pages in their own order.
//   - Sequence numbers are renumbered so that they stay unique: page s of store i (of n)
//     becomes s×n+i, in Seq, RevisitOf and SameAs alike, and Page and PageMeta take the new
//     numbers.
//
// Over one store, every method is that store's own: the export is exactly a single store's.
// The choice of store per URL is made by Merge, which reads every store's metadata once and
// keeps 16 bytes of hash per URL (plus the map's overhead). A Stores is used by one goroutine.
type Stores struct {
	stores     []Store
	pages      map[urlKey]winner // the store of each page URL's latest fetch (several stores)
	robots     map[urlKey]winner // the same for robots.txt URLs
	superseded int64
}

// urlKey is a 128-bit hash of a URL (FNV-1a): a collision, about n²/2^129 for n URLs, would
// take two URLs for one.
type urlKey [16]byte

func keyOf(url string) urlKey {
	h := fnv.New128a()
	h.Write([]byte(url))
	var k urlKey
	h.Sum(k[:0])
	return k
}

// fetchKey is the key of what p fetched: its URL as a page, or as a sub-resource of a rendered
// page apart, so that the one never stands for or supersedes the other.
func fetchKey(p *storage.Page) urlKey {
	if p.Subresource {
		return keyOf("\x00subresource\x00" + p.URL)
	}
	return keyOf(p.URL)
}

// winner is the store holding a URL's latest fetch, and that fetch's time.
type winner struct {
	at    int64 // FetchedAt, Unix nanoseconds
	store int
}

// Merge returns stores read as one (see Stores). With several stores it first reads their
// pages' metadata and robots.txt fetches to find, for each URL, the store of its latest fetch.
func Merge(stores ...Store) (*Stores, error) {
	m := &Stores{stores: stores}
	if len(stores) < 2 {
		return m, nil
	}
	var err error
	if m.pages, err = latestStores(stores, func(s Store) Source { return s.PagesMeta }); err != nil {
		return nil, err
	}
	if m.robots, err = latestStores(stores, func(s Store) Source { return s.RobotsFetches }); err != nil {
		return nil, err
	}
	return m, nil
}

// latestStores maps each URL of the stores' sources to the store of its latest fetch, the
// first store given on a tie.
func latestStores(stores []Store, src func(Store) Source) (map[urlKey]winner, error) {
	won := map[urlKey]winner{}
	for i, s := range stores {
		err := src(s)(func(p *storage.Page) error {
			k, at := fetchKey(p), p.FetchedAt.UnixNano()
			if w, ok := won[k]; !ok || at > w.at || w.store == i && at == w.at {
				won[k] = winner{at: at, store: i}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return won, nil
}

// Superseded counts the pages (robots.txt fetches not included) that the last Pages or
// PagesMeta call left out because another store fetched their URL later.
func (m *Stores) Superseded() int64 { return m.superseded }

// Pages calls fn for every page to export, bodies included, merged by fetch time.
func (m *Stores) Pages(fn func(p *storage.Page) error) error {
	return m.merge(func(s Store) Source { return s.Pages }, m.pages, true, fn)
}

// PagesMeta is Pages without the bodies.
func (m *Stores) PagesMeta(fn func(p *storage.Page) error) error {
	return m.merge(func(s Store) Source { return s.PagesMeta }, m.pages, true, fn)
}

// RobotsFetches calls fn for every robots.txt fetch to export, merged by fetch time.
func (m *Stores) RobotsFetches(fn func(p *storage.Page) error) error {
	return m.merge(func(s Store) Source { return s.RobotsFetches }, m.robots, false, fn)
}

// Page returns the page numbered seq (as Pages numbers them), body included.
func (m *Stores) Page(seq uint64) (*storage.Page, error) {
	return m.page(seq, Store.Page)
}

// PageMeta is Page without the body.
func (m *Stores) PageMeta(seq uint64) (*storage.Page, error) {
	return m.page(seq, Store.PageMeta)
}

func (m *Stores) page(seq uint64, get func(Store, uint64) (*storage.Page, error)) (*storage.Page, error) {
	n := uint64(len(m.stores))
	if n == 1 {
		return get(m.stores[0], seq)
	}
	i := int(seq % n)
	p, err := get(m.stores[i], seq/n)
	if err != nil {
		return nil, err
	}
	m.renumber(p, i)
	return p, nil
}

// renumber gives p, a page of store i, the sequence numbers of the merged stream.
func (m *Stores) renumber(p *storage.Page, i int) {
	n, add := uint64(len(m.stores)), uint64(i)
	p.Seq = p.Seq*n + add
	if p.RevisitOf != 0 {
		p.RevisitOf = p.RevisitOf*n + add
	}
	if p.SameAs != 0 {
		p.SameAs = p.SameAs*n + add
	}
}

// errPullStopped ends a store's iteration when the merge stops early.
var errPullStopped = errors.New("export: merge stopped")

// pull turns a Source into an iterator of its pages (and, last, its error).
func pull(src Source) iter.Seq2[*storage.Page, error] {
	return func(yield func(*storage.Page, error) bool) {
		err := src(func(p *storage.Page) error {
			if !yield(p, nil) {
				return errPullStopped
			}
			return nil
		})
		if err != nil && !errors.Is(err, errPullStopped) {
			yield(nil, err)
		}
	}
}

// merge calls fn for the pages of every store's source, merged by fetch time (the earliest
// head next; on a tie the store given first), each store's in their own order, leaving out a
// page whose URL's latest fetch is in another store (won). pages says whether the
// left-out ones count as Superseded.
func (m *Stores) merge(src func(Store) Source, won map[urlKey]winner, pages bool, fn func(p *storage.Page) error) error {
	if len(m.stores) == 1 {
		return src(m.stores[0])(fn)
	}
	if pages {
		m.superseded = 0
	}
	type head struct {
		next func() (*storage.Page, error, bool)
		p    *storage.Page // nil: the store is done
	}
	heads := make([]head, len(m.stores))
	advance := func(i int) error {
		p, err, ok := heads[i].next()
		if !ok {
			p = nil
		}
		heads[i].p = p
		return err
	}
	for i, s := range m.stores {
		next, stop := iter.Pull2(pull(src(s)))
		defer stop()
		heads[i].next = next
		if err := advance(i); err != nil {
			return err
		}
	}
	for {
		best := -1
		for i, h := range heads {
			if h.p != nil && (best < 0 || h.p.FetchedAt.Before(heads[best].p.FetchedAt)) {
				best = i
			}
		}
		if best < 0 {
			return nil
		}
		p := heads[best].p
		if err := advance(best); err != nil {
			return err
		}
		if won[fetchKey(p)].store != best {
			if pages {
				m.superseded++
			}
			continue
		}
		m.renumber(p, best)
		if err := fn(p); err != nil {
			return err
		}
	}
}
