package retry

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ParseRetryAfter parses a Retry-After header value (RFC 9110 §10.2.3): delta-seconds, or an
// HTTP-date in any of the three forms http.ParseTime accepts (IMF-fixdate, RFC 850, asctime).
//
// An HTTP-date is a time on the server's clock, and is measured against ref, the server's
// clock now: ServerNow (the response's Date header, so that the server's skew against ours
// cancels out) or, tighter, a ServerClock's Now.
//
// It returns ok = false for an empty, malformed or negative value. A date in the past gives
// (0, true). Huge values are kept (saturating at the largest time.Duration); capping them is
// the caller's call.
func ParseRetryAfter(value string, ref time.Time) (wait time.Duration, ok bool) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, false
	}
	if isDigits(value) {
		secs, err := strconv.ParseUint(value, 10, 64)
		if err != nil || secs > uint64(math.MaxInt64/int64(time.Second)) {
			return time.Duration(math.MaxInt64), true // only overflow fails on digits
		}
		return time.Duration(secs) * time.Second, true
	}
	at, err := http.ParseTime(value)
	if err != nil {
		return 0, false
	}
	return max(at.Sub(ref), 0), true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
