package crawler

import (
	"context"
	"net/netip"
	"sync"
	"time"

	"github.com/crawl-project/crawl/internal/urlnorm"
)

// gateKeys maps a host (urlnorm.HostKey: host[:port]) to the key of its gate in the host
// registry. By default the key is the host itself. With Config.KeyByIP (--key-by-ip) it is the
// address the host's name resolves to (the port kept if the host key has one), so that names
// one server answers for share one gate: one rate, one window, one back-off. That is what a
// server that limits by client address across its virtual hosts sees (nginx limit_req keyed
// by $binary_remote_addr, HAProxy tracking src). robots.txt, the frontier's queues, the retry
// budgets and the reading of 403s stay per host name.
//
// The dispatcher never waits for DNS: key starts a lookup in the background and reports the
// host not ready until the lookup has ended. A name that does not resolve is keyed by itself
// (its fetches report the failure). Each name is looked up once per run; of several addresses
// the first IPv4 one in address order is taken (else the first), so that every name of a
// server picks the same.
//
// gateKeys is safe for concurrent use. A nil *gateKeys keys every host by its name.
type gateKeys struct {
	byIP   bool
	lookup func(ctx context.Context, name string) ([]netip.Addr, error)

	mu      sync.Mutex
	keys    map[string]string // host → gate key, once known
	pending map[string]bool   // hosts whose lookup is under way
}

// lookupTimeout bounds one DNS lookup for a gate key.
const lookupTimeout = 10 * time.Second

// newGateKeys returns the gate keys of a crawl; lookup resolves names (the crawl's
// fetch.Resolver) and is used only with byIP.
func newGateKeys(byIP bool, lookup func(ctx context.Context, name string) ([]netip.Addr, error)) *gateKeys {
	return &gateKeys{
		byIP:    byIP,
		lookup:  lookup,
		keys:    map[string]string{},
		pending: map[string]bool{},
	}
}

// key returns host's gate key, or ok false while its lookup is under way (started by this
// call if need be). It never blocks on the network.
func (g *gateKeys) key(host string) (key string, ok bool) {
	if g == nil || !g.byIP {
		return host, true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if k, ok := g.cached(host); ok {
		return k, true
	}
	if !g.pending[host] {
		g.pending[host] = true
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
			defer cancel()
			g.settle(host, g.lookupKey(ctx, host))
		}()
	}
	return "", false
}

// keyNow returns host's gate key, looking it up and waiting for the answer if need be (for
// callers that may block: a fetch following a robots.txt redirect to another host).
func (g *gateKeys) keyNow(ctx context.Context, host string) string {
	if g == nil || !g.byIP {
		return host
	}
	g.mu.Lock()
	k, ok := g.cached(host)
	g.mu.Unlock()
	if ok {
		return k
	}
	return g.settle(host, g.lookupKey(ctx, host))
}

// known returns host's gate key if it is known, else host (for reading figures).
func (g *gateKeys) known(host string) string {
	if g == nil || !g.byIP {
		return host
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if k, ok := g.keys[host]; ok {
		return k
	}
	return host
}

// cached returns host's key if it is known or needs no lookup (an IP literal). cached
// requires g.mu to be held.
func (g *gateKeys) cached(host string) (string, bool) {
	if k, ok := g.keys[host]; ok {
		return k, true
	}
	name, _ := urlnorm.SplitHostKey(host)
	if a, err := netip.ParseAddr(name); err == nil {
		g.keys[host] = urlnorm.AddrKey(host, []netip.Addr{a})
		return g.keys[host], true
	}
	return "", false
}

// settle records k as host's key unless one is known already (the first answer holds for the
// whole run) and returns the key that holds.
func (g *gateKeys) settle(host, k string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.pending, host)
	if known, ok := g.keys[host]; ok {
		return known
	}
	g.keys[host] = k
	return k
}

// lookupKey resolves host's name and returns its gate key: the chosen address with host's
// port (urlnorm.AddrKey), or host itself when the name does not resolve.
func (g *gateKeys) lookupKey(ctx context.Context, host string) string {
	name, _ := urlnorm.SplitHostKey(host)
	addrs, err := g.lookup(ctx, name)
	if err != nil {
		return host
	}
	return urlnorm.AddrKey(host, addrs)
}
