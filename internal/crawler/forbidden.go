package crawler

import (
	"net/http"
	"time"

	"github.com/crawl-project/crawl/aimd"
	"github.com/crawl-project/crawl/internal/retry"
)

// A host that bans a client (Apache's mod_evasive, a WAF, a CDN's rate rule) answers 403 to
// everything for a while, with no 429 and no Retry-After, and some restart the ban with every
// request that arrives during it. Taken at its word, every page sent during the ban would be
// stored as a 403 and never fetched, and the pages only they link to never found.
//
// So a 403 from a host that has answered a page 2xx lately (while its hostAnswers are kept) is
// not final at once: the URL is retried (forbiddenRetries times). The first 403 after a 2xx
// says nothing about load (a site has forbidden pages); from the second in a row on, while the
// run of 403s (no ordinary answer between: a 2xx, a redirect, a 404) is younger than
// forbiddenBlockTime, each is an Overload for the host's controller, which backs off as for
// any run of refusals, spacing its requests out exponentially, and at the first 2xx returns to
// what the host accepted. A run that outlasts forbiddenBlockTime is a host, or a part of it,
// that forbids those pages for real: its 403s are final answers again, so a large forbidden
// section costs two retries a page and one back-off, not the crawl.
const (
	forbiddenRetries   = 2
	forbiddenBlockTime = time.Minute
)

// hostAnswers is what the crawl keeps of how one host answered: whether it is serving, the
// reading of its 403s that may be a ban, and its requests that went unanswered. It outlives
// the host's record (a host waiting out a ban, a Retry-After or its pace sits idle long enough
// for its record to be dropped) and is dropped by forgetAnswers once it says nothing any more:
// no normal answer within servingWindow, no run of 403s younger than forbiddenBlockTime, and
// an unanswered run that is forgettable. hostAnswers requires Crawler.mu to be held.
type hostAnswers struct {
	normal     time.Time        // its last normal answer: a page 2xx, or its robots.txt answered as usual
	served     bool             // it has answered a page 2xx since this record was made
	run        int              // 403 answers since the last ordinary answer
	runStart   time.Time        // when the first of them came
	unanswered retry.Unanswered // its requests unanswered since its last answer (unanswered.go)
}

// servingWindow: a host that answered normally this recently (a page 2xx, or its robots.txt,
// 404 included) is serving; its refusals are throttling (see throttledAttempts), not an outage.
const servingWindow = time.Minute

// serving reports whether host answered normally within servingWindow before now.
func (c *Crawler) serving(host string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.answers[host]
	return a != nil && now.Sub(a.normal) < servingWindow
}

// answeredRobots notes that host answered its robots.txt normally at now (see serving). It is
// not a page served: a 403 is read as a ban only after one (classifyForbidden).
func (c *Crawler) answeredRobots(host string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hostLocked(host) // marks the record used
	a := c.answersLocked(host)
	a.normal = now
	a.unanswered.Answered()
}

// answersLocked returns host's answers, made on first use. It requires c.mu to be held.
func (c *Crawler) answersLocked(host string) *hostAnswers {
	a := c.answers[host]
	if a == nil {
		if c.answers == nil {
			c.answers = map[string]*hostAnswers{}
		}
		a = &hostAnswers{}
		c.answers[host] = a
	}
	return a
}

// forgetAnswers drops the answers that no longer say anything at now: no normal answer within
// servingWindow, no run of 403s younger than forbiddenBlockTime, an unanswered run that is
// forgettable (retry.Unanswered.Forgettable). It requires c.mu to be held.
func (c *Crawler) forgetAnswers(now time.Time) {
	for host, a := range c.answers {
		if now.Sub(a.normal) >= servingWindow && (a.run == 0 || now.Sub(a.runStart) >= forbiddenBlockTime) &&
			a.unanswered.Forgettable(now) {
			delete(c.answers, host)
		}
	}
}

// classifyForbidden returns the class of a page answer with status from host at now, whose
// URL had been tried attempts times before: cl (ClassifyStatus's verdict) for anything but a
// 403 that may be a ban, which is retried and may tell the host's controller to back off.
func (c *Crawler) classifyForbidden(host string, status, attempts int, now time.Time, cl retry.Class) retry.Class {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case status == http.StatusForbidden:
	case status >= 200 && status < 300:
		a := c.answersLocked(host)
		a.normal, a.served, a.run = now, true, 0
		return cl
	case status < 500 && !retry.KindOf(status).SlowDown():
		if a := c.answers[host]; a != nil {
			a.run = 0 // answered as usual (a redirect, a 404): the host is not banning us
		}
		return cl
	default:
		return cl
	}
	st := c.answers[host]
	if st == nil || !st.served {
		return cl // a host that has served nothing: its 403 is all we know of it
	}
	if st.run == 0 {
		st.runStart = now
	}
	st.run++
	if now.Sub(st.runStart) >= forbiddenBlockTime {
		return cl
	}
	sig := aimd.Neutral
	if st.run > 1 {
		sig = aimd.Overload
	}
	return retry.Class{Retryable: attempts < forbiddenRetries, Signal: sig, Reason: cl.Reason}
}
