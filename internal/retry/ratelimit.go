package retry

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dunglas/httpsfv"
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
	// ResetAt is the reset as the time on the server's clock the header named, when it named
	// one (a Unix time, as X-RateLimit-Reset often is); zero when it named a delay.
	ResetAt time.Time
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
//   - The de-facto X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset; the limit
//     is a plain number, or the earlier drafts' form with its window (`100, 100;w=60`).
//
// A reset above 1e9 seconds is a Unix time (X-RateLimit-Reset on GitHub; a delay of 31 years
// means the same mistake in any of the fields), a time on the server's clock, and is measured
// against ref, the server's clock now (see ParseRetryAfter). A reset in the past is 0.
//
// Malformed Structured Fields are ignored whole, as RFC 8941 says; a garbage, negative or
// overflowing plain value ignores that one header. ok is false when no usable remaining count
// is found, and q is then the zero Quota.
func ParseRateLimit(h http.Header, ref time.Time) (q Quota, ok bool) {
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
	v := h.Values("RateLimit")
	if len(v) == 0 {
		return Quota{}, false
	}
	if items, err := httpsfv.UnmarshalList(v); err == nil {
		return serviceLimits(items, h, ref)
	}
	d, err := httpsfv.UnmarshalDictionary(v)
	if err != nil {
		return Quota{}, false
	}
	var q Quota
	get := func(key string) any { // a repeated key keeps its last value, as for any Dictionary
		if m, ok := d.Get(key); ok {
			return itemValue(m)
		}
		return nil
	}
	r, ok := count(get("remaining"))
	if !ok {
		return Quota{}, false
	}
	q.Remaining = r
	if s, ok := seconds(get("reset")); ok {
		q.Reset, q.ResetAt = resetAfter(s, ref)
	}
	q.Limit, _ = count(get("limit"))
	q.Window = windowOf(q.Limit, sfList(h, "RateLimit-Policy"))
	return q, true
}

