package crawler

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/crawl-project/crawl/aimd"
	"github.com/crawl-project/crawl/fetch"
	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/hostlimit"
	"github.com/crawl-project/crawl/internal/netguard"
	"github.com/crawl-project/crawl/internal/retry"
	"github.com/crawl-project/crawl/internal/urlnorm"
	"github.com/crawl-project/crawl/storage"
)

// fetchPage makes the one request a lease was admitted for, reports the outcome to the host's
// gate, and commits the result: page + done + links in one frontier transaction, or a retry,
// or a failure. A request cut short by shutdown gives its lease back instead.
func (c *Crawler) fetchPage(ctx context.Context, l frontier.Lease, u *url.URL, t *hostlimit.Ticket) error {
	if done, err := c.requisiteFromRender(l, t); done || err != nil {
		return err
	}
	var last lastVersion // a revisit's last version: what it asks about and compares with
	if l.Prev != 0 {
		last = c.lastVersionOf(l.Prev)
	}
	sent := time.Now()
	ctx = c.whileHeld(ctx, l.Host, sent)
	resp, err := c.client.GetWith(ctx, u, fetch.GetOptions{If: last.v, AcceptType: c.acceptType(), Wrote: t.Wrote})
	now := time.Now()
	if ctx.Err() != nil {
		t.Done(now, aimd.Outcome{Signal: aimd.Neutral, Sent: sent})
		c.fr.Release(l)
		return nil
	}
	res := c.decide(l, u, resp, err, sent, now, t)
	if rerr := c.renderInto(ctx, l, u, &res); rerr != nil {
		if ctx.Err() != nil { // cut short: rendered again by a later run
			c.fr.Release(l)
			return nil
		}
		if bf := (*browserFault)(nil); errors.As(rerr, &bf) { // fetched and rendered by a later run
			c.fr.Release(l)
		}
		return fmt.Errorf("rendering %s: %w", l.URL, rerr)
	}
	if res.Page != nil {
		c.markRevisit(res.Page, last)
	}
	return c.commitFetch(l, res)
}

// commitFetch commits the result of lease l's fetch and counts it.
func (c *Crawler) commitFetch(l frontier.Lease, res frontier.Result) error {
	if cerr := c.complete(l, res); cerr != nil {
		return fmt.Errorf("committing %s: %w", l.URL, cerr)
	}
	if c.cfg.Hooks.Stored != nil && res.Kind == frontier.Fetched && res.Page != nil {
		c.cfg.Hooks.Stored(res.Page, l.Role)
	}
	c.stored(l, res)
	if res.Kind == frontier.Fetched && res.Page != nil {
		c.countRendered(res.Page)
		c.tallyPage(l, res.Page)
	}
	return nil
}

