package netguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"syscall"
)

// ErrPrivateAddress is returned (wrapped) by Guard.Control for an address the guard refuses.
var ErrPrivateAddress = errors.New("refusing to connect to a non-public address")

// ranges are the non-public address blocks, each as a whole: allowing one address allows its
// block (a seed on 127.0.0.1 puts all of 127.0.0.0/8 in scope).
var ranges = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),      // "this network", unspecified
	netip.MustParsePrefix("10.0.0.0/8"),     // private
	netip.MustParsePrefix("100.64.0.0/10"),  // shared address space (CGNAT)
	netip.MustParsePrefix("127.0.0.0/8"),    // loopback
	netip.MustParsePrefix("169.254.0.0/16"), // link-local, cloud metadata
	netip.MustParsePrefix("172.16.0.0/12"),  // private
	netip.MustParsePrefix("192.0.0.0/24"),   // IETF protocol assignments
	netip.MustParsePrefix("192.168.0.0/16"), // private
	netip.MustParsePrefix("198.18.0.0/15"),  // benchmarking
	netip.MustParsePrefix("224.0.0.0/4"),    // multicast
	netip.MustParsePrefix("240.0.0.0/4"),    // reserved, broadcast
	netip.MustParsePrefix("::/128"),         // unspecified
	netip.MustParsePrefix("::1/128"),        // loopback
	netip.MustParsePrefix("fc00::/7"),       // unique local
	netip.MustParsePrefix("fe80::/10"),      // link-local
	netip.MustParsePrefix("ff00::/8"),       // multicast
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64 (RFC 8215): never global
}

// carriers are the IPv6 blocks whose addresses carry an IPv4 address in their last 32 bits and
// may reach it: IPv4-compatible (deprecated, ::/96), IPv4-translated (SIIT, ::ffff:0:0:0/96) and
// the well-known NAT64 prefix (RFC 6052, 64:ff9b::/96). IPv4-mapped addresses are Unmap's.
var carriers = []netip.Prefix{
	netip.MustParsePrefix("::/96"),
	netip.MustParsePrefix("::ffff:0:0:0/96"),
	netip.MustParsePrefix("64:ff9b::/96"),
}

// Range returns the non-public block holding addr, or false if addr is public. An IPv6 address
// that carries an IPv4 address (IPv4-mapped, IPv4-compatible, IPv4-translated, NAT64) is judged
// as the IPv4 address it carries.
func Range(addr netip.Addr) (netip.Prefix, bool) {
	addr = addr.Unmap().WithZone("") // Prefix.Contains never matches a zoned address
	for _, p := range ranges {
		if p.Contains(addr) {
			return p, true
		}
	}
	if v4, ok := carried(addr); ok {
		return Range(v4)
	}
	return netip.Prefix{}, false
}

// carried returns the IPv4 address an IPv6 address of one of the carriers holds.
func carried(addr netip.Addr) (netip.Addr, bool) {
	if !addr.Is6() {
		return netip.Addr{}, false
	}
	for _, p := range carriers {
		if p.Contains(addr) {
			b := addr.As16()
			return netip.AddrFrom4([4]byte(b[12:])), true
		}
	}
	return netip.Addr{}, false
}

// Guard decides which addresses may be dialled. The zero value refuses every non-public
// address. A Guard must not be changed once in use; it is then safe for concurrent use.
type Guard struct {
	AllowAll bool           // --allow-private-networks: refuse nothing
	Allowed  []netip.Prefix // non-public blocks in scope (those the seeds are on)
	// Endpoints are single address:port pairs that may be dialled whatever their block: the
	// proxies. Only Control sees ports, so only Control lets them through.
	Endpoints []netip.AddrPort
}

// AllowEndpoint lets Control dial exactly ap (address and port), and nothing else of its block.
func (g *Guard) AllowEndpoint(ap netip.AddrPort) {
	ap = netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())
	if !slices.Contains(g.Endpoints, ap) {
		g.Endpoints = append(g.Endpoints, ap)
	}
}

// Allow puts the non-public block holding addr in scope; it does nothing for a public address.
func (g *Guard) Allow(addr netip.Addr) {
	if p, ok := Range(addr); ok {
		for _, q := range g.Allowed {
			if q == p {
				return
			}
		}
		g.Allowed = append(g.Allowed, p)
	}
}

// Check returns nil if addr may be dialled.
func (g *Guard) Check(addr netip.Addr) error {
	if g.AllowAll {
		return nil
	}
	p, private := Range(addr)
	if !private {
		return nil
	}
	for _, q := range g.Allowed {
		if q == p {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is in %s (use --allow-private-networks to crawl it)", ErrPrivateAddress, addr.Unmap(), p)
}

// Control has the signature of net.Dialer.Control: it checks the address about to be dialled.
func (g *Guard) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		host, _, serr := net.SplitHostPort(address)
		if serr != nil {
			return fmt.Errorf("%w: cannot read dial address %q", ErrPrivateAddress, address)
		}
		a, perr := netip.ParseAddr(host)
		if perr != nil {
			return fmt.Errorf("%w: dial address %q is not an IP", ErrPrivateAddress, address)
		}
		return g.Check(a)
	}
	if len(g.Endpoints) > 0 && slices.Contains(g.Endpoints, netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())) {
		return nil
	}
	return g.Check(ap.Addr())
}
