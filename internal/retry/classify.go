package retry

import (
	"strconv"

	"github.com/crawl-project/crawl/aimd"
)

// Class is the verdict on one outcome: whether to retry it, and what it tells the host's rate
// controller.
type Class struct {
	Retryable bool
	Signal    aimd.Signal
	Reason    string // short and stable, for logs and failure records: "status-503", "timeout", ...
}

// StatusKind is what an HTTP status says about the host that answered it. KindOf is the
// crawl's one reading of status codes: the retry policy (ClassifyStatus), the pause a
// response puts on its host, the robots.txt fetch's signal, the reading of 403s and the
// crawl's counters all start from it.
type StatusKind int

const (
	// NoResponse is status 0: the request ended without a response (a transport error).
	NoResponse StatusKind = iota
	// Served is 2xx and 3xx: the host served the request normally.
	Served
	// ClientError is a 4xx other than those below: served normally, with no page (403, 404, 410, …).
	ClientError
	// TooMany is 429 and 420 (Twitter's "Enhance Your Calm"): the client sends too much; slow down.
	TooMany
	// Overloaded is 503, 509 (cPanel's and Apache's "Bandwidth Limit Exceeded") and 529 ("Site
	// is overloaded"): the server is over capacity; slow down.
	Overloaded
	// TimedOut is 408 (Request Timeout) and 425 (Too Early): the host did not take the request
	// this time.
	TimedOut
	// BadGateway is 502, 504, Cloudflare's 520–524 (the origin answered badly, is down, timed
	// out or is unreachable) and the 598/599 some proxies send for a network timeout: a
	// struggling upstream.
	BadGateway
	// ServerError is 500 and every other 5xx.
	ServerError
	// Unknown is 1xx and any code outside 100–599.
	Unknown
)

// KindOf returns what status says about the host (0 for a request without a response).
func KindOf(status int) StatusKind {
	switch {
	case status == 0:
		return NoResponse
	case status >= 200 && status < 400:
		return Served
	case status == 429 || status == 420:
		return TooMany
	case status == 503 || status == 509 || status == 529:
		return Overloaded
	case status == 408 || status == 425:
		return TimedOut
	case status == 502 || status == 504 || (status >= 520 && status <= 524) || status == 598 || status == 599:
		return BadGateway
	case status >= 400 && status < 500:
		return ClientError
	case status >= 500 && status < 600:
		return ServerError
	}
	return Unknown
}

var kindNames = [...]string{"no-response", "served", "client-error", "too-many", "overloaded",
	"timed-out", "bad-gateway", "server-error", "unknown"}

// String returns the kind's name, for logs and tests.
func (k StatusKind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return "StatusKind(" + strconv.Itoa(int(k)) + ")"
	}
	return kindNames[k]
}

// SlowDown reports whether the host said "slow down" (TooMany or Overloaded).
func (k StatusKind) SlowDown() bool { return k == TooMany || k == Overloaded }

// Failed reports whether the request counts as an error in the crawl's counters: no response,
// a struggling upstream, a server error, or a status outside HTTP's. A "slow down" and a 4xx
// (408 and 425 included) are not errors.
func (k StatusKind) Failed() bool {
	return k == NoResponse || k == BadGateway || k == ServerError || k == Unknown
}

// ClassifyStatus classifies an HTTP status by its kind (KindOf).
//
//   - Served, ClientError: final, Success (the host served the request normally).
//   - TooMany, Overloaded: retryable, Overload (the host said slow down).
//   - TimedOut, BadGateway: retryable, Failure (implicit congestion).
//   - ServerError: final, Neutral, except 500: retryable, Neutral (usually one broken page,
//     not load; cutting the host's rate for it would punish the host for a bug).
//   - NoResponse, Unknown: final, Neutral.
func ClassifyStatus(status int) Class {
	c := Class{Signal: aimd.Neutral, Reason: "status-" + strconv.Itoa(status)}
	switch KindOf(status) {
	case Served, ClientError:
		c.Signal = aimd.Success
	case TooMany, Overloaded:
		c.Retryable, c.Signal = true, aimd.Overload
	case TimedOut, BadGateway:
		c.Retryable, c.Signal = true, aimd.Failure
	case ServerError:
		c.Retryable = status == 500
	}
	return c
}

// ClassifyError classifies a failed fetch by its error kind name (fetch.ErrorKind.String()):
//
//   - "timeout", "conn-reset", "conn-refused": retryable, Failure (the host may be overloaded).
//   - "dns": retryable, Neutral (resolution failures are often transient, and say nothing about
//     the host's load).
//   - "canceled": retryable, Neutral (we stopped it; the URL did nothing wrong).
//   - "tls", "protocol" and anything else ("other"): final, Neutral (a retry gets the same).
//
// The Reason is the kind name ("other" for unknown names).
func ClassifyError(kind string) Class {
	switch kind {
	case "timeout", "conn-reset", "conn-refused":
		return Class{Retryable: true, Signal: aimd.Failure, Reason: kind}
	case "dns", "canceled":
		return Class{Retryable: true, Signal: aimd.Neutral, Reason: kind}
	case "tls", "protocol":
		return Class{Signal: aimd.Neutral, Reason: kind}
	}
	return Class{Signal: aimd.Neutral, Reason: "other"}
}
