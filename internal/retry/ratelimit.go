package retry

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Quota is what a response's rate-limit headers say about the client's allowance at a host.
type Quota struct {
	// Remaining is how many more requests the server says it will accept before Reset. 0 means
	// the next request would be refused: the quota is spent.
	Remaining int
	// Reset is how long after the response the quota is replenished; 0 when the server did not
	// say, or named a time already past. It is at most a year (maxQuotaDelay); capping it further
	// is the caller's call.
	Reset time.Duration
	// Limit is the quota per Window (the policy's size); 0 when unknown.
	Limit int
	// Window is the period Limit applies to; 0 when unknown.
	Window time.Duration
}

// maxQuotaDelay bounds Reset and Window. No quota resets more than a year ahead; beyond that a
// value is garbage, and bounding it keeps now.Add(Reset) far from overflow.
const maxQuotaDelay = 366 * 24 * time.Hour

// epochThreshold: a reset above this many seconds (about 31 years) cannot be a delay, so it is
// read as a Unix time, as GitHub and others send X-RateLimit-Reset.
const epochThreshold = 1e9

// ParseRateLimit reads the rate-limit headers of a response, in the first of these forms that
// gives a usable remaining count:
//
//   - RateLimit and RateLimit-Policy of draft-ietf-httpapi-ratelimit-headers (08 and later),
//     Structured Field Lists: `RateLimit: "default";r=50;t=30` (r remaining, t seconds until
//     reset) and `RateLimit-Policy: "default";q=100;w=60` (q quota, w window seconds). When
//     several service limits are listed, the most restrictive wins: least r, then the longest
//     t. Its policy is the one of the same name, else the one with the smallest q/w.
//   - The draft-07 Dictionary `RateLimit: limit=100, remaining=50, reset=5`.
//   - RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset of the earlier drafts; the limit
//     may carry policies (`100, 100;w=60`), as may a RateLimit-Policy of Integers (`100;w=60`).
//   - The de-facto X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset.
//
// A reset above 1e9 seconds is a Unix time (X-RateLimit-Reset on GitHub; a delay of 31 years
// means the same mistake in any of the fields). It is measured against the response's Date
// header when that is present and valid, so that the server's clock skew cancels out, else
// against now. A reset in the past is 0.
//
// Malformed Structured Fields are ignored whole, as RFC 8941 says; a garbage, negative or
// overflowing plain value ignores that one header. ok is false when no usable remaining count
// is found, and q is then the zero Quota.
func ParseRateLimit(h http.Header, now time.Time) (q Quota, ok bool) {
	ref := now
	if d, err := http.ParseTime(strings.TrimSpace(h.Get("Date"))); err == nil {
		ref = d
	}
	if q, ok := parseRateLimitField(h, ref); ok {
		return q, true
	}
	if q, ok := parseDraftFields(h, ref); ok {
		return q, true
	}
	return parseXFields(h, ref)
}

// parseRateLimitField reads the RateLimit field: a List of service limits (draft 08 and later)
// or, failing that, the draft-07 Dictionary.
func parseRateLimitField(h http.Header, ref time.Time) (Quota, bool) {
	v := fieldValue(h, "RateLimit")
	if v == "" {
		return Quota{}, false
	}
	if items, ok := parseSF(v, false); ok {
		return serviceLimits(items, h, ref)
	}
	members, ok := parseSF(v, true)
	if !ok {
		return Quota{}, false
	}
	var q Quota
	found := false
	for _, m := range members { // later duplicates win, as for any Dictionary
		switch m.key {
		case "remaining":
			found = false
			if r, ok := m.val.count(); ok {
				q.Remaining, found = r, true
			}
		case "reset":
			q.Reset = 0
			if s, ok := m.val.seconds(); ok {
				q.Reset = resetAfter(s, ref)
			}
		case "limit":
			q.Limit, _ = m.val.count()
		}
	}
	if !found {
		return Quota{}, false
	}
	q.Window = windowOf(q.Limit, sfField(h, "RateLimit-Policy"))
	return q, true
}

