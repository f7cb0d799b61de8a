package retry

import (
	"math"
	"net/http"
	"time"
)

// Stated is a rate limit a host states as a policy: Quota requests per Window. The zero value
// states nothing.
type Stated struct {
	Quota  int
	Window time.Duration
	// Inferred: the window was not stated but read from the resets (see PolicyReader).
	Inferred bool
}

// Rate is the stated rate in req/s; 0 for the zero Stated.
func (s Stated) Rate() float64 {
	if s.Quota <= 0 || s.Window <= 0 {
		return 0
	}
	return float64(s.Quota) / s.Window.Seconds()
}

// Interval is the time a refilling bucket of the stated rate takes to give one request back:
// Window/Quota (0 for the zero Stated).
func (s Stated) Interval() time.Duration {
	if s.Quota <= 0 || s.Window <= 0 {
		return 0
	}
	return s.Window / time.Duration(s.Quota)
}

const (
	// maxStatedQuota: a quota above this is garbage (no server counts a billion requests per
	// window for one client), and bounding it keeps Interval away from 0.
	maxStatedQuota = 1_000_000_000
	// resetRounding: a reset is named in whole seconds, rounded up; with the jitter of the
	// trip, a reset may exceed what it rounds by up to this much.
	resetRounding = time.Second + windowMargin
	// formsAgree: two forms of the headers on one answer (RateLimit and X-RateLimit-*) that
	// state rates further apart than this factor contradict each other.
	formsAgree = 1.1
)

// inferable are the windows PolicyReader may infer for a limit stated without one, shortest
// first, each from a reset longer than above and no longer than the window (plus rounding): a
// minute and an hour, the windows of most de-facto X-RateLimit-* quotas (GitHub's is an hour,
// most gateways' a minute). A reset of half a minute or less tells nothing: it is as often a
// window of a few seconds (its end rounded up to a whole second and read against a server
// clock known to a second: a 2-s window names resets of up to 4 s) or a refilling bucket's
// next token as a minute's last moments, and a 2-s window read as a minute would pace the host
// at a thirtieth of its quota, which no refusal ever corrects.
var inferable = []struct{ above, window time.Duration }{
	{30 * time.Second, time.Minute},
	{time.Minute + resetRounding, time.Hour},
}

// PolicyReader reads the policy a host's answers state (ReadPolicy) and remembers what it
// needs to infer a window the headers leave out. The zero value is ready to use. A
// PolicyReader is not safe for concurrent use.
type PolicyReader struct {
	// longest is the longest reset named with a limit but no window (X-RateLimit-Limit alone),
	// on answers that did not contradict themselves.
	longest time.Duration
	// most is the most remaining any answer stating a policy has shown.
	most int
	// counted: an answer stating a limit has shown more than half of it left, its own
	// request included (see counts).
	counted bool
	// refusals counts refusals that said the quota was spent; at tokenRefusals the host's
	// spent quotas are never read as a bucket's (spentPause).
	refusals int
	// spentAt and spentUntil: when the latest answer saying the quota was spent came, and the
	// reset it named, on our clock (see answered).
	spentAt, spentUntil time.Time
	// refuted: the host's answers showed that its resets do not say when its quota comes
	// back (see answered).
	refuted bool
}

// tokenRefusals: this many refusals with a spent quota show that the host's spent quotas are
// not a bucket's momentary emptiness; as many as the stated limit's own trust allows (aimd).
const tokenRefusals = 2

// Read returns the policy the answer's headers state, as the first form ParseRateLimit reads
// (RateLimit and RateLimit-Policy, the earlier drafts' RateLimit-Limit with its `w`, or
// X-RateLimit-Limit, plain or with a `w` parameter). A limit stated without a window has one
// inferred from the longest reset seen with it so far: a reset of more than 30 s and at most a
// minute means a minute, longer and at most an hour an hour; any other leaves the window
// unknown and ok false. ref is the server's clock now, as for ParseRateLimit.
//
// The headers are ignored (ok false) when they contradict themselves: more remaining than the
// quota, a reset further than the window (plus the rounding of a whole-second reset), or the
// RateLimit and X-RateLimit-* forms stating rates more than 10% apart. A quota above a billion
// is ignored as garbage. A stated rate above what the caller allows is the caller's to cap.
func (p *PolicyReader) Read(h http.Header, ref time.Time) (Stated, bool) {
	main, mok := parseRateLimitField(h, ref)
	if !mok {
		main, mok = parseDraftFields(h, ref)
	}
	x, xok := parseXFields(h, ref)
	if mok && !consistent(main) || xok && !consistent(x) {
		return Stated{}, false
	}
	var ms, xs Stated
	var mgood, xgood bool
	if mok {
		ms, mgood = p.policyOf(main)
	}
	if xok {
		xs, xgood = p.policyOf(x)
	}
	switch {
	case mgood && xgood:
		if a, b := ms.Rate(), xs.Rate(); max(a, b) > formsAgree*min(a, b) {
			return Stated{}, false
		}
		p.most = max(p.most, main.Remaining)
		return ms, true
	case mgood:
		p.most = max(p.most, main.Remaining)
		return ms, true
	case xgood:
		p.most = max(p.most, x.Remaining)
		return xs, true
	}
	return Stated{}, false
}

