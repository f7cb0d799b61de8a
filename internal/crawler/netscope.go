package crawler

import (
	"errors"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/crawl-project/crawl/internal/netguard"
)

// privateRangesName is the crawl-wide set of the non-public address blocks the seeds of a
// shared crawl are on (any worker's, and crawl add's).
const privateRangesName = "private-ranges"

// netScope is the address guard the client dials through. A crawl of one's own keeps the guard
// Open built. A shared crawl's guard widens: a worker may have read the crawl's blocks before
// another worker's seeds (or crawl add) put theirs in, so before it refuses a non-public
// address it reads the crawl's set again, and dials if the address's block is in it now. A
// refusal is then never this worker's lack of what the crawl knows: every worker puts its
// seeds' blocks in the set before its seeds (sharedGuard runs before addSeeds).
type netScope struct {
	cur    atomic.Pointer[netguard.Guard]
	shared SharedSettings // nil: the guard never widens

	mu    sync.Mutex // serializes widen
	known int        // members of the crawl's set cur holds; guarded by mu
}

// netScope returns the dial guard of the crawl, starting from g (which it must not change
// afterwards).
func (c *Crawler) netScope(g *netguard.Guard) *netScope {
	n := &netScope{shared: c.shared, known: -1}
	if c.shared == nil {
		n.shared = nil // a nil interface, not a typed nil
	}
	n.cur.Store(g)
	return n
}

// Control has the signature of net.Dialer.Control. It is safe for concurrent use.
func (n *netScope) Control(network, address string, rc syscall.RawConn) error {
	err := n.cur.Load().Control(network, address, rc)
	if err == nil || n.shared == nil || !errors.Is(err, netguard.ErrPrivateAddress) {
		return err
	}
	n.widen()
	return n.cur.Load().Control(network, address, rc) // widened by this call or another
}

// widen takes in the blocks the crawl's set holds beyond those of the guard. It asks Redis for the set's size (one SCARD) and reads the set only when
// the size is not the one last read. A failed read leaves the guard as it is.
func (n *netScope) widen() {
	n.mu.Lock()
	defer n.mu.Unlock()
	count, err := n.shared.Count(privateRangesName)
	if err != nil || count == n.known {
		return
	}
	all, err := n.shared.Union(privateRangesName, nil)
	if err != nil {
		return
	}
	n.known = len(all)
	old := n.cur.Load()
	g := *old
	g.Allowed = slices.Clone(old.Allowed)
	for _, s := range all {
		if p, err := netip.ParsePrefix(s); err == nil && !slices.Contains(g.Allowed, p) {
			g.Allowed = append(g.Allowed, p)
		}
	}
	if len(g.Allowed) > len(old.Allowed) {
		n.cur.Store(&g)
	}
}
