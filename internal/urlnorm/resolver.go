package urlnorm

import (
	"fmt"
	"net/url"
	"strings"
)

// Resolver resolves many references against one base URL, as Resolve does, without splitting
// the base again for each and with fewer allocations: the normalized string is built in a
// buffer the Resolver keeps, and the *url.URL is put together from its parts instead of being
// parsed again (net/url's own rules decide Path and RawPath). A Resolver is not safe for
// concurrent use; its zero value is not usable (NewResolver).
type Resolver struct {
	base     *url.URL
	scheme   string // lowercased; "" if the base is not http(s): relative references fail
	auth     string // the base's authority, userinfo included
	path     string // the base's escaped path
	hasQuery bool
	query    string
	buf, seg []byte    // scratch: the URL being built, and the escaped path
	urls     []url.URL // slab the returned URLs are taken from
	last     built     // what the last Normalize made
}

// resolverSlab is how many URLs a Resolver allocates at once.
const resolverSlab = 64

// NewResolver returns a Resolver for base, which should come from Parse or Resolve; a nil
// base resolves only absolute references.
func NewResolver(base *url.URL) *Resolver {
	r := &Resolver{base: base}
	if base == nil {
		return r
	}
	if s := strings.ToLower(base.Scheme); s == "http" || s == "https" {
		r.scheme = s
	}
	r.auth = base.Host
	if base.User != nil {
		r.auth = base.User.String() + "@" + base.Host
	}
	r.path = base.EscapedPath()
	r.hasQuery, r.query = base.ForceQuery || base.RawQuery != "", base.RawQuery
	return r
}

// Resolve returns what Resolve(base, ref) returns, and the URL's String().
func (rs *Resolver) Resolve(refStr string) (*url.URL, string, error) {
	if _, err := rs.Normalize(refStr); err != nil {
		return nil, "", err
	}
	return rs.URL()
}

// Normalize resolves ref and returns the normalized URL's String() in bytes that stay valid
// until the next call of the Resolver: a caller can look it up (a map read of string(b) does
// not allocate) before it asks for the URL.
func (rs *Resolver) Normalize(refStr string) ([]byte, error) {
	rs.last = built{}
	r, err := split(refStr)
	if err != nil {
		return nil, err
	}
	if r.scheme == "" {
		if rs.base == nil {
			return nil, fmt.Errorf("%w: relative reference %q without a base", ErrParse, clip(refStr))
		}
		if rs.scheme == "" {
			return nil, fmt.Errorf("%w %q (base URL)", ErrScheme, strings.ToLower(rs.base.Scheme))
		}
		t := ref{scheme: rs.scheme, hasAuth: true}
		switch {
		case r.hasAuth:
			t.authority, t.path, t.hasQuery, t.query = r.authority, r.path, r.hasQuery, r.query
		case r.path == "":
			t.authority, t.path = rs.auth, rs.path
			if r.hasQuery {
				t.hasQuery, t.query = true, r.query
			} else {
				t.hasQuery, t.query = rs.hasQuery, rs.query
			}
		case r.path[0] == '/':
			t.authority, t.path, t.hasQuery, t.query = rs.auth, r.path, r.hasQuery, r.query
		default:
			// merge (§5.2.3): build escapes dir and path one after the other, which is escaping
			// them joined, as dir ends with '/'; dot segments are removed by build.
			t.authority, t.dir, t.path, t.hasQuery, t.query = rs.auth, "/", r.path, r.hasQuery, r.query
			if i := strings.LastIndexByte(rs.path, '/'); i >= 0 {
				t.dir = rs.path[:i+1]
			}
		}
		r = t
	}
	return rs.build(r)
}

// built is what build left for URL: the normalized URL in rs.buf and where its parts end.
type built struct {
	ok       bool
	scheme   int // len of the scheme
	pathAt   int
	pathEnd  int
	query    bool
	userinfo bool
}

