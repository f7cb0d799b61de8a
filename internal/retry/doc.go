// Package retry decides whether and when a failed request is tried again. Its one job: the
// retry policy, as pure functions and one small budget. It holds nine things:
//
//   - Policy: capped exponential backoff with full jitter (a uniformly random wait in
//     [0, min(Cap, Base·2^attempt))), never less than the host's own Retry-After.
//   - ParseRetryAfter: the Retry-After header (delta-seconds or any HTTP-date form
//     net/http accepts), a date measured against the server's own clock so that its skew
//     cancels out: the response's Date header (ServerNow), or the tighter bound a ServerClock
//     learns from the Date headers of many responses (a Date is truncated to the second).
//   - ParseRateLimit: the quota a server advertises before it refuses anything (RateLimit and
//     RateLimit-Policy of draft-ietf-httpapi-ratelimit-headers, the earlier drafts'
//     RateLimit-Limit/-Remaining/-Reset, the de-facto X-RateLimit-*), so that the crawl can
//     stop when the quota is spent instead of drawing a 429 to learn it. The draft's
//     Structured Fields (RFC 9651) are parsed by github.com/dunglas/httpsfv.
//   - PolicyReader: the policy those headers state (quota per window), the window inferred
//     from the resets when only a limit is named, headers that contradict themselves
//     ignored; it sets the host's rate (aimd.Outcome.Stated), and a spent quota that is a
//     refilling bucket's pauses the host one token, not until a rounded reset. A limit whose
//     window is not read states no rate, and its spent quota pauses only when it is known to
//     be a count (or on a refusal): otherwise the host is learned as if it stated nothing.
//   - Windows: how long a spent quota really lasts when its reset is rounded up to whole
//     seconds and the host's fixed windows end their length after their first request
//     (express-rate-limit's and most others), tried once per host and dropped if refused.
//   - HostClock: one host's ServerClock, Windows and PolicyReader, and Read, which reads one
//     response with them (Retry-After, a spent quota, a stated policy) into how long to leave
//     the host alone and the rate it states: the one reading the crawler and hostlimit's
//     Transport share.
//   - KindOf, ClassifyStatus and ClassifyError: what an HTTP status says about its host (a
//     StatusKind, the crawl's one reading of status codes), which outcomes are worth
//     retrying, and what each one tells the host's rate controller (an aimd.Signal).
//   - Budget: a retry token bucket in the style of the AWS SDKs' retry quota: retries cost
//     tokens, first-try successes earn them back, so that a host (or the whole crawl) that
//     fails everything cannot triple its own load with retries; a small floor of retries per
//     interval lets a quiet host still retry. An empty budget defers a URL, it never drops it.
//   - Unanswered: one host's run of requests that got no answer (NoAnswer: a timeout, a
//     refused or reset connection), and when it gives the host up: UnansweredLimit in a row,
//     those in flight together counted once, so that a host that never answers costs a
//     bounded number of requests instead of --max-attempts per URL.
//
// Time and randomness come in as arguments (now time.Time, *rand.Rand), so every decision is
// deterministic under test.
//
// # Why written by hand
//
// Full jitter is one line, and the retry libraries around (cenkalti/backoff and others) bring
// their own sleep loops, clocks and randomness, where the crawl needs a pure function of the
// attempt number. The simulation in brooker_test.go reproduces Marc Brooker's "Exponential
// Backoff and Jitter" (AWS Architecture Blog, 2015) with this package's Policy to show why full
// jitter is the choice: far fewer calls and far less time than un-jittered exponential backoff
// when many clients contend.
package retry