// whileHeld returns ctx for a request to host about to be sent at now: cancelled if host is
// no longer this worker's (Shared.Holds), so that the request is given back unsent.
func (c *Crawler) whileHeld(ctx context.Context, host string, now time.Time) context.Context {
	if c.shared == nil || c.shared.Holds(host, now) {
		return ctx
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	return gone
}

// decide turns one response (or error) into the frontier result for the lease, and feeds the
// host's gate: the outcome for its controller, and a pause when the host sent Retry-After or
// said its rate-limit quota is spent.
func (c *Crawler) decide(l frontier.Lease, u *url.URL, resp *fetch.Response, err error, sent, now time.Time, t *hostlimit.Ticket) frontier.Result {
	if errors.Is(err, netguard.ErrPrivateAddress) {
		t.Done(now, aimd.Outcome{Signal: aimd.Neutral, Sent: sent})
		return frontier.Result{Kind: frontier.Excluded, Reason: frontier.ReasonPrivateAddress, Detail: err.Error()}
	}
	if err != nil {
		cl := c.pageFault(l, classifyErr(err), now)
		t.Done(now, aimd.Outcome{Signal: cl.Signal, Sent: sent})
		c.observeRequest(RequestEvent{Host: l.Host, ErrKind: cl.Reason, Latency: now.Sub(sent)})
		detail := errCause(err)
		cause := l.URL + ": " + detail
		c.setLastErr(l.Host, cause)
		c.hostFailed(l.Host, cause)
		if retry.NoAnswer(cl.Reason) {
			if given, why := c.unanswered(l.Host, l.URL, sent, now, cl.Reason, detail); given {
				return frontier.Result{Kind: frontier.Failed, Reason: cl.Reason,
					Detail: fmt.Sprintf("%s (after %d attempts); the host was given up after %s", detail, l.Attempts+1, why)}
			}
		}
		if cl.Retryable {
			return c.retryOrFail(l, cl, detail, 0, 0, now)
		}
		return frontier.Result{Kind: frontier.Failed, Reason: cl.Reason, Detail: detail}
	}
	c.answered(l.Host)
	cl := c.pageFault(l, c.classifyForbidden(l.Host, resp.Status, l.Attempts, now, retry.ClassifyStatus(resp.Status)), now)
	a := c.honourRetryAfter(l.Host, resp, now)
	c.endRequest(t, now, responseOutcome(cl.Signal, sent, resp, a))
	c.observeRequest(RequestEvent{Host: l.Host, Status: resp.Status, Latency: now.Sub(sent)})
	if cl.Retryable {
		c.setLastErr(l.Host, fmt.Sprintf("%s on %s", resp.StatusLine, l.URL))
		return c.retryOrFail(l, cl, resp.StatusLine, resp.Status, a.Wait, now)
	}
	if l.Attempts == 0 {
		c.budget(l.Host).Deposit(now)
		c.global.Deposit(now)
	} else {
		c.budget(l.Host).Refund(now)
		c.global.Refund(now)
	}
	if resp.BodyState == fetch.BodyRefused {
		return frontier.Result{Kind: frontier.Excluded, Reason: reasonType,
			Detail: fmt.Sprintf("Content-Type %s is not an --accept-type; the body was not read", resp.ContentType)}
	}
	p := &storage.Page{
		URL: l.URL, FinalURL: resp.URL.String(), Status: resp.Status, StatusLine: resp.StatusLine,
		Proto: resp.Proto, Header: resp.Header, ReqHeader: resp.ReqHeader, ReqMethod: "GET",
		FetchedAt: resp.Started, Duration: resp.Duration, Depth: l.Depth, Parent: l.Parent,
		ContentType: resp.ContentType, Truncated: resp.Truncated, DecodedFrom: resp.DecodedFrom,
		RemoteAddr: resp.RemoteAddr, Body: resp.Body,
	}
	res := frontier.Result{Kind: frontier.Fetched, Page: p}
	switch {
	case resp.Status >= 300 && resp.Status < 400 && resp.Location != nil:
		c.follow(&res, l, resp.Location)
	case resp.Status >= 300 && resp.Status < 400 && resp.LocationErr != nil:
		unusable(&res, l.URL, resp.Header.Get("Location"), resp.LocationErr, l.Depth, l.Hops+1)
	case resp.Status >= 200 && resp.Status < 300 && l.Role == frontier.RoleRequisite:
		c.requisites(&res, l, u, resp) // what a stylesheet or document loads; nothing a requisite links to
	case resp.Status >= 200 && resp.Status < 300 && c.sitemapLinks(&res, l, u, resp):
	case resp.Status >= 200 && resp.Status < 300:
		c.requisites(&res, l, u, resp)
		links := fetch.ExtractLinks(u, resp.Header, resp.ContentType, resp.Body, c.agent)
		p.NoIndex = links.NoIndex
		for _, lk := range links.Links {
			if lk.URL.User != nil {
				lk.URL.User = nil // credentials in a link are not followed, nor stored
				lk.Str = lk.URL.String()
			}
			e := frontier.Entry{URL: lk.Str, Host: urlnorm.HostKey(lk.URL), Depth: l.Depth + 1, Parent: l.URL}
			if c.cfg.Hooks.Link != nil && !lk.NoFollow && !c.cfg.Hooks.Link(u, lk.URL, e.Depth) {
				res.Excluded = append(res.Excluded, frontier.Exclusion{Entry: e, Reason: frontier.ReasonFilter, Detail: "dropped by the program (Hooks.Link)"})
				continue
			}
			c.consider(&res, e, lk.URL, lk.NoFollow)
		}
		for _, sk := range links.Skipped {
			unusable(&res, l.URL, sk.Ref, sk.Err, l.Depth+1, 0)
		}
	}
	return res
}

// follow treats a redirect's target as a new URL at the same depth, so the hop passes scope,
// robots, dedup and the target host's gate like any other URL; Hops bounds chains.
func (c *Crawler) follow(res *frontier.Result, l frontier.Lease, target *url.URL) {
	target.User = nil // credentials in a Location are not followed, nor stored
	e := frontier.Entry{URL: target.String(), Host: urlnorm.HostKey(target), Depth: l.Depth, Parent: l.URL, Hops: l.Hops + 1, Role: l.Role}
	if e.Hops > c.cfg.MaxRedirects {
		res.Excluded = append(res.Excluded, frontier.Exclusion{Entry: e, Reason: "limit",
			Detail: fmt.Sprintf("more than %d redirects", c.cfg.MaxRedirects)})
		return
	}
	if l.Role == frontier.RoleRequisite {
		c.chains.redirected(l.URL, e.URL)
	}
	c.consider(res, e, target, false)
}

// consider sorts one discovered URL into the links to enqueue or the exclusions to record.
func (c *Crawler) consider(res *frontier.Result, e frontier.Entry, u *url.URL, nofollow bool) {
	reason, detail := c.admit(u, e.Depth, e.Role)
	switch {
	case nofollow:
		reason, detail = "nofollow", ""
	case reason != "": // out of scope, filtered or too deep
	default:
		if v, known := c.robotsVerdict(e.Host, u); known && !v.Allowed {
			reason, detail = "robots", ruleDetail(v)
		}
	}
	if reason != "" {
		res.Excluded = append(res.Excluded, frontier.Exclusion{Entry: e, Reason: reason, Detail: detail})
		return
	}
	res.Links = append(res.Links, e)
}

// pageFault returns cl with a Failure (a 502 or 504, a timeout, a reset) made Neutral for the
// host's controller when it is a retry of the lease's URL and the host is serving (it answered
// normally within servingWindow): the URL fails again while its host serves others, so the
// failure is the page's (a broken endpoint, a page too slow to finish), not the host's load.
// The URL is still retried as cl says; only its host's rate is left alone.
func (c *Crawler) pageFault(l frontier.Lease, cl retry.Class, now time.Time) retry.Class {
	if cl.Signal == aimd.Failure && l.Attempts > 0 && c.serving(l.Host, now) {
		cl.Signal = aimd.Neutral
	}
	return cl
}

// throttledAttempts multiplies the attempts a URL may use when it is refused with "slow down"
// (429, 503 and their kin) by a host that is serving other pages: the host is throttling,
// sharing out a limit (one it keeps for all its clients, or for several of our host names),
// not failing, and the URL is only waiting its turn. Still bounded, so a crawl ends even when
// a host throttles forever.
const throttledAttempts = 4

// retryOrFail schedules another attempt with full-jitter backoff (at least the host's
// Retry-After), or fails the URL once it has used its attempts (throttledAttempts times as
// many when a serving host throttles it). A retry the host asked for with Retry-After is paid
// for by the pause it imposed and draws on no retry budget; for any other, an empty budget
// defers the retry by the policy's cap instead of dropping it.
func (c *Crawler) retryOrFail(l frontier.Lease, cl retry.Class, detail string, status int, retryAfter time.Duration, now time.Time) frontier.Result {
	reason := cl.Reason
	attempts, limit := l.Attempts+1, c.cfg.MaxAttempts
	if cl.Signal == aimd.Overload && c.serving(l.Host, now) {
		limit *= throttledAttempts
	}
	if attempts >= limit {
		return frontier.Result{Kind: frontier.Failed, Reason: reason, Status: status,
			Detail: fmt.Sprintf("%s (after %d attempts)", detail, attempts)}
	}
	delay := c.retryDelay(attempts-1, retryAfter)
	c.observeRetry(l.Host, reason)
	if retryAfter <= 0 && !c.withdrawRetry(l.Host, now) {
		delay = max(delay, c.cfg.Retry.Cap)
		reason += " (retry budget empty: deferred)"
	}
	return frontier.Result{Kind: frontier.Retry, Reason: reason, Status: status, NotBefore: now.Add(delay)}
}

// classifyErr turns a fetch error into the retry policy's class for it.
// errCause is a failed request's error as one short cause, each fact once: its kind
// ("conn-refused") and the innermost error, without the URL (the caller names it where it is
// not known) or net/http's `Get "URL"` wrapper.
func errCause(err error) string {
	var fe *fetch.Error
	if !errors.As(err, &fe) {
		return err.Error()
	}
	inner := fe.Err
	var ue *url.Error
	if errors.As(inner, &ue) {
		inner = ue.Err
	}
	msg, kind := inner.Error(), fe.Kind.String()
	if strings.HasPrefix(msg, kind+": ") { // crypto/tls's errors start "tls: "
		return msg
	}
	return kind + ": " + msg
}

func classifyErr(err error) retry.Class {
	kind := "other"
	var fe *fetch.Error
	if errors.As(err, &fe) {
		kind = fe.Kind.String()
	}
	return retry.ClassifyError(kind)
}

// honourRetryAfter returns how long the whole host must be left alone when the response says
// when to come back: a 429, a 503 or another "slow down" status (retry.StatusKind.SlowDown)
// with Retry-After, or a response of any status (200 included) whose rate-limit headers say
// the quota is spent until a reset (retry.ParseRateLimit), since the next request would only
// be refused. The longer of the two is the pause; the caller passes it to the request's
// Ticket.Done (responseOutcome, endRequest), which pauses the host, and the host's controller
// learns it as the cost of a refusal. It also returns the Retry-After wait alone (0 if none):
// callers read that as the host's explicit "slow down" and as a retry's floor, which a spent
// quota on a success is not. Its Stated is the policy the headers state, which sets the
// host's rate (aimd.Outcome.Stated).
//
// A time the response names on the host's clock (an HTTP-date, a Unix-time reset) is measured
// against the host's clock as its Date headers bound it (retry.HostClock, retry.ServerClock):
// one Date is truncated to the second, and waiting out its fraction cost half a second per
// pause. A spent quota may end sooner than its reset, rounded up to whole seconds, says: a
// fixed window ends its length after its first request (retry.Windows); 10 requests per second
// behind express-rate-limit's default headers were crawled at 5 per second.
func (c *Crawler) honourRetryAfter(host string, resp *fetch.Response, now time.Time) retry.Answer {
	received := now // when the headers (and so Date) came: the body may have taken longer
	if h := resp.Started.Add(resp.HeaderLatency); !resp.Started.IsZero() && h.Before(now) {
		received = h
	}
	sent := received // when the request went out: it started its quota window, if any
	for _, t := range []time.Time{resp.Started, resp.Wrote} {
		if !t.IsZero() && !t.After(received) {
			sent = t
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hostLocked(host).clock.Read(resp.Status, resp.Header, sent, received, now)
}

// endRequest ends the request of ticket t with the response's outcome o: Done pauses the
// host for o.Pause, if any, and feeds its controller. A pause of longPause or more is saved in
// the store at once, so that a run started after a kill still honours it. Like any pause, one
// longer than hostlimit's MaxPause defers the host's URLs rather than holding the run open.
func (c *Crawler) endRequest(t *hostlimit.Ticket, now time.Time, o aimd.Outcome) {
	t.Done(now, o)
	if o.Pause >= longPause {
		if err := c.reg.Flush(); err != nil {
			c.log.Warn("cannot save a host's pause", "host", t.Host(), "err", err)
		}
	}
}

// longPause is a pause long enough to be saved in the store at once.
const longPause = 2 * time.Second

// responseOutcome is what the host's controller learns from a response: sent is when the
// request was admitted, but the controller gets the time it was written to the connection
// when known (a dial, a TLS handshake or a busy scheduler in between would otherwise read as
// the host's latency, and blur the send times its measures line up with the host's
// answers), and the latency from then to the response headers; a is what the response said
// of its host (honourRetryAfter): the pause it put on the host and the rate it states.
func responseOutcome(sig aimd.Signal, sent time.Time, resp *fetch.Response, a retry.Answer) aimd.Outcome {
	o := aimd.Outcome{Signal: sig, Sent: sent, Latency: resp.HeaderLatency, Pause: max(a.Pause, 0), Stated: a.Stated.Rate()}
	if !resp.Wrote.IsZero() && !resp.Wrote.Before(sent) {
		if headers := resp.Started.Add(resp.HeaderLatency); headers.After(resp.Wrote) {
			o.Sent, o.Latency = resp.Wrote, headers.Sub(resp.Wrote)
		}
	}
	return o
}

// sitemapTypes are the media types sitemaps are served as; with --sitemaps they are read
// whatever --accept-type says, so that the sitemaps can be read.
var sitemapTypes = []string{"application/xml", "text/xml", "application/gzip", "application/x-gzip"}

// acceptType returns the media type filter of page requests (--accept-type), nil for none.
func (c *Crawler) acceptType() func(string) bool {
	if len(c.cfg.AcceptTypes) == 0 {
		return nil
	}
	return func(mt string) bool {
		return acceptsType(c.cfg.AcceptTypes, mt) || c.cfg.Sitemaps && slices.Contains(sitemapTypes, mt)
	}
}
