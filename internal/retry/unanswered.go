package retry

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// A host that stops answering (it accepts and never answers, drips a byte a second, refuses
// or resets every connection) is given up once UnansweredLimit of its requests in a row went
// unanswered, with no answer in between: each sent after the one counted before it ended, so
// that requests that ran at the same time count once, of at least UnansweredURLs distinct
// URLs, and spanning at least UnansweredLimit × the request timeout from the first one sent.
// A run not extended for UnansweredMemory is forgotten. docs/guarantees.md states the bound.
const (
	UnansweredLimit  = 8
	UnansweredURLs   = 4
	UnansweredMemory = 10 * time.Minute
)

// maxCause bounds the error kept from a run's last request.
const maxCause = 512

// NoAnswer reports whether a failed request of kind (a fetch error kind, as ClassifyError
// takes) got no answer from its host: a timeout, or a connection refused or reset.
func NoAnswer(kind string) bool {
	return kind == "timeout" || kind == "conn-refused" || kind == "conn-reset"
}

// Unanswered is one host's current run of requests that got no answer (see UnansweredLimit).
// The zero value is an empty run. It is not safe for concurrent use: the caller serializes.
type Unanswered struct {
	count   int       // requests counted: each sent after the one before it ended
	first   time.Time // when the first one counted was sent
	lastEnd time.Time // when the last one counted ended
	urls    []string  // the distinct URLs counted, at most UnansweredURLs
	reason  string    // the last one's kind ("timeout", "conn-refused", "conn-reset")
	cause   string    // the last one's error
	gaveUp  bool
}

// Failed records a request for url, sent at sent, that ended at ended without an answer:
// reason is its kind and cause its error; timeout is the request timeout. It reports whether
// this request gave the host up (false if it was given up before).
func (u *Unanswered) Failed(url string, sent, ended time.Time, timeout time.Duration, reason, cause string) bool {
	if len(cause) > maxCause {
		cause = strings.ToValidUTF8(cause[:maxCause], "") + "…"
	}
	u.reason, u.cause = reason, cause
	if u.count > 0 && sent.Before(u.lastEnd) {
		return false // it ran alongside the one counted last: the same silence
	}
	if u.count == 0 {
		u.first = sent
	}
	u.count++
	u.lastEnd = ended
	if len(u.urls) < UnansweredURLs && !slices.Contains(u.urls, url) {
		u.urls = append(u.urls, url)
	}
	if u.gaveUp || u.count < UnansweredLimit || len(u.urls) < UnansweredURLs ||
		ended.Sub(u.first) < UnansweredLimit*max(timeout, 0) {
		return false
	}
	u.gaveUp = true
	return true
}

// Answered ends the run: the host answered (any response). A host given up is taken back.
func (u *Unanswered) Answered() { *u = Unanswered{} }

// GivenUp reports whether the host is given up: its requests are not sent.
func (u *Unanswered) GivenUp() bool { return u.gaveUp }

// Reason is the kind of the last request counted, "" for an empty run.
func (u *Unanswered) Reason() string { return u.reason }

// Forgettable reports whether the run says nothing at now: it is empty, or it is not given up
// and nothing extended it for UnansweredMemory.
func (u *Unanswered) Forgettable(now time.Time) bool {
	return u.count == 0 || !u.gaveUp && now.Sub(u.lastEnd) >= UnansweredMemory
}

// String says what the run was, for a failure's detail and the log: "8 requests in a row
// without an answer over 1m4s (last: timeout: …)".
func (u *Unanswered) String() string {
	return fmt.Sprintf("%d requests in a row without an answer over %s (last: %s)",
		u.count, u.lastEnd.Sub(u.first).Round(100*time.Millisecond), u.cause)
}