// serviceLimits picks the most restrictive of a RateLimit List's service limits and the
// RateLimit-Policy that goes with it.
func serviceLimits(items []sfMember, h http.Header, ref time.Time) (Quota, bool) {
	var q Quota
	name, found := "", false
	for _, it := range items {
		if it.val.kind != sfString && it.val.kind != sfToken {
			continue
		}
		r, ok := it.param("r").count()
		if !ok {
			continue
		}
		var reset time.Duration
		if s, ok := it.param("t").seconds(); ok {
			reset = resetAfter(s, ref)
		}
		if !found || r < q.Remaining || r == q.Remaining && reset > q.Reset {
			q.Remaining, q.Reset, name, found = r, reset, it.val.s, true
		}
	}
	if !found {
		return Quota{}, false
	}
	var best *policy
	for _, it := range sfField(h, "RateLimit-Policy") {
		if it.val.kind != sfString && it.val.kind != sfToken {
			continue
		}
		quota, ok := it.param("q").count()
		if !ok {
			continue
		}
		p := &policy{quota: quota, window: it.param("w").window()}
		if it.val.s == name {
			best = p
			break
		}
		if best == nil || p.stricter(best) {
			best = p
		}
	}
	if best != nil {
		q.Limit, q.Window = best.quota, best.window
	}
	return q, true
}

// policy is one quota policy: quota units per window (0: window unknown).
type policy struct {
	quota  int
	window time.Duration
}

// stricter reports whether p allows less than o: the smaller quota per window, a policy with a
// known window before one without, and the smaller quota between two without.
func (p *policy) stricter(o *policy) bool {
	switch {
	case p.window > 0 && o.window > 0:
		return float64(p.quota)/p.window.Seconds() < float64(o.quota)/o.window.Seconds()
	case p.window > 0 || o.window > 0:
		return p.window > 0
	default:
		return p.quota < o.quota
	}
}

// parseDraftFields reads RateLimit-Remaining, -Reset and -Limit of the earlier drafts.
func parseDraftFields(h http.Header, ref time.Time) (Quota, bool) {
	var q Quota
	found := false
	for _, m := range sfField(h, "RateLimit-Remaining") {
		if r, ok := m.val.count(); ok && (!found || r < q.Remaining) {
			q.Remaining, found = r, true
		}
	}
	if !found {
		return Quota{}, false
	}
	if m := sfField(h, "RateLimit-Reset"); len(m) == 1 {
		if s, ok := m[0].val.seconds(); ok {
			q.Reset = resetAfter(s, ref)
		}
	}
	limit := sfField(h, "RateLimit-Limit")
	if len(limit) > 0 {
		if n, ok := limit[0].val.count(); ok {
			q.Limit = n
			q.Window = limit[0].param("w").window()
		}
	}
	if q.Window == 0 && len(limit) > 1 {
		q.Window = windowOf(q.Limit, limit[1:])
	}
	if q.Window == 0 {
		q.Window = windowOf(q.Limit, sfField(h, "RateLimit-Policy"))
	}
	return q, true
}

// windowOf returns the window of the first policy of the form `quota;w=seconds` (drafts up to
// 07) whose quota is limit, or 0.
func windowOf(limit int, policies []sfMember) time.Duration {
	if limit <= 0 {
		return 0
	}
	for _, p := range policies {
		if n, ok := p.val.count(); ok && n == limit {
			if w := p.param("w").window(); w > 0 {
				return w
			}
		}
	}
	return 0
}

// parseXFields reads the de-facto X-RateLimit-* headers: plain numbers, not Structured Fields.
func parseXFields(h http.Header, ref time.Time) (Quota, bool) {
	r, ok := plainCount(h.Get("X-RateLimit-Remaining"))
	if !ok {
		return Quota{}, false
	}
	q := Quota{Remaining: r}
	q.Limit, _ = plainCount(h.Get("X-RateLimit-Limit"))
	if s, ok := plainSeconds(h.Get("X-RateLimit-Reset")); ok {
		q.Reset = resetAfter(s, ref)
	}
	return q, true
}

// resetAfter turns a reset value in seconds (a delay, or above epochThreshold a Unix time
// measured against ref) into a delay in [0, maxQuotaDelay].
func resetAfter(secs float64, ref time.Time) time.Duration {
	if secs > epochThreshold {
		secs -= float64(ref.Unix()) + float64(ref.Nanosecond())/1e9
	}
	return clampSeconds(secs)
}

// clampSeconds converts seconds to a Duration in [0, maxQuotaDelay].
func clampSeconds(secs float64) time.Duration {
	switch {
	case !(secs > 0): // also NaN
		return 0
	case secs >= maxQuotaDelay.Seconds():
		return maxQuotaDelay
	}
	return time.Duration(secs * float64(time.Second))
}

