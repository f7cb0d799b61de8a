package fleet

import (
	"slices"
	"sync"

	"github.com/crawl-project/crawl/frontier"
)

// recentLinks is a worker's bounded memory of URLs it knows the crawl has recorded or is
// recording: links it added, URLs it leased, and the links of results being committed (filter
// claims them; a commit refused gives them back with forget). A link found in it is not sent
// again: its partition's seen-set would only refuse it. A link left out of a page because a result being
// committed carries it is not lost if that commit is refused: that result's URL stays in
// flight, so whoever gets it fetches the page again and sends its links. It is direct-mapped
// (one fingerprint per slot, a newer one evicts an older one), so it forgets, but never answers
// yes for a URL it was not given (fingerprints are the seen-set's own, exact to 64 bits). Safe
// for concurrent use.
//
// What it knows holds only while no Redis node restarts: a restarted node (or a promoted
// replica) may have lost the last writes it acknowledged. So filter keeps what it leaves out
// (unconfirmed) until the Frontier has read the nodes' run_ids unchanged since (confirm), or
// finds one changed and sends them again (takeAll); while unconfirmed is full, filter leaves
// nothing out.
type recentLinks struct {
	mu          sync.Mutex
	slots       []uint64 // 0: empty
	unconfirmed dropped  // left out since the last mark confirmed
}

// dropped are links and exclusions filter left out as known recorded.
type dropped struct {
	links    []frontier.Entry
	excluded []frontier.Exclusion
}

func (d dropped) len() int { return len(d.links) + len(d.excluded) }

// dropMark is how far unconfirmed reached at an instant (mark).
type dropMark struct{ links, excluded int }

// maxUnconfirmed bounds the links and exclusions left out and not yet confirmed.
const maxUnconfirmed = 1 << 16

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

// mark returns how far unconfirmed reaches now: the links left out so far.
func (r *recentLinks) mark() dropMark {
	r.mu.Lock()
	defer r.mu.Unlock()
	return dropMark{len(r.unconfirmed.links), len(r.unconfirmed.excluded)}
}

// confirm forgets the links left out before m (mark): Redis was found holding every write
// acknowledged before then.
func (r *recentLinks) confirm(m dropMark) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unconfirmed.links = slices.Delete(r.unconfirmed.links, 0, m.links)
	r.unconfirmed.excluded = slices.Delete(r.unconfirmed.excluded, 0, m.excluded)
}

// pending reports whether links left out wait for confirm.
func (r *recentLinks) pending() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unconfirmed.len() > 0
}

// takeAll empties the memory and returns every link left out and not confirmed: a Redis node
// restarted, so they may be lost and must be sent again.
func (r *recentLinks) takeAll() dropped {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.slots)
	d := r.unconfirmed
	r.unconfirmed = dropped{}
	return d
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
// being recorded, left out (and kept unconfirmed), and each only once; it claims those kept
// and returns their fingerprints (for forget, should res not be recorded).
func (r *recentLinks) filter(res frontier.Result) (frontier.Result, []uint64) {
	if len(res.Links) == 0 && len(res.Excluded) == 0 {
		return res, nil
	}
	fps := make([]uint64, 0, len(res.Links)+len(res.Excluded))
	seen := make(map[uint64]bool, cap(fps))
	// verdict: 0 keep, 1 a repeat in res, 2 known recorded
	verdict := func(url string) int {
		fp := Fingerprint(url)
		switch {
		case seen[fp]:
			return 1
		case fp != 0 && r.slots[r.slot(fp)] == fp && r.unconfirmed.len() < maxUnconfirmed:
			seen[fp] = true
			return 2
		}
		seen[fp] = true
		fps = append(fps, fp)
		return 0
	}
	r.mu.Lock()
	links := make([]frontier.Entry, 0, len(res.Links))
	for _, e := range res.Links {
		switch verdict(e.URL) {
		case 0:
			links = append(links, e)
		case 2:
			r.unconfirmed.links = append(r.unconfirmed.links, e)
		}
	}
	var ex []frontier.Exclusion
	for _, x := range res.Excluded {
		switch verdict(x.URL) {
		case 0:
			ex = append(ex, x)
		case 2:
			r.unconfirmed.excluded = append(r.unconfirmed.excluded, x)
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
