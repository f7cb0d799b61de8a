package crawler

import (
	"net/netip"
	"testing"

	"github.com/crawl-project/crawl/internal/dnstest"
	"github.com/crawl-project/crawl/internal/simweb"
)

// TestCrawlBroadWebThroughDNS crawls a broad web (one loopback listener, a name per host) from
// one seed, looking the names up with Config.DNSServer: the seed's address puts loopback in
// scope, links find every host, and each name is looked up once (an A and an AAAA query).
func TestCrawlBroadWebThroughDNS(t *testing.T) {
	t.Parallel()
	web, dns := startBroadWeb(t, simweb.Broad(30, 3, 0, 1), 1)
	cfg := testConfig(t, web)
	cfg.Seeds = web.Seeds()[:1]
	cfg.Scope = ScopeDomain
	cfg.DNSServer = dns.Addr()
	sum := runCrawl(t, cfg)
	if sum.StopReason != "done" {
		t.Errorf("stop %q, want done", sum.StopReason)
	}
	checkComplete(t, web, cfg.Dir, 0)
	for _, n := range web.Names() {
		if q := dns.Queries(n); q != 2 {
			t.Errorf("%s: %d queries, want 2 (one lookup, A and AAAA)", n, q)
		}
	}
}

// startBroadWeb serves specs (simweb.Broad) on one loopback listener by Host header, and a
// loopback DNS server that resolves the web's names to 127.0.0.1; both close with the test.
func startBroadWeb(t *testing.T, specs []simweb.HostSpec, seed int64) (*simweb.Web, *dnstest.Server) {
	t.Helper()
	web, err := simweb.Start(specs, &simweb.Options{Seed: seed, VirtualHosts: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { web.Close() })
	names := map[string]bool{}
	for _, n := range web.Names() {
		names[n] = true
	}
	dns, err := dnstest.Start(&dnstest.Options{Resolve: func(name string) []netip.Addr {
		if names[name] {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })
	return web, dns
}
