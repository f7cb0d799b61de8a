package urlnorm

import (
	"net"
	"net/netip"
	"net/url"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// HostKey returns the politeness key of u: its lowercased host[:port] with
// the scheme's default port dropped, so http://a.com and https://a.com share
// the key "a.com" while a.com:8080 has its own. For URLs from Parse or
// Resolve this is u.Host.
func HostKey(u *url.URL) string {
	host := strings.ToLower(u.Host)
	scheme := strings.ToLower(u.Scheme)
	if port := u.Port(); (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		host = strings.TrimSuffix(host, ":"+port)
	}
	return host
}

// Origin returns u's lowercased scheme, host and port, the port always written:
// "https://a.com:443", "http://[::1]:80". Unlike HostKey it tells http from https and the
// default port from another: credentials are keyed by it, so that they reach only the scheme
// and port they were given for.
func Origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// Registrable returns the registrable domain (eTLD+1, from the public suffix
// list in golang.org/x/net/publicsuffix) of host, lowercased: "www.a.co.uk"
// gives "a.co.uk". A port is ignored. IP addresses, "localhost", single-label
// names, public suffixes themselves and anything else without an eTLD+1 are
// returned as they are (lowercased, port removed).
func Registrable(host string) string {
	host = strings.ToLower(host)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	name := strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if _, err := netip.ParseAddr(name); err == nil {
		return host
	}
	if name == "localhost" || !strings.Contains(name, ".") {
		return host
	}
	d, err := publicsuffix.EffectiveTLDPlusOne(name)
	if err != nil {
		return host
	}
	return d
}

// SplitHostKey splits a host key (host[:port], an IPv6 literal in brackets) into the name and
// the port ("" if none).
func SplitHostKey(host string) (name, port string) {
	if h, p, err := net.SplitHostPort(host); err == nil {
		return h, p
	}
	if len(host) > 1 && host[0] == '[' && host[len(host)-1] == ']' {
		return host[1 : len(host)-1], ""
	}
	return host, ""
}

// AddrKey returns the politeness key of the server a host key's name resolves to: of addrs,
// the first IPv4 address in address order (else the first IPv6 one), with the host key's port,
// so that every name of a server picks the same. With no addrs it returns host itself.
func AddrKey(host string, addrs []netip.Addr) string {
	if len(addrs) == 0 {
		return host
	}
	best := addrs[0].Unmap()
	for _, a := range addrs[1:] {
		a = a.Unmap()
		if (a.Is4() && !best.Is4()) || (a.Is4() == best.Is4() && a.Less(best)) {
			best = a
		}
	}
	_, port := SplitHostKey(host)
	if port == "" {
		if best.Is6() {
			return "[" + best.String() + "]"
		}
		return best.String()
	}
	return net.JoinHostPort(best.String(), port)
}

// RedactPassword returns the URL text s with the password of its user:password@ (if it has
// one) written as "…", and that password. It works on text that does not parse as a URL, so
// that an error about a bad URL never shows its password: replace pass in the error's text too.
func RedactPassword(s string) (shown, pass string) {
	i := strings.Index(s, "://")
	if i < 0 {
		return s, ""
	}
	start := i + 3
	end := len(s)
	if j := strings.IndexAny(s[start:], "/?#"); j >= 0 {
		end = start + j
	}
	at := strings.LastIndexByte(s[start:end], '@')
	if at < 0 {
		return s, ""
	}
	userinfo := s[start : start+at]
	colon := strings.IndexByte(userinfo, ':')
	if colon < 0 || colon == len(userinfo)-1 {
		return s, ""
	}
	pass = userinfo[colon+1:]
	return s[:start+colon+1] + "…" + s[start+at:], pass
}