// URL returns the URL that the last Normalize, which must have succeeded, made, and its
// String(), as Resolve(base, ref) returns them.
func (rs *Resolver) URL() (*url.URL, string, error) {
	l := rs.last
	if !l.ok {
		return nil, "", fmt.Errorf("%w: no URL normalized", ErrParse)
	}
	s := string(rs.buf)
	if l.userinfo {
		// Rare: let net/url take the userinfo apart, as build does.
		u, err := url.Parse(s)
		if err != nil {
			return nil, "", fmt.Errorf("%w: %v", ErrParse, err)
		}
		str := u.String()
		if len(str) > MaxLength {
			return nil, "", fmt.Errorf("%w: %d bytes", ErrTooLong, len(str))
		}
		return u, str, nil
	}
	u := rs.newURL()
	u.Scheme = s[:l.scheme]
	u.Host = s[l.scheme+3 : l.pathAt]
	if err := setPath(u, s[l.pathAt:l.pathEnd]); err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrParse, err)
	}
	if l.query {
		u.RawQuery = s[l.pathEnd+1:]
	}
	return u, s, nil
}

// build is the package's build writing into the Resolver's buffers, up to the string; URL
// makes the rest. Together they return the same URL and error as build for every input
// (TestResolverMatchesResolve, FuzzResolver).
func (rs *Resolver) build(r ref) ([]byte, error) {
	userinfo, host, port, err := r.splitAuthority()
	if err != nil {
		return nil, err
	}
	b := append(rs.buf[:0], r.scheme...)
	b = append(b, "://"...)
	if userinfo != "" {
		b = appendEscaped(b, userinfo, isUserinfoChar)
		b = append(b, '@')
	}
	b = append(b, host...)
	if port != "" {
		b = append(b, ':')
		b = append(b, port...)
	}
	pathAt := len(b)
	rs.seg = appendEscaped(rs.seg[:0], r.dir, isPathChar)
	rs.seg = appendEscaped(rs.seg, r.path, isPathChar)
	b = appendDotless(b, rs.seg)
	pathEnd := len(b)
	if r.query != "" {
		b = append(b, '?')
		b = appendEscaped(b, r.query, isQueryChar)
	}
	rs.buf = b
	if len(b) > MaxLength {
		return nil, fmt.Errorf("%w: %d bytes", ErrTooLong, len(b))
	}
	rs.last = built{ok: true, scheme: len(r.scheme), pathAt: pathAt, pathEnd: pathEnd, query: r.query != "", userinfo: userinfo != ""}
	return b, nil
}

// newURL returns a zeroed URL from the slab, whose size doubles up to resolverSlab.
func (rs *Resolver) newURL() *url.URL {
	if len(rs.urls) == cap(rs.urls) {
		rs.urls = make([]url.URL, 0, min(max(2*cap(rs.urls), 4), resolverSlab))
	}
	rs.urls = rs.urls[:len(rs.urls)+1]
	return &rs.urls[len(rs.urls)-1]
}

// setPath sets u.Path and u.RawPath from the escaped path p as url.Parse does: Path is p
// unescaped, RawPath is p unless p is Path's default encoding.
func setPath(u *url.URL, p string) error {
	path, err := url.PathUnescape(p)
	if err != nil {
		return err
	}
	u.Path, u.RawPath = path, ""
	if u.EscapedPath() != p {
		u.RawPath = p
	}
	return nil
}

// appendEscaped appends s to b with normalized percent-encoding (see escape).
func appendEscaped(b []byte, s string, allowed func(byte) bool) []byte {
	const hexdig = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' {
			if i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
				d := unhex(s[i+1])<<4 | unhex(s[i+2])
				if isUnreserved(d) {
					b = append(b, d)
				} else {
					b = append(b, '%', hexdig[d>>4], hexdig[d&15])
				}
				i += 2
				continue
			}
			b = append(b, "%25"...)
			continue
		}
		if allowed(c) {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hexdig[c>>4], hexdig[c&15])
	}
	return b
}

// appendDotless appends removeDotSegments(p) to b.
func appendDotless(b, p []byte) []byte {
	if len(p) == 0 {
		return append(b, '/')
	}
	if !strings.Contains(string(p), "/.") { // no allocation: the conversion does not escape
		return append(b, p...)
	}
	return append(b, removeDotSegments(string(p))...)
}
