package robots

import "strings"

// rule is one allow or disallow line, compiled for matching.
type rule struct {
	allow    bool
	line     int
	text     string   // "Disallow: VALUE" as written
	pattern  string   // canonical form; '*' is the wildcard (a literal '*' is "%2A")
	anchored bool     // the rule ended in '$'
	segs     []string // pattern split at '*'; nil when the rule has no wildcard
	length   int      // octets of the canonical rule, counting '*' and the trailing '$'
}

func newRule(allow bool, value, text string, line int) *rule {
	if value[0] != '/' && value[0] != '*' {
		value = "/" + value
	}
	r := &rule{allow: allow, line: line, text: text}
	if strings.HasSuffix(value, "$") {
		r.anchored = true
		value = value[:len(value)-1]
	}
	r.pattern = canon(value, true)
	if strings.Contains(r.pattern, "*") {
		r.segs = strings.Split(r.pattern, "*")
	}
	r.length = len(r.pattern)
	if r.anchored {
		r.length++
	}
	return r
}

// beats reports whether r takes precedence over o when both match: the longer rule wins, then
// allow over disallow (RFC 9309 §2.2.2), then the earlier line.
func (r *rule) beats(o *rule) bool {
	if r.length != o.length {
		return r.length > o.length
	}
	if r.allow != o.allow {
		return r.allow
	}
	return r.line < o.line
}

// match reports whether r matches the canonical path p, starting at its first octet.
// Wildcards are matched greedily left to right, each segment at its leftmost occurrence, which
// is exact for patterns whose only operator is '*' and runs in time linear in len(p) per
// segment: no backtracking, no regular expressions.
func (r *rule) match(p string) bool {
	if r.segs == nil {
		if r.anchored {
			return p == r.pattern
		}
		return strings.HasPrefix(p, r.pattern)
	}
	if !strings.HasPrefix(p, r.segs[0]) {
		return false
	}
	pos := len(r.segs[0])
	last := len(r.segs) - 1
	for _, s := range r.segs[1:last] {
		i := strings.Index(p[pos:], s)
		if i < 0 {
			return false
		}
		pos += i + len(s)
	}
	tail := r.segs[last]
	if r.anchored {
		return len(p)-pos >= len(tail) && strings.HasSuffix(p, tail)
	}
	return strings.Contains(p[pos:], tail)
}

// canonPath returns the canonical form of a request path and query (see the package doc).
func canonPath(s string) string {
	if i := strings.IndexByte(s, '#'); i >= 0 {
		s = s[:i]
	}
	if !strings.HasPrefix(s, "/") {
		s = "/" + s
	}
	return canon(s, false)
}

// canon returns the canonical percent-encoding of s. In a rule (isRule) '*' is kept as the
// wildcard; in a path, '*' and '$' are encoded so that "%2A" and "%24" in a rule match them.
func canon(s string, isRule bool) string {
	if isCanonical(s, isRule) {
		return s // the common case: plain ASCII paths need no copy
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + 16)
	inQuery := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%':
			if i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
				v := unhex(s[i+1])<<4 | unhex(s[i+2])
				if isUnreserved(v) || inQuery && isQueryLiteral(v) {
					b.WriteByte(v)
				} else {
					b.WriteByte('%')
					b.WriteByte(hex[v>>4])
					b.WriteByte(hex[v&15])
				}
				i += 2
			} else {
				b.WriteString("%25")
			}
		case c == '*' && isRule:
			b.WriteByte('*')
		case c == '?' && !inQuery:
			inQuery = true
			b.WriteByte('?')
		case mustEncode(c):
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// isCanonical reports whether canon(s, isRule) == s, without allocating.
func isCanonical(s string, isRule bool) bool {
	inQuery := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%':
			if i+2 >= len(s) || !isUpperHex(s[i+1]) || !isUpperHex(s[i+2]) {
				return false
			}
			if v := unhex(s[i+1])<<4 | unhex(s[i+2]); isUnreserved(v) || inQuery && isQueryLiteral(v) {
				return false
			}
			i += 2
		case c == '*' && isRule:
		case c == '?' && !inQuery:
			inQuery = true
		case mustEncode(c):
			return false
		}
	}
	return true
}

// mustEncode reports whether a literal octet c is compared in its percent-encoded form.
func mustEncode(c byte) bool {
	if c <= ' ' || c >= 0x7F {
		return true
	}
	switch c {
	case '"', '<', '>', '\\', '^', '`', '{', '|', '}', '#', '*', '$':
		return true
	}
	return false
}

// isQueryLiteral reports whether c, escaped inside a query, is compared unescaped: these
// delimiters have no role inside a query (RFC 3986 §3.4), and the RFC 9309 §2.2.2 table makes
// "?baz=https://foo.bar" and "?baz=https%3A%2F%2Ffoo.bar" the same.
func isQueryLiteral(c byte) bool { return c == ':' || c == '/' || c == '?' || c == '@' }

func isUnreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func isUpperHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'A' && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}
