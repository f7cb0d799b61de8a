package urlnorm

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// MaxLength is the longest normalized URL, in bytes, that Parse and Resolve
// return. Longer ones fail with ErrTooLong.
const MaxLength = 2048

// maxInput bounds the work done on absurd inputs: after trimming, a raw
// string longer than this fails with ErrTooLong before normalization.
const maxInput = 8 * MaxLength

// ref holds the components of a URI reference (RFC 3986 §3, Appendix B),
// still in raw form. The fragment is never kept.
type ref struct {
	scheme    string // lowercased; "" if absent
	hasAuth   bool
	authority string
	dir       string // Resolver only: a merged path's directory, ending with '/', before path
	path      string
	hasQuery  bool
	query     string
}

// Parse normalizes raw, which must be an absolute http or https URL.
// See the package documentation for the rules applied.
func Parse(raw string) (*url.URL, error) {
	r, err := split(raw)
	if err != nil {
		return nil, err
	}
	if r.scheme == "" {
		return nil, fmt.Errorf("%w: no scheme in %q", ErrScheme, clip(raw))
	}
	return build(r)
}

// Resolve resolves the reference ref against base (RFC 3986 §5.2.2, with
// the browser reading of backslashes) and normalizes the result. base is
// used as given; it should itself come from Parse or Resolve. A nil base is
// allowed only when ref is absolute.
func Resolve(base *url.URL, refStr string) (*url.URL, error) {
	r, err := split(refStr)
	if err != nil {
		return nil, err
	}
	if r.scheme != "" {
		return build(r)
	}
	if base == nil {
		return nil, fmt.Errorf("%w: relative reference %q without a base", ErrParse, clip(refStr))
	}
	bscheme := strings.ToLower(base.Scheme)
	if bscheme != "http" && bscheme != "https" {
		return nil, fmt.Errorf("%w %q (base URL)", ErrScheme, bscheme)
	}
	t := ref{scheme: bscheme, hasAuth: true}
	if r.hasAuth {
		t.authority, t.path, t.hasQuery, t.query = r.authority, r.path, r.hasQuery, r.query
		return build(t)
	}
	t.authority = base.Host
	if base.User != nil {
		t.authority = base.User.String() + "@" + base.Host
	}
	bpath := base.EscapedPath()
	switch {
	case r.path == "":
		t.path = bpath
		if r.hasQuery {
			t.hasQuery, t.query = true, r.query
		} else {
			t.hasQuery, t.query = base.ForceQuery || base.RawQuery != "", base.RawQuery
		}
	case r.path[0] == '/':
		t.path, t.hasQuery, t.query = r.path, r.hasQuery, r.query
	default:
		// merge (§5.2.3); dot segments are removed by build.
		if i := strings.LastIndexByte(bpath, '/'); i >= 0 {
			t.path = bpath[:i+1] + r.path
		} else {
			t.path = "/" + r.path
		}
		t.hasQuery, t.query = r.hasQuery, r.query
	}
	return build(t)
}