// consistent reports whether q does not contradict itself: no more remaining than its limit,
// and no reset further than its window.
func consistent(q Quota) bool {
	if q.Limit > 0 && q.Remaining > q.Limit {
		return false
	}
	return q.Window <= 0 || q.Reset <= q.Window+resetRounding
}

// policyOf turns one form's quota into a policy, inferring a missing window (see Read).
func (p *PolicyReader) policyOf(q Quota) (Stated, bool) {
	if q.Limit <= 0 || q.Limit > maxStatedQuota || !consistent(q) {
		return Stated{}, false
	}
	if q.Window > 0 {
		return Stated{Quota: q.Limit, Window: q.Window}, true
	}
	p.longest = max(p.longest, q.Reset)
	for _, w := range inferable {
		if p.longest > w.above && p.longest <= w.window+resetRounding {
			return Stated{Quota: q.Limit, Window: w.window, Inferred: true}, true
		}
	}
	return Stated{}, false
}

// tokenReset: a reset no further than this may be a refilling bucket's next token as well as
// a quota's end: a reset rounded up to a whole second, read against a server clock known to a
// second.
const tokenReset = 2 * resetRounding

// spentPause decides how long to leave a host alone when its answer says quota q is spent,
// under the policy s it states (the zero Stated when it states none it can be read by). With
// untilReset true the quota's end is waited for (Windows.Resume); otherwise the pause is
// pause, which may be 0.
//
// Under a stated policy, a refilling bucket's momentary emptiness pauses one Interval, the
// time the bucket takes to give one request back. It is one when the reset q names is no
// further than a token of s rounded up to whole seconds (waiting for the rounded reset would
// cost up to a second per token), or when no answer has shown even half the quota remaining
// (what remains is a bucket's burst, not a fixed window's count, which starts at the quota
// less one). Otherwise, or once tokenRefusals refusals came with a spent quota, the quota is a
// window's, and its end is waited for.
//
// When no policy is read, nothing tells how soon a bucket gives a request back, and a wait
// for its reset (a whole second, rounded up) would pace a bucket of 10 req/s at one: the
// reset is waited for only when the quota is known to be a count spent down from its limit
// (counts), on a refusal (refused: 429, 503 and their kin), or, with a reset further than
// tokenReset, after a refusal that came with a spent quota. Otherwise there is no pause: the
// host's rate is learned as if nothing were stated, and its refusals teach it.
//
// Once the host's answers have refuted its resets (answered), none is waited for: a spent
// quota pauses one Interval under a policy, nothing without one, and the host's refusals
// (their Retry-After, the rate's decrease) teach the rest.
func (p *PolicyReader) spentPause(s Stated, q Quota, refused bool) (pause time.Duration, untilReset bool) {
	iv := s.Interval()
	if p.refuted {
		return iv, false
	}
	if iv <= 0 {
		return 0, refused || p.counted || p.refusals > 0 && q.Reset > tokenReset
	}
	if p.refusals >= tokenRefusals {
		return 0, true
	}
	whole := time.Duration(math.Ceil(iv.Seconds())) * time.Second
	if q.Reset > whole+windowMargin && 2*p.most >= s.Quota {
		return 0, true
	}
	return iv, false
}

// counts records the quota q an answer states (the form ParseRateLimit reads) for spentPause:
// an answer that stated a limit and showed more than half of it left, its own request
// included, shows the quota is a count spent down from that limit, as a fixed window's first
// answer does (the limit less one left), and not a bucket's burst, which is a small part of a
// limit stated per minute or per hour. A quota that contradicts itself shows nothing.
func (p *PolicyReader) counts(q Quota) {
	if q.Limit > 0 && consistent(q) && 2*(q.Remaining+1) > q.Limit {
		p.counted = true
	}
}

// refusedSpent records a refusal whose answer said the quota was spent.
func (p *PolicyReader) refusedSpent() { p.refusals++ }

// spent records an answer, received at received (our clock), that said the quota is spent
// until reset from now.
func (p *PolicyReader) spent(received, until time.Time) {
	p.spentAt, p.spentUntil = received, until
}

// answered records an accepted answer (no refusal, no error status), stating quota q, to a
// request sent at sent (our clock). Either of two such answers refutes the host's resets for
// good, since its quota does not come back when they say: a request sent after the latest
// spent answer came and more than tokenReset before the reset it named (a fixed window's reset
// is its end rounded up to a whole second, so a request sent that early is refused, never
// accepted); or the first request sent after that reset to be answered, when a quota of more
// than one is whole again, spent by that one request. An answer with quota left shows the
// quota came back, and neither applies until the next spent answer. Such resets are a limit's
// other window (a bucket's emptiness named with a minute's end) or no limit at all, and
// waiting for them would cost up to a whole window per request.
func (p *PolicyReader) answered(sent time.Time, q Quota) {
	if p.spentAt.IsZero() || !sent.After(p.spentAt) {
		return
	}
	switch {
	case sent.Before(p.spentUntil.Add(-tokenReset)):
		p.refuted = true
	case q.Remaining > 0:
		p.spentAt, p.spentUntil = time.Time{}, time.Time{} // the quota came back
	case !sent.Before(p.spentUntil) && q.Limit > 1:
		p.refuted = true
	}
}
