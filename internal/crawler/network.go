package crawler

import (
	"crypto/tls"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"

	"github.com/crawl-project/crawl/internal/netguard"
	"github.com/crawl-project/crawl/internal/urlnorm"
)

// Network is how the crawl's requests reach the hosts: proxy, TLS, extra headers and
// credentials. It belongs to one run: it is never stored (Settings are), and credentials never
// reach the store, the logs or the status (fetch leaves them out of the recorded request).
type Network struct {
	// Proxy chooses a request's proxy (nil: none). Politeness stays keyed by the destination
	// host: the gates, robots.txt and queues never see the proxy.
	Proxy func(*http.Request) (*url.URL, error)
	// Proxies are the proxies Proxy may choose, as host:port (port given): the address guard
	// lets the crawl dial exactly these addresses and ports even on a private network, and
	// nothing else of their blocks (a link to another port of a loopback proxy stays refused).
	Proxies []string
	TLS     *tls.Config // nil: the system's roots
	Header  http.Header // added to every request
	// HostHeader holds headers by host key, added to the requests to that host only.
	HostHeader map[string]http.Header
	// BasicAuth holds credentials by origin (urlnorm.Origin: scheme://host:port), sent to
	// that origin only: never down from https to http, nor to another port. A seed URL's
	// user:password@ is moved here (and out of the URL) when the crawl opens.
	BasicAuth map[string]*url.Userinfo
	Jar       http.CookieJar // cookies sent (and kept) per host; nil: none
}

// takeUser moves a URL's userinfo into auth under its origin, so that the URL, stored,
// logged and exported, never carries credentials.
func takeUser(u *url.URL, auth map[string]*url.Userinfo) {
	if u.User == nil {
		return
	}
	if _, given := auth[urlnorm.Origin(u)]; !given && u.User.Username() != "" {
		auth[urlnorm.Origin(u)] = u.User
	}
	u.User = nil
}

// allowProxies lets g dial the proxies' address:port pairs, for this run only.
func (c *Crawler) allowProxies(g *netguard.Guard) error {
	for _, p := range c.cfg.Net.Proxies {
		host, port, err := net.SplitHostPort(p)
		if err != nil {
			return fmt.Errorf("proxy %q: want host:port: %w", p, err)
		}
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return fmt.Errorf("proxy %q: bad port: %w", p, err)
		}
		for a := range seedAddrs(c.res, map[string]bool{host: true}) {
			g.AllowEndpoint(netip.AddrPortFrom(a, uint16(n)))
		}
	}
	return nil
}

// withAuth returns a copy of auth (never nil) that takeUser may add to.
func withAuth(auth map[string]*url.Userinfo) map[string]*url.Userinfo {
	out := maps.Clone(auth)
	if out == nil {
		out = map[string]*url.Userinfo{}
	}
	return out
}