// split cleans raw as browsers do and cuts it into components.
func split(raw string) (ref, error) {
	s := trimC0(raw)
	if len(s) > maxInput {
		return ref{}, fmt.Errorf("%w: %d bytes", ErrTooLong, len(s))
	}
	if strings.ContainsAny(s, "\t\r\n") {
		s = strings.NewReplacer("\t", "", "\r", "", "\n", "").Replace(s)
	}
	if i := strings.IndexByte(s, '#'); i >= 0 {
		s = s[:i]
	}
	var r ref
	if i := schemeEnd(s); i > 0 {
		r.scheme = strings.ToLower(s[:i])
		s = s[i+1:]
		if r.scheme != "http" && r.scheme != "https" {
			return ref{}, fmt.Errorf("%w %q", ErrScheme, clip(r.scheme))
		}
	}
	if q := strings.IndexByte(s, '?'); q >= 0 {
		r.hasQuery, r.query = true, s[q+1:]
		s = s[:q]
	}
	// Only http(s) and relative references get here: read '\' as '/'.
	s = strings.ReplaceAll(s, `\`, "/")
	if strings.HasPrefix(s, "//") {
		s = s[2:]
		r.hasAuth = true
		i := strings.IndexByte(s, '/')
		if i < 0 {
			i = len(s)
		}
		r.authority, s = s[:i], s[i:]
	}
	r.path = s
	return r, nil
}

// trimC0 removes leading and trailing C0 controls and spaces, as the WHATWG
// URL parser does (unlike strings.TrimSpace, it keeps U+00A0 and friends).
func trimC0(s string) string {
	i, j := 0, len(s)
	for i < j && s[i] <= ' ' {
		i++
	}
	for j > i && s[j-1] <= ' ' {
		j--
	}
	return s[i:j]
}

// schemeEnd returns the index of the ':' ending a syntactically valid scheme
// (ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )) at the start of s, or -1.
func schemeEnd(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.':
			if i == 0 {
				return -1
			}
		case c == ':':
			if i == 0 {
				return -1
			}
			return i
		default:
			return -1
		}
	}
	return -1
}

// splitAuthority returns r's user information and its normalized host and port (none when it
// is the scheme's default).
func (r ref) splitAuthority() (userinfo, host, port string, err error) {
	if !r.hasAuth {
		return "", "", "", fmt.Errorf("%w: %s URL without authority", ErrNoHost, r.scheme)
	}
	auth := r.authority
	if i := strings.LastIndexByte(auth, '@'); i >= 0 {
		userinfo, auth = auth[:i], auth[i+1:]
	}
	host, port, err = splitHostPort(auth)
	if err != nil {
		return "", "", "", err
	}
	if host == "" {
		return "", "", "", fmt.Errorf("%w in %q", ErrNoHost, clip(r.authority))
	}
	if host, err = normHost(host); err != nil {
		return "", "", "", err
	}
	if (r.scheme == "http" && port == "80") || (r.scheme == "https" && port == "443") {
		port = ""
	}
	return userinfo, host, port, nil
}

// build normalizes an absolute reference with an http(s) scheme.
func build(r ref) (*url.URL, error) {
	userinfo, host, port, err := r.splitAuthority()
	if err != nil {
		return nil, err
	}

	var b strings.Builder
	b.Grow(len(r.scheme) + len(r.authority) + len(r.path) + len(r.query) + 8)
	b.WriteString(r.scheme)
	b.WriteString("://")
	if userinfo != "" {
		escape(&b, userinfo, isUserinfoChar)
		b.WriteByte('@')
	}
	b.WriteString(host)
	if port != "" {
		b.WriteByte(':')
		b.WriteString(port)
	}
	var p strings.Builder
	escape(&p, r.path, isPathChar)
	b.WriteString(removeDotSegments(p.String()))
	if r.query != "" {
		b.WriteByte('?')
		escape(&b, r.query, isQueryChar)
	}
	s := b.String()
	if len(s) > MaxLength {
		return nil, fmt.Errorf("%w: %d bytes", ErrTooLong, len(s))
	}
	u, err := url.Parse(s)
	if err != nil {
		// Unreachable if the code above is right; FuzzNormalize watches it.
		return nil, fmt.Errorf("%w: %v", ErrParse, err)
	}
	if n := len(u.String()); n > MaxLength {
		return nil, fmt.Errorf("%w: %d bytes", ErrTooLong, n)
	}
	return u, nil
}

// splitHostPort splits an authority without userinfo. The port is returned
// in canonical decimal form, or "" if absent or empty.
func splitHostPort(hp string) (host, port string, err error) {
	if strings.HasPrefix(hp, "[") {
		end := strings.IndexByte(hp, ']')
		if end < 0 {
			return "", "", fmt.Errorf("%w: unclosed IPv6 literal in %q", ErrParse, clip(hp))
		}
		host, hp = hp[:end+1], hp[end+1:]
		if hp != "" && hp[0] != ':' {
			return "", "", fmt.Errorf("%w: junk after IPv6 literal %q", ErrParse, clip(hp))
		}
		if hp != "" {
			port = hp[1:]
		}
	} else if i := strings.LastIndexByte(hp, ':'); i >= 0 {
		host, port = hp[:i], hp[i+1:]
	} else {
		host = hp
	}
	if port == "" {
		return host, "", nil
	}
	for i := 0; i < len(port); i++ {
		if port[i] < '0' || port[i] > '9' {
			return "", "", fmt.Errorf("%w: bad port %q", ErrParse, clip(port))
		}
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return "", "", fmt.Errorf("%w: bad port %q", ErrParse, clip(port))
	}
	if port[0] != '0' {
		return host, port, nil // canonical already
	}
	return host, strconv.FormatUint(n, 10), nil
}

// normHost returns the canonical form of a non-empty host: a lowercased
// ASCII DNS name (IDNs converted to punycode) or a bracketed IPv6 literal.
func normHost(h string) (string, error) {
	if h[0] == '[' {
		a, err := netip.ParseAddr(h[1 : len(h)-1])
		if err != nil || !a.Is6() || a.Zone() != "" {
			return "", fmt.Errorf("%w: bad IPv6 literal %q", ErrParse, clip(h))
		}
		return "[" + a.String() + "]", nil
	}
	if strings.IndexByte(h, '%') >= 0 {
		d, ok := unescapeAll(h)
		if !ok {
			return "", fmt.Errorf("%w: bad percent-encoding in host %q", ErrParse, clip(h))
		}
		h = d
	}
	ascii := true
	for i := 0; i < len(h); i++ {
		if h[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if !ascii {
		// Hosts that are plain ASCII skip IDNA: its STD3 rules would refuse
		// names that are common on the web ("my_host", "r3---sn-x").
		a, err := idna.Lookup.ToASCII(h)
		if err == nil && !utf8.ValidString(h) {
			err = errors.New("invalid UTF-8")
		}
		if err != nil {
			return "", fmt.Errorf("%w: host %q: %v", ErrParse, clip(h), err)
		}
		h = a
	}
	h = strings.ToLower(h)
	if h == "" {
		return "", ErrNoHost
	}
	trimmed := strings.TrimSuffix(h, ".")
	if trimmed == "" {
		return "", fmt.Errorf("%w: bad host %q", ErrParse, clip(h))
	}
	prev := byte('.')
	for i := 0; i < len(trimmed); i++ {
		c := trimmed[i]
		switch {
		case c == '.':
			if prev == '.' {
				return "", fmt.Errorf("%w: empty label in host %q", ErrParse, clip(h))
			}
		case 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_':
		default:
			return "", fmt.Errorf("%w: bad character %q in host %q", ErrParse, c, clip(h))
		}
		prev = c
	}
	return h, nil
}

// unescapeAll decodes every %XX in s; ok is false if a '%' starts no escape.
func unescapeAll(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return "", false
		}
		b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
		i += 2
	}
	return b.String(), true
}

// escape writes s with normalized percent-encoding (appendEscaped): valid escapes get
// upper-case hex, escapes of unreserved characters are decoded, a stray '%' becomes "%25", and
// bytes for which allowed is false are encoded.
func escape(b *strings.Builder, s string, allowed func(byte) bool) {
	var buf [128]byte
	b.Write(appendEscaped(buf[:0], s, allowed))
}

// removeDotSegments implements RFC 3986 §5.2.4 for a path that is empty or
// starts with '/'. The result always starts with '/'.
func removeDotSegments(p string) string {
	if p == "" {
		return "/"
	}
	if !strings.Contains(p, "/.") {
		return p
	}
	segs := strings.Split(p[1:], "/")
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	return "/" + strings.Join(out, "/")
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

func isSubDelim(c byte) bool {
	switch c {
	case '!', '$', '&', '\'', '(', ')', '*', '+', ',', ';', '=':
		return true
	}
	return false
}

func isUserinfoChar(c byte) bool { return isUnreserved(c) || isSubDelim(c) || c == ':' }

func isPathChar(c byte) bool {
	return isUnreserved(c) || isSubDelim(c) || c == ':' || c == '@' || c == '/'
}

func isQueryChar(c byte) bool { return isPathChar(c) || c == '?' }

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// clip shortens s for error messages.
func clip(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