// plainCount parses a non-negative decimal integer, saturating at the largest int.
func plainCount(s string) (int, bool) {
	s = strings.TrimSpace(s)
	if !isDigits(s) {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false // overflow: not a count anyone means
	}
	return int(min(n, math.MaxInt)), true
}

// plainSeconds parses non-negative seconds with an optional fraction ("30", "1712345678.25").
func plainSeconds(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	whole, frac, dot := strings.Cut(s, ".")
	if !isDigits(whole) || dot && !isDigits(frac) {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

// fieldValue is a field's lines joined as one List, as RFC 8941 §4.2 says to combine them.
func fieldValue(h http.Header, name string) string {
	return strings.Join(h.Values(name), ",")
}

// sfField parses a field as a Structured Field List; nil when absent or malformed.
func sfField(h http.Header, name string) []sfMember {
	v := fieldValue(h, name)
	if v == "" {
		return nil
	}
	m, _ := parseSF(v, false)
	return m
}

// A small Structured Field parser (RFC 8941, with RFC 9651's Dates): enough to read Lists and
// Dictionaries of Items with Parameters. Inner Lists are parsed and kept as opaque members.

type sfKind uint8

const (
	sfNone sfKind = iota // absent parameter
	sfInteger
	sfDecimal
	sfString
	sfToken
	sfBytes
	sfBoolean
	sfDate
	sfInnerList
)

// sfBare is a bare item: i for Integers, Dates and Booleans, d for Decimals, s for Strings
// and Tokens.
type sfBare struct {
	kind sfKind
	i    int64
	d    float64
	s    string
}

// count is a non-negative Integer as an int.
func (b sfBare) count() (int, bool) {
	if b.kind != sfInteger || b.i < 0 {
		return 0, false
	}
	return int(min(b.i, math.MaxInt)), true
}

// seconds is a non-negative Integer or Decimal.
func (b sfBare) seconds() (float64, bool) {
	switch {
	case b.kind == sfInteger && b.i >= 0:
		return float64(b.i), true
	case b.kind == sfDecimal && b.d >= 0:
		return b.d, true
	}
	return 0, false
}

// window is a positive Integer of seconds as a Duration; 0 otherwise.
func (b sfBare) window() time.Duration {
	if b.kind != sfInteger || b.i <= 0 {
		return 0
	}
	return clampSeconds(float64(b.i))
}

type sfParam struct {
	key string
	val sfBare
}

// sfMember is a List member, or a Dictionary member with its key.
type sfMember struct {
	key    string
	val    sfBare
	params []sfParam
}

// param returns the parameter named key (the last one, if repeated), or a zero sfBare.
func (m *sfMember) param(key string) sfBare {
	for i := len(m.params) - 1; i >= 0; i-- {
		if m.params[i].key == key {
			return m.params[i].val
		}
	}
	return sfBare{}
}

type sfParser struct {
	s string
	i int
}

// parseSF parses s as a List, or as a Dictionary when dict is set. ok is false when s is not
// well-formed; the field must then be ignored as a whole.
func parseSF(s string, dict bool) (members []sfMember, ok bool) {
	p := &sfParser{s: s}
	p.skipOWS()
	for p.i < len(p.s) {
		var m sfMember
		if dict {
			if m.key, ok = p.key(); !ok {
				return nil, false
			}
			if p.peek() == '=' {
				p.i++
				ok = p.member(&m)
			} else {
				m.val = sfBare{kind: sfBoolean, i: 1}
				m.params, ok = p.params()
			}
		} else {
			ok = p.member(&m)
		}
		if !ok || len(members) >= maxSFMembers {
			return nil, false
		}
		members = append(members, m)
		p.skipOWS()
		if p.i == len(p.s) {
			return members, true
		}
		if p.s[p.i] != ',' {
			return nil, false
		}
		p.i++
		p.skipOWS()
		if p.i == len(p.s) {
			return nil, false // trailing comma
		}
	}
	return members, true
}

// maxSFMembers bounds the members kept from one field; a server listing more is not sending
// rate limits.
const maxSFMembers = 64

func (p *sfParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *sfParser) skipOWS() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *sfParser) skipSP() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

// member parses an Item or an Inner List, with its Parameters.
func (p *sfParser) member(m *sfMember) bool {
	if p.peek() == '(' {
		p.i++
		for {
			p.skipSP()
			if p.peek() == ')' {
				p.i++
				break
			}
			if _, ok := p.bare(); !ok {
				return false
			}
			if _, ok := p.params(); !ok {
				return false
			}
			if c := p.peek(); c != ' ' && c != ')' {
				return false
			}
		}
		m.val = sfBare{kind: sfInnerList}
	} else {
		var ok bool
		if m.val, ok = p.bare(); !ok {
			return false
		}
	}
	var ok bool
	m.params, ok = p.params()
	return ok
}

func (p *sfParser) params() ([]sfParam, bool) {
	var ps []sfParam
	for p.peek() == ';' {
		p.i++
		p.skipSP()
		k, ok := p.key()
		if !ok {
			return nil, false
		}
		v := sfBare{kind: sfBoolean, i: 1}
		if p.peek() == '=' {
			p.i++
			if v, ok = p.bare(); !ok {
				return nil, false
			}
		}
		if len(ps) >= maxSFMembers {
			return nil, false
		}
		ps = append(ps, sfParam{k, v})
	}
	return ps, true
}

func (p *sfParser) key() (string, bool) {
	start := p.i
	if c := p.peek(); !(c >= 'a' && c <= 'z' || c == '*') {
		return "", false
	}
	p.i++
	for p.i < len(p.s) {
		c := p.s[p.i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '*') {
			break
		}
		p.i++
	}
	return p.s[start:p.i], true
}

func (p *sfParser) bare() (sfBare, bool) {
	c := p.peek()
	switch {
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case c == '"':
		return p.str()
	case c == '*' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		start := p.i
		p.i++
		for p.i < len(p.s) && (isTchar(p.s[p.i]) || p.s[p.i] == ':' || p.s[p.i] == '/') {
			p.i++
		}
		return sfBare{kind: sfToken, s: p.s[start:p.i]}, true
	case c == ':':
		p.i++
		for p.i < len(p.s) && p.s[p.i] != ':' {
			if !isBase64(p.s[p.i]) {
				return sfBare{}, false
			}
			p.i++
		}
		if p.i == len(p.s) {
			return sfBare{}, false
		}
		p.i++
		return sfBare{kind: sfBytes}, true
	case c == '?':
		if p.i+1 < len(p.s) && (p.s[p.i+1] == '0' || p.s[p.i+1] == '1') {
			v := int64(p.s[p.i+1] - '0')
			p.i += 2
			return sfBare{kind: sfBoolean, i: v}, true
		}
	case c == '@':
		p.i++
		b, ok := p.number()
		if !ok || b.kind != sfInteger {
			return sfBare{}, false
		}
		b.kind = sfDate
		return b, true
	}
	return sfBare{}, false
}

// number parses an Integer (at most 15 digits) or a Decimal (at most 12 digits, a dot, 1 to 3
// digits), so an Integer always fits an int64.
func (p *sfParser) number() (sfBare, bool) {
	start := p.i
	if p.peek() == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	intLen := p.i - digits
	if intLen == 0 {
		return sfBare{}, false
	}
	if p.peek() != '.' {
		if intLen > 15 {
			return sfBare{}, false
		}
		n, err := strconv.ParseInt(p.s[start:p.i], 10, 64)
		return sfBare{kind: sfInteger, i: n}, err == nil
	}
	p.i++
	frac := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	if intLen > 12 || p.i-frac < 1 || p.i-frac > 3 {
		return sfBare{}, false
	}
	d, err := strconv.ParseFloat(p.s[start:p.i], 64)
	return sfBare{kind: sfDecimal, d: d}, err == nil
}

func (p *sfParser) str() (sfBare, bool) {
	p.i++ // opening quote
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '"':
			return sfBare{kind: sfString, s: b.String()}, true
		case c == '\\':
			if p.i == len(p.s) || p.s[p.i] != '"' && p.s[p.i] != '\\' {
				return sfBare{}, false
			}
			b.WriteByte(p.s[p.i])
			p.i++
		case c < 0x20 || c > 0x7e:
			return sfBare{}, false
		default:
			b.WriteByte(c)
		}
	}
	return sfBare{}, false // no closing quote
}

// isTchar reports whether c is an RFC 9110 token character.
func isTchar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// isBase64 reports whether c may appear in a Byte Sequence.
func isBase64(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '='
}