// serviceLimits picks the most restrictive of a RateLimit List's service limits and the
// RateLimit-Policy that goes with it.
func serviceLimits(items httpsfv.List, h http.Header, ref time.Time) (Quota, bool) {
	var q Quota
	name, found := "", false
	for _, it := range items {
		n, ok := itemName(it)
		if !ok {
			continue
		}
		r, ok := count(param(it, "r"))
		if !ok {
			continue
		}
		var reset time.Duration
		var at time.Time
		if s, ok := seconds(param(it, "t")); ok {
			reset, at = resetAfter(s, ref)
		}
		if !found || r < q.Remaining || r == q.Remaining && reset > q.Reset {
			q.Remaining, q.Reset, q.ResetAt, name, found = r, reset, at, n, true
		}
	}
	if !found {
		return Quota{}, false
	}
	var best *policy
	for _, it := range sfList(h, "RateLimit-Policy") {
		n, ok := itemName(it)
		if !ok {
			continue
		}
		quota, ok := count(param(it, "q"))
		if !ok {
			continue
		}
		p := &policy{quota: quota, window: window(param(it, "w"))}
		if n == name {
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
	for _, m := range sfList(h, "RateLimit-Remaining") {
		if r, ok := count(itemValue(m)); ok && (!found || r < q.Remaining) {
			q.Remaining, found = r, true
		}
	}
	if !found {
		return Quota{}, false
	}
	if m := sfList(h, "RateLimit-Reset"); len(m) == 1 {
		if s, ok := seconds(itemValue(m[0])); ok {
			q.Reset, q.ResetAt = resetAfter(s, ref)
		}
	}
	limit := sfList(h, "RateLimit-Limit")
	if len(limit) > 0 {
		if n, ok := count(itemValue(limit[0])); ok {
			q.Limit = n
			q.Window = window(param(limit[0], "w"))
		}
	}
	if q.Window == 0 && len(limit) > 1 {
		q.Window = windowOf(q.Limit, limit[1:])
	}
	if q.Window == 0 {
		q.Window = windowOf(q.Limit, sfList(h, "RateLimit-Policy"))
	}
	return q, true
}

// windowOf returns the window of the first policy of the form `quota;w=seconds` (drafts up to
// 07) whose quota is limit, or 0.
func windowOf(limit int, policies httpsfv.List) time.Duration {
	if limit <= 0 {
		return 0
	}
	for _, p := range policies {
		if n, ok := count(itemValue(p)); ok && n == limit {
			if w := window(param(p, "w")); w > 0 {
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
	if n, ok := plainCount(h.Get("X-RateLimit-Limit")); ok {
		q.Limit = n
	} else if l := sfList(h, "X-RateLimit-Limit"); len(l) > 0 {
		// Some gateways send the earlier drafts' form here: `100;w=60` or `100, 100;w=60`.
		if n, ok := count(itemValue(l[0])); ok {
			q.Limit, q.Window = n, window(param(l[0], "w"))
			if q.Window == 0 {
				q.Window = windowOf(n, l[1:])
			}
		}
	}
	if s, ok := plainSeconds(h.Get("X-RateLimit-Reset")); ok {
		q.Reset, q.ResetAt = resetAfter(s, ref)
	}
	return q, true
}

// resetAfter turns a reset value in seconds (a delay, or above epochThreshold a Unix time
// measured against ref) into a delay in [0, maxQuotaDelay], and the Unix time itself (zero
// for a delay).
func resetAfter(secs float64, ref time.Time) (time.Duration, time.Time) {
	if secs > epochThreshold {
		whole, frac := math.Modf(secs)
		at := time.Unix(int64(whole), int64(frac*1e9))
		return clampSeconds(secs - float64(ref.Unix()) - float64(ref.Nanosecond())/1e9), at
	}
	return clampSeconds(secs), time.Time{}
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

// sfList parses a field as a Structured Field List (its lines joined, RFC 9651 §4.2); nil when
// absent or malformed.
func sfList(h http.Header, name string) httpsfv.List {
	v := h.Values(name)
	if len(v) == 0 {
		return nil
	}
	l, err := httpsfv.UnmarshalList(v)
	if err != nil {
		return nil
	}
	return l
}

// itemName returns the String or Token an Item names (a service limit's or policy's name).
func itemName(m httpsfv.Member) (string, bool) {
	it, ok := m.(httpsfv.Item)
	if !ok {
		return "", false
	}
	switch v := it.Value.(type) {
	case string:
		return v, true
	case httpsfv.Token:
		return string(v), true
	}
	return "", false
}

// itemValue returns a List member's bare value (nil for an Inner List).
func itemValue(m httpsfv.Member) any {
	if it, ok := m.(httpsfv.Item); ok {
		return it.Value
	}
	return nil
}

// param returns parameter key of a List member, nil if it has none.
func param(m httpsfv.Member, key string) any {
	var ps *httpsfv.Params
	switch m := m.(type) {
	case httpsfv.Item:
		ps = m.Params
	case httpsfv.InnerList:
		ps = m.Params
	}
	if ps == nil {
		return nil
	}
	v, _ := ps.Get(key)
	return v
}

// count is a non-negative Integer as an int.
func count(v any) (int, bool) {
	i, ok := v.(int64)
	if !ok || i < 0 {
		return 0, false
	}
	return int(min(i, math.MaxInt)), true
}

// seconds is a non-negative Integer or Decimal.
func seconds(v any) (float64, bool) {
	switch v := v.(type) {
	case int64:
		return float64(v), v >= 0
	case float64:
		return v, v >= 0
	}
	return 0, false
}

// window is a positive Integer of seconds as a Duration; 0 otherwise.
func window(v any) time.Duration {
	if i, ok := v.(int64); ok && i > 0 {
		return clampSeconds(float64(i))
	}
	return 0
}
