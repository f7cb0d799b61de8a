package crawler

import (
	"fmt"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/termsafe"
)

// A host whose requests keep going unanswered (retry.Unanswered: it accepts and never answers,
// drips a byte a second, refuses or resets every connection) is given up for the rest of the
// run: no request is sent to it any more, and its queued URLs fail without being requested,
// with the reason of its last unanswered request ("timeout", "conn-refused", "conn-reset"),
// so that one such host does not hold the crawl for hours at --max-attempts per URL. Any
// answer from it (a page, its robots.txt) takes it back. The run is kept in the host's
// hostAnswers, which outlive its record. `crawl run --retry failed` queues its URLs again.

// unanswered records that a request to host for url, sent at sent, ended at now without an
// answer (reason, cause: its kind and error). It reports whether the host is given up, and
// why, for the URL's failure; it logs the give-up once.
func (c *Crawler) unanswered(host, url string, sent, now time.Time, reason, cause string) (bool, string) {
	c.mu.Lock()
	u := &c.answersLocked(host).unanswered
	gaveUp := u.Failed(url, sent, now, c.cfg.Timeout, reason, cause)
	given, why := u.GivenUp(), u.String()
	c.mu.Unlock()
	if gaveUp {
		c.log.Warn("host given up: no answer", "host", host, "run", termsafe.Escape(why),
			"then", fmt.Sprintf("its queued URLs fail %s unrequested in this run; run again with --retry failed to try them again", reason))
	}
	return given, why
}

// answered notes that host answered a request (any response): it is not given up.
func (c *Crawler) answered(host string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a := c.answers[host]; a != nil {
		a.unanswered.Answered()
	}
}

// givenUp reports whether host is given up for not answering, with its last unanswered
// request's reason and the run's description.
func (c *Crawler) givenUp(host string) (given bool, reason, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.answers[host]
	if a == nil || !a.unanswered.GivenUp() {
		return false, "", ""
	}
	return true, a.unanswered.Reason(), a.unanswered.String()
}

// unansweredJob fails host's next URL unrequested: the host is given up (givenUp).
func (c *Crawler) unansweredJob(now time.Time, host, reason, why string) (job, time.Time, error) {
	return c.failNextJob(now, host, reason, func(l frontier.Lease) string {
		if l.Attempts > 0 {
			return fmt.Sprintf("not requested again after %d attempts: the host was given up after %s", l.Attempts, why)
		}
		return "not requested: the host was given up after " + why
	})
}

// failNextJob leases host's next URL and makes the job that fails it unrequested, with reason
// and the detail made from its lease; no job when nothing is due.
func (c *Crawler) failNextJob(now time.Time, host, reason string, detail func(frontier.Lease) string) (job, time.Time, error) {
	l, ok, err := c.fr.Lease(now, host)
	if err != nil || !ok {
		return job{}, time.Time{}, err
	}
	return job{run: func() error {
		return c.complete(l, frontier.Result{Kind: frontier.Failed, Reason: reason, Detail: detail(l)})
	}}, time.Time{}, nil
}
