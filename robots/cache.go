package robots

import "time"

// DefaultTTL is how long a fetched robots.txt is used before it is fetched again. RFC 9309 §2.4:
// crawlers SHOULD NOT use a cached copy for more than 24 hours unless it is unreachable.
const DefaultTTL = 24 * time.Hour

// UnreachableGrace is how long a host's robots.txt may stay unreachable before Effective stops
// answering "disallow all" for it (RFC 9309 §2.3.1.4: "more than 30 days").
const UnreachableGrace = 30 * 24 * time.Hour

// Backoff bounds for re-fetching an unreachable robots.txt (see NextCheck).
const (
	retryFirst = time.Minute
	retryMax   = time.Hour
)

// NextCheck says when a host's robots.txt must be fetched again, given when it was last
// fetched, that fetch's status (0 for a network error or timeout, as for FromResponse) and
// failures, the number of consecutive unreachable results ending with this one.
//
//   - Usable result (2xx, leftover 3xx, 4xx except 429): fetchedAt + ttl. A ttl that is not
//     positive or exceeds DefaultTTL is replaced by DefaultTTL (RFC 9309 §2.4), so a caller
//     may pass a shorter HTTP cache lifetime but never a longer one.
//   - Unreachable result (429, 5xx, anything else): fetchedAt + 1m·2^(failures-1), capped at
//     1h: 1m, 2m, 4m, 8m, 16m, 32m, 1h, 1h, … . failures < 1 counts as 1. The host stays
//     disallow-all meanwhile (see Effective); a Retry-After on a 429/503 may push the time
//     further out, which is the caller's business.
//
// NextCheck is pure: same arguments, same answer.
func NextCheck(fetchedAt time.Time, status int, failures int, ttl time.Duration) time.Time {
	if statusClass(status) != classUnreachable {
		if ttl <= 0 || ttl > DefaultTTL {
			ttl = DefaultTTL
		}
		return fetchedAt.Add(ttl)
	}
	d := retryFirst
	for i := 1; i < failures && d < retryMax; i++ {
		d *= 2
	}
	return fetchedAt.Add(min(d, retryMax))
}

// Effective returns the rules to obey for a host at now.
//
// latest is the result of the most recent fetch (nil if none has completed). If it is not
// Unreachable it is the answer. Otherwise the host has been unreachable since
// unreachableSince (the time of the first unreachable result of the current run), and:
//   - for up to UnreachableGrace (30 days, inclusive), or if unreachableSince is zero: the
//     answer is disallow all (RFC 9309 §2.3.1.4);
//   - after that: lastGood, the most recent result that was not Unreachable, if there is one,
//     else allow all (the RFC lets a crawler either keep a cached copy or treat the file as
//     unavailable; this package does the first when it can).
func Effective(latest *Robots, unreachableSince time.Time, lastGood *Robots, now time.Time) *Robots {
	if latest != nil && !latest.Unreachable() {
		return latest
	}
	if unreachableSince.IsZero() || now.Sub(unreachableSince) <= UnreachableGrace {
		if latest != nil {
			return latest
		}
		return DisallowAll()
	}
	if lastGood != nil && !lastGood.Unreachable() {
		return lastGood
	}
	return AllowAll()
}
