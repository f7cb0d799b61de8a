package netguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
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
}

// Range returns the non-public block holding addr, or false if addr is public. IPv4-mapped
// IPv6 addresses are judged as the IPv4 address they carry.
func Range(addr netip.Addr) (netip.Prefix, bool) {
	addr = addr.Unmap().WithZone("") // Prefix.Contains never matches a zoned address
	for _, p := range ranges {
		if p.Contains(addr) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// Guard decides which addresses may be dialled. The zero value refuses every non-public
// address. A Guard must not be changed once in use; it is then safe for concurrent use.
type Guard struct {
	AllowAll bool           // --allow-private-networks: refuse nothing
	Allowed  []netip.Prefix // non-public blocks in scope (those the seeds are on)
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
	return g.Check(ap.Addr())
}
