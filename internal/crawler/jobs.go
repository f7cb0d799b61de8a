package crawler

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/crawl-project/crawl/aimd"
	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/hostlimit"
	"github.com/crawl-project/crawl/robots"
)

// job is the work dispatch hands to a goroutine: a page fetch, a robots.txt fetch, or a
// frontier update for a URL that is not fetched. The zero job is no work.
type job struct {
	page bool         // a page fetch (counts against --max-pages until committed)
	host string       // its host
	gate string       // its host's gate
	run  func() error // returns a store failure
}

// robotsUnreachableJob fails host's next URL: its robots.txt stayed unreachable.
func (c *Crawler) robotsUnreachableJob(now time.Time, host string, rs *robotsState) (job, time.Time, error) {
	return c.failNextJob(now, host, "robots-unreachable", func(frontier.Lease) string {
		return fmt.Sprintf("robots.txt unreachable after %d tries: %s", rs.failures(), rs.lastProblem())
	})
}

// robotsJob fetches host's robots.txt once its gate admits a request, with the scheme its
// next URL has.
func (c *Crawler) robotsJob(fetchCtx context.Context, now time.Time, host, gate string, rs *robotsState) (job, time.Time, error) {
	t, readyAt := c.tryAdmit(now, host, gate)
	if t == nil {
		return job{}, readyAt, nil
	}
	l, ok, err := c.fr.Lease(now, host) // to learn the scheme the host is crawled with
	if err != nil || !ok {
		giveBack(t, now)
		return job{}, time.Time{}, err
	}
	c.fr.Release(l)
	scheme := "http"
	if u, err := url.Parse(l.URL); err == nil && !rs.httpOnly() {
		scheme = u.Scheme
	}
	rs.setPending()
	return job{run: func() error { return c.fetchRobots(fetchCtx, host, scheme, t) }}, time.Time{}, nil
}

// pageJob fetches host's next URL once its gate admits a request. A URL robots.txt disallows
// (learned too late to exclude it when it was enqueued, e.g. a seed) is excluded instead, and
// the admitted slot given back.
func (c *Crawler) pageJob(fetchCtx context.Context, now time.Time, host, gate string, rs *robotsState) (job, time.Time, error) {
	t, readyAt := c.tryAdmit(now, host, gate)
	if t == nil {
		return job{}, readyAt, nil
	}
	l, ok, err := c.fr.Lease(now, host)
	if err != nil || !ok {
		giveBack(t, now)
		return job{}, time.Time{}, err
	}
	u, err := url.Parse(l.URL)
	if err != nil { // cannot happen: the frontier holds normalized URLs
		giveBack(t, now)
		return job{run: func() error {
			return c.complete(l, frontier.Result{Kind: frontier.Failed, Reason: "bad-url", Detail: err.Error()})
		}}, time.Time{}, nil
	}
	if u.Scheme == "https" && rs.httpOnly() {
		giveBack(t, now)
		return job{run: func() error { return c.overHTTP(l, u) }}, time.Time{}, nil
	}
	if c.shared != nil && l.Depth == 0 && l.Parent == "" && c.scopeNow().Check(u) == frontier.ReasonScope {
		c.widenScope() // a seed added to the shared crawl since the last widening: its links are in scope
	}
	return job{page: c.countsAgainstBudget(l), run: func() error {
		// Asked in the job, not by the dispatcher: a verdict costs time linear in the host's
		// rules (robots.Robots.Test), which is this host's to spend, not every host's.
		if v := rs.test(c.agent, u); !v.Allowed {
			giveBack(t, time.Now())
			return c.complete(l, frontier.Result{Kind: frontier.Excluded, Reason: "robots", Detail: ruleDetail(v)})
		}
		return c.fetchPage(fetchCtx, l, u, t)
	}}, time.Time{}, nil
}

// overHTTP queues the http twin of l, an https URL of a host that answers over http only
// (storage.RobotsEntry.HTTPOnly), and records l as excluded for it.
func (c *Crawler) overHTTP(l frontier.Lease, u *url.URL) error {
	twin := *u
	twin.Scheme = "http"
	e := l.Entry
	e.URL = twin.String()
	if _, err := c.fr.Add([]frontier.Entry{e}); err != nil {
		return err
	}
	return c.fr.Complete(l, frontier.Result{Kind: frontier.Excluded, Reason: "http-fallback",
		Detail: "https does not answer; crawled as " + e.URL})
}

// giveBack returns an admitted ticket whose request was never sent.
func giveBack(t *hostlimit.Ticket, now time.Time) {
	t.Done(now, aimd.Outcome{Signal: aimd.Neutral, Sent: now})
}

func ruleDetail(v robots.Verdict) string {
	if v.Rule == "" {
		return "robots.txt disallows all (unreachable)"
	}
	return fmt.Sprintf("%s (line %d)", v.Rule, v.Line)
}
