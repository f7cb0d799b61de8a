package crawler

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/crawl-project/crawl/aimd"
	"github.com/crawl-project/crawl/fetch"
	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/hostlimit"
	"github.com/crawl-project/crawl/internal/netguard"
	"github.com/crawl-project/crawl/internal/retry"
	"github.com/crawl-project/crawl/internal/urlnorm"
	"github.com/crawl-project/crawl/robots"
	"github.com/crawl-project/crawl/storage"
)

// Errors a sub-request of a rendered page ends with; the browser sees a failed request.
var (
	// errSubRobots: the sub-request's host's robots.txt disallows it (or is unreachable, which
	// disallows all); the URL is recorded as excluded "robots".
	errSubRobots = errors.New("robots.txt disallows it")
	// errSubMethod: a method the crawl does not send (CONNECT, TRACE, any other than
	// GET, HEAD, POST, PUT, DELETE, PATCH and OPTIONS).
	errSubMethod = errors.New("method not sent")
	// errSubURL: a URL the crawl cannot fetch (not http or https, or not normalizable).
	errSubURL = errors.New("not a URL the crawl fetches")
)

// renderingPage is the page a sub-request is made for: stored sub-resources name it as their
// Parent, at its depth.
type renderingPage struct {
	url   string
	depth int
}

// subresources are the sub-resources the crawl's rendered pages fetched: those stored, by URL,
// and the fetches in flight, so that each URL is fetched once per crawl however many pages
// (and tabs at once) ask for it. Safe for concurrent use.
type subresources struct {
	gates *subGates
	late  sendLateness // how late this worker's paced sub-requests leave after their slot
	wrote gateWrites   // when this worker last wrote a paced sub-request to each gate

	mu     sync.Mutex
	loaded bool                  // stored holds what the store held when the first render began
	stored map[string]uint64     // key (flightKey, variantKey) -> Seq of its stored answer
	flight map[string]*subFlight // key -> its fetch in flight
}

// subFlight is one fetch in flight; p and err are set before done is closed.
type subFlight struct {
	done chan struct{}
	p    *storage.Page
	err  error
}

// storeFault is a store failure met while answering a sub-request: the crawl must stop, as
// for a page whose commit failed.
type storeFault struct{ err error }

func (e *storeFault) Error() string { return "storing a sub-resource: " + e.err.Error() }
func (e *storeFault) Unwrap() error { return e.err }

// initSubresources readies the answering of sub-requests: the gates' waiters, and the
// sub-resources earlier runs stored, read once per crawler before the first render, whose
// answers are served from the store. The same pass counts the rendered pages stored.
func (c *Crawler) initSubresources() error {
	s := &c.renders.subs
	s.mu.Lock()
	if s.gates == nil {
		c.renders.freed.make()
		s.gates = newSubGates(c.reg.Wait, c.renders.freed.add)
	}
	defer s.mu.Unlock()
	if s.loaded {
		return nil
	}
	s.stored, s.flight = map[string]uint64{}, map[string]*subFlight{}
	err := c.db.PagesMeta(func(p *storage.Page) error {
		r := subRequest{method: cmp.Or(p.ReqMethod, http.MethodGet), body: p.ReqBody}
		if _, sent := sentMethods[r.method]; sent && p.Subresource && settled(p.Status) {
			if k := r.flightKey(p.URL); s.stored[k] == 0 {
				s.stored[k] = p.Seq // of several variants (Vary), the first answers its URL
			}
		}
		c.renders.counts.countStored(p)
		return nil
	})
	if err != nil {
		return err
	}
	s.loaded = true
	return nil
}

// settled reports whether a stored answer of status is the URL's for the crawl: not one a
// later ask should send again (a "slow down" or a fault whose retries ran out).
func settled(status int) bool { return !retry.ClassifyStatus(status).Retryable }

// urlStates is the frontier's record of one URL (frontier.Frontier.State).
type urlStates interface {
	State(url string) (frontier.URLState, bool, error)
}

