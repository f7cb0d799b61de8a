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

// ClassifyStatus classifies an HTTP status.
//
//   - 2xx, 3xx: final, Success.
//   - 429 and 503: retryable, Overload (the host said slow down); so are the non-standard
//     codes real servers say it with: 420 (Twitter's "Enhance Your Calm"), 509 (cPanel's and
//     Apache's "Bandwidth Limit Exceeded") and 529 ("Site is overloaded").
//   - 408, 425, 502 and 504: retryable, Failure (a timeout or a struggling upstream: implicit
//     congestion); so are Cloudflare's 520–524 (the origin answered badly, is down, timed out
//     or is unreachable) and the 598/599 some proxies send for a network timeout.
//   - 500: retryable, Neutral: usually one broken page, not load; cutting the host's rate for
//     it would punish the host for a bug.
//   - other 4xx: final, Success (the host served the request normally; it just has no page).
//   - other 5xx and anything else: final, Neutral.
func ClassifyStatus(status int) Class {
	c := Class{Reason: "status-" + strconv.Itoa(status)}
	switch {
	case status >= 200 && status < 400:
		c.Signal = aimd.Success
	case status == 429 || status == 503 || status == 420 || status == 509 || status == 529:
		c.Retryable, c.Signal = true, aimd.Overload
	case status == 408 || status == 425 || status == 502 || status == 504 ||
		(status >= 520 && status <= 524) || status == 598 || status == 599:
		c.Retryable, c.Signal = true, aimd.Failure
	case status == 500:
		c.Retryable, c.Signal = true, aimd.Neutral
	case status >= 400 && status < 500:
		c.Signal = aimd.Success
	default:
		c.Signal = aimd.Neutral
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
