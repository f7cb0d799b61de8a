package fleet

import (
	"sync"

	"github.com/crawl-project/crawl/frontier"
)

// recentLinks is a worker's bounded memory of URLs it knows the crawl has recorded or is
// recording: links it added, URLs it leased, and the links of results being committed (filter
// claims them; a commit refused gives them back with forget). A link found in it is not sent
// again: Redis' seen-set would only refuse it. A link left out of a page because a result being
// committed carries it is not lost if that commit is refused: that result's URL stays in
// flight, so whoever gets it fetches the page again and sends its links. It is direct-mapped
// (one fingerprint per slot, a newer one evicts an older one), so it forgets, but never answers
// yes for a URL it was not given (fingerprints are the seen-set's own, exact to 64 bits). Safe
// for concurrent use.
type recentLinks struct {
	mu    sync.Mutex
	slots []uint64 // 0: empty
}

// defaultRecentLinks is the number of fingerprints a worker remembers (8 bytes each).
const defaultRecentLinks = 1 << 18

func newRecentLinks(n int) *recentLinks {
	if n <= 0 {
		n = defaultRecentLinks
	}
	return &recentLinks{slots: make([]uint64, n)}
}

func (r *recentLinks) slot(fp uint64) int { return int(fp % uint64(len(r.slots))) }

// remember records the fingerprints fps.
func (r *recentLinks) remember(fps []uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, fp := range fps {
		if fp != 0 {
			r.slots[r.slot(fp)] = fp
		}
	}
}

// reset empties the memory: after an outage, Redis may have restarted without its last
// writes, and a URL remembered as recorded may be one of them.
func (r *recentLinks) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.slots)
}

// forget gives back the fingerprints fps claimed by filter (their result was not recorded);
// a slot a newer fingerprint took keeps it.
func (r *recentLinks) forget(fps []uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, fp := range fps {
		if i := r.slot(fp); r.slots[i] == fp {
			r.slots[i] = 0
		}
	}
}

// filter returns res with the links and exclusions the worker knows were recorded, or are
// being recorded, left out, and each only once; it claims those kept and returns their
// fingerprints (for forget, should res not be recorded).
func (r *recentLinks) filter(res frontier.Result) (frontier.Result, []uint64) {
	if len(res.Links) == 0 && len(res.Excluded) == 0 {
		return res, nil
	}
	fps := make([]uint64, 0, len(res.Links)+len(res.Excluded))
	kept := make(map[uint64]bool, cap(fps))
	keep := func(url string) bool {
		fp := Fingerprint(url)
		if kept[fp] || fp != 0 && r.slots[r.slot(fp)] == fp {
			return false
		}
		kept[fp] = true
		fps = append(fps, fp)
		return true
	}
	r.mu.Lock()
	links := make([]frontier.Entry, 0, len(res.Links))
	for _, e := range res.Links {
		if keep(e.URL) {
			links = append(links, e)
		}
	}
	var ex []frontier.Exclusion
	for _, x := range res.Excluded {
		if keep(x.URL) {
			ex = append(ex, x)
		}
	}
	for _, fp := range fps {
		if fp != 0 {
			r.slots[r.slot(fp)] = fp
		}
	}
	r.mu.Unlock()
	res.Links, res.Excluded = links, ex
	return res, fps
}