// fetchedAs returns the Seq of the answer this crawl's store holds for u fetched as a page
// or a requisite (not one a later ask should send again), when the frontier keeps the URL's
// record with it: a shared crawl's pages are on several workers' stores, and its frontier
// does not say which.
func (c *Crawler) fetchedAs(u string) (uint64, bool, error) {
	fr, ok := c.fr.(urlStates)
	if !ok || c.shared != nil {
		return 0, false, nil
	}
	st, ok, err := fr.State(u)
	if err != nil || !ok || st.State != "fetched" || st.PageSeq == 0 || !settled(st.Status) {
		return 0, false, err
	}
	return st.PageSeq, true, nil
}

// subRequest is one request a rendered page made: its method, URL and body (typed bodyType).
type subRequest struct {
	method, url, bodyType string
	body                  []byte
	header                http.Header // the page's request headers (pageHeader), sent with it
}

// sentMethods are the methods a sub-request may have, each with whether it is idempotent
// (RFC 9110 9.2.2): only those are retried after an error or a plain "slow down".
var sentMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPut: true, http.MethodDelete: true,
	http.MethodOptions: true, http.MethodPost: false, http.MethodPatch: false,
}

// flightKey is what a sub-request is shared and answered from the store by: its URL for GET
// and HEAD; for any other method, the method, URL and body's hash, so that a POST is answered
// only with the answer to the same POST.
func (r subRequest) flightKey(u string) string {
	if r.method == http.MethodGet || r.method == http.MethodHead {
		return u
	}
	h := sha256.Sum256(r.body)
	return r.method + " " + u + " " + hex.EncodeToString(h[:])
}

// subresource answers one GET a rendered page made (subresourceReq).
func (c *Crawler) subresource(ctx context.Context, from renderingPage, method, raw string) (*storage.Page, error) {
	return c.subresourceReq(ctx, from, subRequest{method: method, url: raw})
}

// subresourceReq answers one request a rendered page made: from the store when it was
// stored in this crawl (a GET or HEAD: its URL, as a sub-resource, a page or a requisite; any
// other method: the same method, URL and body, in this run or an earlier one), unless the stored answer varies (its Vary) by
// a header r sends with another value; otherwise fetched through robots.txt, the network guard,
// its host's gate and the fetch client (fetchSubresource), stored, and then answered.
// Concurrent asks with one key (flightKey, then variantKey) share one fetch.
func (c *Crawler) subresourceReq(ctx context.Context, from renderingPage, r subRequest) (*storage.Page, error) {
	method, raw := r.method, r.url
	if _, ok := sentMethods[method]; !ok {
		return nil, fmt.Errorf("%s %s: %w", method, raw, errSubMethod)
	}
	u, err := urlnorm.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("%s: %w", raw, errSubURL)
	}
	u.User = nil // credentials in a script's URL are not sent, nor stored
	key := r.flightKey(u.String())
	for variant := false; ; variant = true {
		p, f, err := c.subAnswer(ctx, from, u, r, key, !variant)
		if err != nil || variant || f {
			return p, err
		}
		vk := r.variantKey(key, p)
		if vk == "" {
			return p, nil
		}
		key = vk
	}
}

// subAnswer answers r under key: the answer stored under it (when fromPages, or a page's or a
// requisite's of the same URL), the one of a fetch in flight under it, or a fetch of its own,
// which it reports (fetched: the answer is r's own).
func (c *Crawler) subAnswer(ctx context.Context, from renderingPage, u *url.URL, r subRequest, key string, fromPages bool) (p *storage.Page, fetched bool, err error) {
	s := &c.renders.subs
	s.mu.Lock()
	seq, ok := s.stored[key]
	if !ok && fromPages && key == u.String() { // a GET or HEAD: a page's or requisite's answer serves it too
		seq, ok, err = c.fetchedAs(key)
		if err != nil {
			s.mu.Unlock()
			return nil, false, &storeFault{err}
		}
		if ok {
			s.stored[key] = seq
		}
	}
	if ok {
		s.mu.Unlock()
		p, err := c.db.Page(seq)
		if err != nil {
			return nil, false, &storeFault{err}
		}
		return p, false, nil
	}
	f := s.flight[key]
	if f != nil {
		s.mu.Unlock()
		select {
		case <-f.done:
			return f.p, false, f.err
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
	f = &subFlight{done: make(chan struct{})}
	s.flight[key] = f
	s.mu.Unlock()

	f.p, f.err = c.fetchSubresource(ctx, from, u, r)
	s.mu.Lock()
	delete(s.flight, key)
	if f.p != nil && f.err == nil && settled(f.p.Status) {
		s.stored[key] = f.p.Seq
	}
	s.mu.Unlock()
	close(f.done)
	return f.p, true, f.err
}

// variantKey is the key of r's own answer among the answers to key when p, an answer to key,
// varies (RFC 9111 4.1) by a header r sends with another value than p's request did: key and
// r's values of every header p's Vary names; "" when p serves r. Vary "*" and the headers the
// client alone sets (the same in every request) are left out, so that they cannot make each
// ask a fetch.
func (r subRequest) variantKey(key string, p *storage.Page) string {
	if p == nil {
		return ""
	}
	var names []string
	for _, v := range p.Header.Values("Vary") {
		for n := range strings.SplitSeq(v, ",") {
			if n = http.CanonicalHeaderKey(strings.TrimSpace(n)); n != "" && n != "*" && !fetch.OwnedHeader(n) && !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	if len(names) > maxVaryNames {
		names = names[:maxVaryNames]
	}
	slices.Sort(names)
	differs := false
	vk := key
	for _, n := range names {
		v := r.header.Get(n)
		differs = differs || v != p.ReqHeader.Get(n) || n == "Authorization" // never stored: see fetch.GetOptions
		vk += "\x00" + n + ": " + v
	}
	if !differs {
		return ""
	}
	return vk
}

// maxVaryNames bounds the headers one answer's Vary may make part of a key.
const maxVaryNames = 8

// fetchSubresource fetches u for the page from: robots.txt of its host first (disallowed: the
// URL is recorded as excluded "robots"), then through the host's gate (subGates) and the
// fetch client, whose guard refuses the addresses it refuses for links (recorded as excluded
// "private-address"). A "slow down" answer or a retryable error is retried within the
// policy's attempts (more while the host serves others, as for pages): after a Retry-After the
// host's pause is the wait (the gate admits nothing before it ends), otherwise full-jitter
// backoff drawn on the retry budget; an empty budget ends the retries and the browser sees the
// last answer. Every answer feeds the host's controller as a page's does. The final answer is
// stored as a sub-resource of from.
func (c *Crawler) fetchSubresource(ctx context.Context, from renderingPage, u *url.URL, r subRequest) (*storage.Page, error) {
	host := urlnorm.HostKey(u)
	entry := frontier.Entry{URL: u.String(), Host: host, Depth: from.depth, Parent: from.url, Role: frontier.RoleRequisite}
	v, err := c.subRobots(ctx, host, u)
	if err != nil {
		return nil, err
	}
	if !v.Allowed {
		if err := c.fr.Exclude([]frontier.Exclusion{{Entry: entry, Reason: frontier.ReasonRobots, Detail: ruleDetail(v)}}); err != nil {
			return nil, &storeFault{err}
		}
		return nil, fmt.Errorf("%s: %w (%s)", u, errSubRobots, ruleDetail(v))
	}
	for attempt := 0; ; attempt++ {
		gate := c.gates.keyNow(ctx, host)
		t, err := c.renders.subs.gates.admit(ctx, gate)
		if err != nil {
			return nil, err
		}
		slot, err := c.fleetSlot(ctx, gate)
		if err != nil {
			giveBack(t, time.Now())
			c.renders.freed.add(gate)
			return nil, err
		}
		p, again, err := c.sendSubresource(ctx, from, entry, u, r, gate, t, slot, attempt)
		if !again {
			return p, err
		}
	}
}

// sendSubresource sends one attempt of a sub-request admitted to gate with ticket t (and,
// in a shared crawl, due at the fleet's slot: fleetSlot; zero otherwise), ends the ticket with
// its outcome (and tells the dispatcher: freedGates; and the fleet's pace, of a "slow down":
// holdFleet), and returns the stored answer, or that another attempt is due (after its wait:
// subRetry), or the error that ends the sub-request.
func (c *Crawler) sendSubresource(ctx context.Context, from renderingPage, entry frontier.Entry, u *url.URL, r subRequest, gate string, t *hostlimit.Ticket, slot time.Time, attempt int) (p *storage.Page, again bool, err error) {
	host := entry.Host
	end := func(now time.Time, o aimd.Outcome) {
		c.endRequest(t, now, o)
		c.renders.freed.add(gate)
	}
	wrote := t.Wrote
	if !slot.IsZero() {
		wrote = func(at time.Time) {
			t.Wrote(at)
			c.renders.subs.late.note(slot, at)
			c.renders.subs.wrote.note(gate, at)
		}
	}
	sent := time.Now()
	idempotent := sentMethods[r.method]
	o := fetch.GetOptions{Wrote: wrote, Method: r.method, Body: r.body, BodyType: r.bodyType, Header: r.header}
	resp, err := c.client.GetWith(ctx, u, o) // not whileHeld: a sub-request is no lease of its host
	now := time.Now()
	switch {
	case ctx.Err() != nil:
		end(now, aimd.Outcome{Signal: aimd.Neutral, Sent: sent})
		return nil, false, ctx.Err()
	case errors.Is(err, netguard.ErrPrivateAddress):
		end(now, aimd.Outcome{Signal: aimd.Neutral, Sent: sent})
		if xerr := c.fr.Exclude([]frontier.Exclusion{{Entry: entry, Reason: frontier.ReasonPrivateAddress, Detail: err.Error()}}); xerr != nil {
			return nil, false, &storeFault{xerr}
		}
		return nil, false, err
	case err != nil:
		cl := classifyErr(err)
		end(now, aimd.Outcome{Signal: cl.Signal, Sent: sent})
		c.observeRequest(RequestEvent{Host: host, ErrKind: cl.Reason, Latency: now.Sub(sent)})
		if !cl.Retryable || !idempotent || !c.subRetry(ctx, host, cl, attempt, 0, now) {
			return nil, false, fmt.Errorf("%s: %s", u, errCause(err))
		}
		return nil, true, nil
	}
	c.answered(host)
	cl := retry.ClassifyStatus(resp.Status)
	a := c.honourRetryAfter(host, resp, now)
	end(now, responseOutcome(cl.Signal, sent, resp, a))
	if !slot.IsZero() && (cl.Signal == aimd.Overload || a.Pause > 0) {
		c.holdFleet(gate, a.Pause, cl.Signal == aimd.Overload, now)
	}
	c.observeRequest(RequestEvent{Host: host, Status: resp.Status, Latency: now.Sub(sent)})
	if cl.Retryable && (idempotent || unprocessed(resp)) && c.subRetry(ctx, host, cl, attempt, a.Wait, now) {
		return nil, true, nil
	}
	if ctx.Err() != nil {
		return nil, false, ctx.Err()
	}
	if !cl.Retryable {
		if attempt == 0 {
			c.budget(host).Deposit(now)
			c.global.Deposit(now)
		} else {
			c.budget(host).Refund(now)
			c.global.Refund(now)
		}
	}
	p, err = c.storeSubresource(from, resp, r)
	return p, false, err
}

// unprocessed reports whether resp says its request was not acted on, so that a request that
// is not idempotent may be sent again: a 429 or 503 with a Retry-After (RFC 6585 4, RFC 9110
// 15.6.4: the server refused it and says when to come back).
func unprocessed(resp *fetch.Response) bool {
	return (resp.Status == http.StatusTooManyRequests || resp.Status == http.StatusServiceUnavailable) &&
		resp.Header.Get("Retry-After") != ""
}

// subRetry reports whether a sub-request refused (class cl) at attempt may be sent again, and
// waits for it: after a Retry-After of retryAfter the host's gate holds the next attempt until
// its pause ends, so nothing more is waited here; otherwise the policy's backoff, if the
// retry budget grants it. False when the attempts are spent, the budget is empty or ctx ends.
func (c *Crawler) subRetry(ctx context.Context, host string, cl retry.Class, attempt int, retryAfter time.Duration, now time.Time) bool {
	limit := c.cfg.MaxAttempts
	if cl.Signal == aimd.Overload && c.serving(host, now) {
		limit *= throttledAttempts
	}
	if attempt+1 >= limit {
		return false
	}
	c.observeRetry(host, cl.Reason)
	if retryAfter > 0 {
		return ctx.Err() == nil
	}
	if !c.withdrawRetry(host, now) {
		return false
	}
	t := time.NewTimer(c.retryDelay(attempt, 0))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// storeSubresource stores resp, the answer to r, as a sub-resource of the page from (with r's
// method and body) and returns it as stored.
func (c *Crawler) storeSubresource(from renderingPage, resp *fetch.Response, r subRequest) (*storage.Page, error) {
	p := &storage.Page{
		URL: resp.URL.String(), FinalURL: resp.URL.String(), Status: resp.Status, StatusLine: resp.StatusLine,
		Proto: resp.Proto, Header: resp.Header, ReqHeader: resp.ReqHeader, ReqMethod: r.method, ReqBody: r.body,
		FetchedAt: resp.Started, Duration: resp.Duration, Depth: from.depth, Parent: from.url,
		ContentType: resp.ContentType, Truncated: resp.Truncated, DecodedFrom: resp.DecodedFrom,
		RemoteAddr: resp.RemoteAddr, Body: resp.Body, Subresource: true,
	}
	if _, err := c.db.StorePage(p); err != nil {
		return nil, &storeFault{err}
	}
	return p, nil
}

// subRobots returns robots.txt's verdict on u, a sub-request to host, fetching the host's
// robots.txt first (through its gate, behind the sub-requests waiting there) when it is not
// known. A host whose robots.txt is unreachable disallows everything (RFC 9309).
func (c *Crawler) subRobots(ctx context.Context, host string, u *url.URL) (robots.Verdict, error) {
	var poll *time.Timer
	defer func() {
		if poll != nil {
			poll.Stop()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return robots.Verdict{}, err
		}
		now := time.Now()
		rs, err := c.robotsFor(host, now)
		if err != nil {
			return robots.Verdict{}, &storeFault{err}
		}
		st, _ := rs.state(now)
		switch st {
		case robotsReady:
			return rs.test(c.agent, u), nil
		case robotsWait, robotsGaveUp:
			return robots.Verdict{}, nil
		case robotsStaged:
			if e, ok := rs.takeStaged(); ok {
				rs.set(e, c.rules(e), c.cfg.RobotsTTL, c.cfg.RobotsRetry)
				c.applyCrawlDelay(host, rs)
			}
			continue
		case robotsNeeded:
			if rs.claimFetch(now) {
				gate := c.gates.keyNow(ctx, host) // one key for the admission, the fleet's slot and the dispatcher
				t, err := c.renders.subs.gates.admit(ctx, gate)
				if err != nil {
					rs.unload() // looked up again, as after a fetch cut short
					return robots.Verdict{}, err
				}
				if _, err := c.fleetSlot(ctx, gate); err != nil {
					giveBack(t, time.Now())
					c.renders.freed.add(gate)
					rs.unload()
					return robots.Verdict{}, err
				}
				scheme := u.Scheme
				if rs.httpOnly() {
					scheme = "http"
				}
				err = c.fetchRobotsFor(ctx, host, scheme, t, robotsForSubrequests)
				c.renders.freed.add(gate) // its ticket is done
				if err != nil {
					return robots.Verdict{}, &storeFault{err}
				}
				continue
			}
		}
		// Another job fetches or installs it: look again shortly.
		if poll == nil {
			poll = time.NewTimer(robotsPoll)
		} else {
			poll.Reset(robotsPoll)
		}
		select {
		case <-poll.C:
		case <-ctx.Done():
		}
	}
}

// robotsPoll is how often a sub-request waiting for its host's robots.txt, which another job
// fetches, looks whether it came.
const robotsPoll = 20 * time.Millisecond

// claimFetch moves the state to robotsPending, for a fetch the caller makes, if at now a fetch
// is needed and none is under way; it reports whether it did.
func (rs *robotsState) claimFetch(now time.Time) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	switch {
	case rs.phase == robotsNeeded, (rs.phase == robotsReady || rs.phase == robotsWait) && !now.Before(rs.next):
		rs.phase = robotsPending
		return true
	}
	return false
}
