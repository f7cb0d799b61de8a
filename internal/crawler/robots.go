package crawler

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/crawl-project/crawl/aimd"
	"github.com/crawl-project/crawl/fetch"
	"github.com/crawl-project/crawl/hostlimit"
	"github.com/crawl-project/crawl/internal/netguard"
	"github.com/crawl-project/crawl/internal/retry"
	"github.com/crawl-project/crawl/internal/urlnorm"
	"github.com/crawl-project/crawl/robots"
	"github.com/crawl-project/crawl/storage"
)

// robotsMaxFailures is how many times in a row a host's robots.txt may be unreachable (429,
// 5xx, network error) before its queued URLs fail with reason robots-unreachable. Until then
// the host is not crawled at all (RFC 9309 §2.3.1.4: unreachable means disallow all) and is
// re-checked with exponential backoff from Config.RobotsRetry (1 s, 2 s, 4 s …) capped at
// robotsMaxBackoff, so a host that stays down fails its URLs after about two minutes instead of
// holding the crawl open for the RFC's 30 days. An error a retry would meet again (a TLS
// certificate not trusted, a protocol error: retry.ClassifyError's final kinds) gives up at once.
const (
	robotsMaxFailures = 8
	robotsMaxBackoff  = time.Minute
	robotsMaxHops     = 5                  // redirects followed for robots.txt (RFC 9309: at least five)
	robotsMaxBytes    = robots.MaxSize + 1 // one byte past what is parsed, so the parser knows the file was cut
)

// robotsPhase is where one host's robots.txt is in this run. Each transition writes it:
// robotsFor moves robotsUnloaded on (to robotsStaged when the store or the shared cache holds a
// copy, else robotsNeeded); robotsJob and takeStaged move to robotsPending; set, once a copy is
// installed, to robotsReady, robotsWait or robotsGaveUp; giveUp from robotsWait to
// robotsGaveUp; a fetch cut short back to robotsUnloaded. robotsReady and robotsWait hold until
// robotsState.next, then state reads them as robotsNeeded.
type robotsPhase int

const (
	robotsUnloaded robotsPhase = iota // not looked up in this run (the zero value)
	robotsReady                       // rules known and fresh until next
	robotsNeeded                      // never fetched, expired, or a re-check is due
	robotsPending                     // a fetch, or the install of a staged copy, is under way
	robotsStaged                      // a copy read from the store or the shared cache awaits its install job
	robotsWait                        // unreachable; re-check at next
	robotsGaveUp                      // unreachable too many times, or given up on in this run
)

// String names the phase, for test failures and logs.
func (p robotsPhase) String() string {
	switch p {
	case robotsUnloaded:
		return "unloaded"
	case robotsReady:
		return "ready"
	case robotsNeeded:
		return "needed"
	case robotsPending:
		return "pending"
	case robotsStaged:
		return "staged"
	case robotsWait:
		return "wait"
	case robotsGaveUp:
		return "gave-up"
	}
	return fmt.Sprintf("robotsPhase(%d)", int(p))
}

// robotsState is one host's robots.txt as the loop knows it. Safe for concurrent use: mu
// guards every field.
type robotsState struct {
	mu    sync.Mutex
	phase robotsPhase
	entry storage.RobotsEntry // the copy installed last (robotsReady, robotsWait, robotsGaveUp)
	// rules are entry's, parsed; nil until a copy is installed. A fetch keeps the previous
	// copy's rules until its own are installed.
	rules *robots.Robots
	next  time.Time // robotsReady, robotsWait: when to fetch again
	since time.Time // while unreachable: when the current streak of failures began
	// unshared: entry was fetched by this worker of a shared crawl and is not in the shared
	// cache yet (the host was not the worker's when the fetch ended). It is not a phase: any
	// installed copy may be unshared.
	unshared bool
	// staged: robotsStaged's copy, read from the store or the shared cache, installed (parsed)
	// by a job of its own, not by the dispatcher that read it (see stage)
	staged *storage.RobotsEntry
}

// state returns the host's phase at now, and for robotsWait when to check again.
func (rs *robotsState) state(now time.Time) (robotsPhase, time.Time) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	switch rs.phase {
	case robotsUnloaded:
		return robotsNeeded, time.Time{}
	case robotsReady, robotsWait:
		if !now.Before(rs.next) {
			return robotsNeeded, time.Time{}
		}
		if rs.phase == robotsWait {
			return robotsWait, rs.next
		}
	}
	return rs.phase, time.Time{}
}

// stage keeps e to be installed by installRobotsJob: parsing a robots.txt costs time linear
// in its size (up to robots.MaxSize), which is a worker's to spend, not the dispatcher's.
func (rs *robotsState) stage(e storage.RobotsEntry) {
	rs.mu.Lock()
	rs.staged, rs.phase = &e, robotsStaged
	rs.mu.Unlock()
}

// takeStaged returns the staged copy, if any, and moves the state to robotsPending until set
// installs it.
func (rs *robotsState) takeStaged() (storage.RobotsEntry, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.staged == nil {
		return storage.RobotsEntry{}, false
	}
	e := *rs.staged
	rs.staged, rs.phase = nil, robotsPending
	return e, true
}

// setPending moves the state to robotsPending: a fetch of the host's robots.txt is under way.
func (rs *robotsState) setPending() {
	rs.mu.Lock()
	rs.phase = robotsPending
	rs.mu.Unlock()
}

// unload moves the state back to robotsUnloaded, keeping what it holds: a fetch was cut short,
// and the host's robots.txt is looked up again (in the store and the shared cache) on its next
// use.
func (rs *robotsState) unload() {
	rs.mu.Lock()
	rs.phase = robotsUnloaded
	rs.mu.Unlock()
}

// load moves an unloaded state to robotsNeeded and reports whether it was unloaded: the caller
// then looks for a copy (stage) or sets one.
func (rs *robotsState) load() bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.phase != robotsUnloaded {
		return false
	}
	rs.phase = robotsNeeded
	return true
}

func (rs *robotsState) failures() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.entry.Failures
}

func (rs *robotsState) lastProblem() string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.entry.Err != "" {
		return rs.entry.Err
	}
	return fmt.Sprintf("status %d", rs.entry.Status)
}

// test checks a URL against the host's rules; unknown rules allow (the dispatcher never sends a
// request for a host whose rules are unknown).
func (rs *robotsState) test(agent string, u *url.URL) robots.Verdict {
	rs.mu.Lock()
	rules := rs.rules
	rs.mu.Unlock()
	if rules == nil {
		return robots.Verdict{Allowed: true}
	}
	return rules.Test(agent, u.RequestURI())
}

// rules parses e, a fetched (or loaded) robots.txt: a fetch that failed disallows everything.
// It takes no lock: the dispatcher asks every host's state in turn, and must never wait for
// one host's parse.
func (c *Crawler) rules(e storage.RobotsEntry) *robots.Robots {
	if e.Err != "" {
		return robots.DisallowAll()
	}
	return c.parse(e.Status, e.Body)
}

// set installs a fetched (or loaded) entry and its rules (Crawler.rules, parsed before
// rs.mu is taken) and computes when to look again.
func (rs *robotsState) set(e storage.RobotsEntry, rules *robots.Robots, ttl, retry time.Duration) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.entry, rs.unshared = e, false
	rs.rules, rs.staged = rules, nil
	switch {
	case !rs.rules.Unreachable():
		rs.phase = robotsReady
		rs.next = e.FetchedAt.Add(ttl)
		rs.since = time.Time{}
		return
	case e.Failures >= robotsMaxFailures:
		rs.phase = robotsGaveUp
	default:
		rs.phase = robotsWait
	}
	rs.next = e.FetchedAt.Add(min(retry<<min(max(e.Failures-1, 0), 20), robotsMaxBackoff))
	if e.Failures <= 1 || rs.since.IsZero() {
		rs.since = e.FetchedAt
	}
}

// unreachableSince returns, for a host whose robots.txt is unreachable, when its failures
// began and when it is checked next.
func (rs *robotsState) unreachableSince() (since, next time.Time) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.since, rs.next
}

// httpOnly reports whether the host is crawled over http although its URLs say https
// (storage.RobotsEntry.HTTPOnly).
func (rs *robotsState) httpOnly() bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.entry.HTTPOnly
}

// giveUp stops checking an unreachable robots.txt in this run (robotsWait, due or not, moves
// to robotsGaveUp): the host's queued URLs fail. A state in another phase is left as it is.
func (rs *robotsState) giveUp() {
	rs.mu.Lock()
	if rs.phase == robotsWait {
		rs.phase = robotsGaveUp
	}
	rs.mu.Unlock()
}

// robotsFor returns the host's robots state, loading a cached copy from the store the first
// time the host is seen in this run (in a shared crawl, the shared cache's copy if it is newer).
// Under --retry excluded the copy is ignored, and under --retry failed a copy whose last fetch
// failed is: the host's robots.txt is asked for afresh. After that, in a shared crawl, the
// state is kept in step with the shared cache (syncSharedRobots).
func (c *Crawler) robotsFor(host string, now time.Time) (*robotsState, error) {
	c.mu.Lock()
	rs := &c.hostLocked(host).robots
	c.mu.Unlock()
	first := rs.load()
	if first && c.cfg.Hosts[host].Robots == RobotsIgnored {
		// A robots.txt that allows everything, never fetched again in this run.
		e := storage.RobotsEntry{Host: host, Status: http.StatusNotFound, FetchedAt: now}
		rs.set(e, c.rules(e), robotsIgnoredTTL, c.cfg.RobotsRetry)
		c.applyCrawlDelay(host, rs)
		return rs, nil
	}
	if !first {
		if c.shared != nil {
			c.syncSharedRobots(host, rs, now)
		}
		return rs, nil
	}
	e, ok, err := c.db.Robots(host)
	if err != nil {
		return nil, err
	}
	if se, shared := c.sharedRobots(host); shared && (!ok || se.FetchedAt.After(e.FetchedAt)) {
		e, ok = se, true // another worker fetched it since
	}
	if ok {
		c.useRobots(rs, e)
	}
	return rs, nil
}

// syncSharedRobots keeps host's robots state, seen before in this run, in step with the
// shared cache: when the host's rules are needed at now (none yet, or due for a fetch), it takes
// the cache's copy if that is newer; while the state holds a fetch of this worker's that the
// cache refused (unshared), it saves the fetch, or takes the cache's copy if that is newer. The
// cache saves only while the host is this worker's (docs/fleet.md).
func (c *Crawler) syncSharedRobots(host string, rs *robotsState, now time.Time) {
	st, _ := rs.state(now)
	rs.mu.Lock()
	e, ok, unshared := rs.entry, rs.rules != nil, rs.unshared
	rs.mu.Unlock()
	if st == robotsPending || (st != robotsNeeded && !unshared) {
		return
	}
	se, shared := c.sharedRobots(host)
	switch {
	case shared && (!ok || se.FetchedAt.After(e.FetchedAt)):
		rs.mu.Lock()
		rs.unshared = false
		rs.mu.Unlock()
		c.useRobots(rs, se) // another worker fetched it since
	case unshared && c.shareRobots(e):
		rs.mu.Lock()
		if rs.entry.FetchedAt.Equal(e.FetchedAt) {
			rs.unshared = false
		}
		rs.mu.Unlock()
	}
}

// useRobots stages e, a copy of host's robots.txt fetched earlier, for installRobotsJob,
// unless the run asks for it afresh (--retry excluded, or --retry failed and its last fetch
// failed).
func (c *Crawler) useRobots(rs *robotsState, e storage.RobotsEntry) {
	if c.cfg.RetryExcluded || (c.cfg.RetryFailed && e.Failures > 0) {
		return
	}
	rs.stage(e)
}

// installRobotsJob parses and installs host's staged robots.txt copy, in a job so that the
// dispatcher, which read the copy, does not spend the parse.
func (c *Crawler) installRobotsJob(host string, rs *robotsState) job {
	e, ok := rs.takeStaged()
	if !ok {
		return job{}
	}
	return job{run: func() error {
		rs.set(e, c.rules(e), c.cfg.RobotsTTL, c.cfg.RobotsRetry)
		c.applyCrawlDelay(host, rs)
		return nil
	}}
}

// robotsVerdict answers for a URL whose host's rules are already known; known is false
// otherwise (the URL is then checked when it is leased).
func (c *Crawler) robotsVerdict(host string, u *url.URL) (v robots.Verdict, known bool) {
	c.mu.Lock()
	r := c.hosts[host]
	c.mu.Unlock()
	if r == nil {
		return v, false
	}
	rs := &r.robots
	rs.mu.Lock()
	rules := rs.rules
	rs.mu.Unlock()
	if rules == nil || rules.Unreachable() {
		return v, false
	}
	return rules.Test(c.agent, u.RequestURI()), true
}

// applyCrawlDelay caps host's rate at the lower of its robots.txt Crawl-delay (unless
// --ignore-crawl-delay, or its robots.txt is ignored) and its --hosts-config max_rate, or
// removes the cap when neither gives one: what the rules say now replaces a ceiling the host's
// saved state brought.
func (c *Crawler) applyCrawlDelay(host string, rs *robotsState) {
	pol := c.cfg.Hosts[host]
	ceiling := pol.MaxRate
	if !c.cfg.IgnoreCrawlDelay && pol.Robots == RobotsObeyed {
		rs.mu.Lock()
		rules := rs.rules
		rs.mu.Unlock()
		if d, ok := rules.CrawlDelay(c.agent); ok && d > 0 && (ceiling == 0 || 1/d.Seconds() < ceiling) {
			ceiling = 1 / d.Seconds()
		}
	}
	c.reg.SetCeiling(c.gates.known(host), ceiling)
}

// robotsIgnoredTTL is how long the allow-all rules of a host whose robots.txt is ignored
// (--hosts-config) stand: longer than any run.
const robotsIgnoredTTL = 100 * 365 * 24 * time.Hour

// fetchRobots fetches a host's robots.txt through its gate (ticket t was admitted by the
// dispatcher), following up to robotsMaxHops redirects, each hop through its own host's gate.
// The result is cached in the store so a resumed crawl does not fetch it again needlessly.
func (c *Crawler) fetchRobots(ctx context.Context, host, scheme string, t *hostlimit.Ticket) error {
	return c.fetchRobotsFor(ctx, host, scheme, t, robotsForPages)
}

// robotsUse is whom a robots.txt fetch serves.
type robotsUse int

const (
	// robotsForPages: the host's pages, which a worker of a shared crawl fetches only while the
	// host is its own: so is its robots.txt.
	robotsForPages robotsUse = iota
	// robotsForSubrequests: a rendered page's sub-requests, sent to the host whoever owns it.
	robotsForSubrequests
)

// fetchRobotsFor is fetchRobots for use.
func (c *Crawler) fetchRobotsFor(ctx context.Context, host, scheme string, t *hostlimit.Ticket, use robotsUse) error {
	u := &url.URL{Scheme: scheme, Host: host, Path: "/robots.txt"}
	c.mu.Lock()
	rs := &c.hostLocked(host).robots
	c.mu.Unlock()
	prev := rs.failures()
	e := storage.RobotsEntry{Host: host, HTTPOnly: scheme == "http" && rs.httpOnly()}
	final := false      // the failure is one a retry would meet again
	var keepErr error   // the first response that could not be kept for export
	var httpsErr string // the https failure that made a seed without a scheme try http
	for hop := 0; ; hop++ {
		sent := time.Now()
		if use == robotsForPages {
			ctx = c.whileHeld(ctx, host, sent)
		}
		resp, err := c.client.GetWith(ctx, u, fetch.GetOptions{Wrote: t.Wrote})
		now := time.Now()
		e.FetchedAt = now
		if ctx.Err() != nil {
			// Shutting down, or the host moved to another worker of a shared crawl: leave
			// the host as if never loaded, so that its robots.txt is looked up again (in the
			// store and the shared cache, where the host's next owner may have saved it).
			t.Done(now, aimd.Outcome{Signal: aimd.Neutral, Sent: sent})
			rs.unload()
			return nil
		}
		if errors.Is(err, netguard.ErrPrivateAddress) {
			// Every page of this host will be refused the same way and recorded as excluded
			// private-address; robots.txt has nothing to add.
			t.Done(now, aimd.Outcome{Signal: aimd.Neutral, Sent: sent})
			e.Status = http.StatusNotFound
			break
		}
		if err != nil {
			cl := classifyErr(err)
			t.Done(now, aimd.Outcome{Signal: cl.Signal, Sent: sent})
			c.observeRequest(RequestEvent{Host: urlnorm.HostKey(u), Robots: true, ErrKind: cl.Reason, Latency: now.Sub(sent)})
			if hop == 0 && u.Scheme == "https" && c.cfg.HTTPFallback[host] && httpsUnanswered(cl.Reason) {
				httpsErr = errCause(err)
				c.log.Info("https not answered; trying http, the seed having no scheme", "host", host, "cause", httpsErr)
				u = &url.URL{Scheme: "http", Host: u.Host, Path: "/robots.txt"}
				if t, err = c.waitAdmit(ctx, host); err != nil {
					e.Err = fmt.Sprintf("http after https failed: %v", err)
					break
				}
				continue
			}
			e.Err = errCause(err)
			if httpsErr != "" {
				e.Err = fmt.Sprintf("https: %s; http: %s", httpsErr, e.Err)
			}
			final = !cl.Retryable
			break
		}
		if httpsErr != "" {
			e.HTTPOnly = true // it answers over http
		}
		// A robots.txt 5xx (503 and its kin included) is a fault the robots back-off deals
		// with; only an explicit "slow down" (429 or 420, or Retry-After) tells the host's
		// controller about load. An answer served normally (retry.Served or ClientError), a
		// 404 included (most hosts have no robots.txt), is a success, whose timing starts the
		// host's slow start like a page's would.
		signal := aimd.Neutral
		a := c.honourRetryAfter(urlnorm.HostKey(u), resp, now)
		switch k := retry.KindOf(resp.Status); {
		case a.Wait > 0 || k == retry.TooMany:
			signal = aimd.Overload
		case k == retry.Served || k == retry.ClientError:
			signal = aimd.Success
			c.answeredRobots(urlnorm.HostKey(u), now)
		}
		c.endRequest(t, now, responseOutcome(signal, sent, resp, a))
		c.observeRequest(RequestEvent{Host: urlnorm.HostKey(u), Robots: true, Status: resp.Status, Latency: now.Sub(sent)})
		if err := c.keepRobotsFetch(resp); err != nil && keepErr == nil {
			keepErr = err
		}
		e.Status = resp.Status
		e.Body = resp.Body
		if len(e.Body) > robotsMaxBytes {
			e.Body = e.Body[:robotsMaxBytes]
		}
		if resp.Status >= 300 && resp.Status < 400 && resp.Location != nil && hop < robotsMaxHops {
			u = resp.Location
			if t, err = c.waitAdmit(ctx, urlnorm.HostKey(u)); err != nil {
				e.Status, e.Body, e.Err = 0, nil, fmt.Sprintf("robots.txt redirect to %s: %v", u, err)
				break
			}
			continue
		}
		if resp.Status >= 300 && resp.Status < 400 {
			// Too many hops or no usable Location: RFC 9309 says treat as unavailable (allow all).
			e.Status, e.Body = 404, nil
		}
		break
	}
	if e.Err != "" || robots.FromResponse(e.Status, nil).Unreachable() { // 429, 5xx: RFC 9309's unreachable
		e.Failures = prev + 1
		if final {
			e.Failures = max(e.Failures, robotsMaxFailures)
		}
		cause := "robots.txt: " + firstNonEmpty(e.Err, fmt.Sprintf("status %d", e.Status))
		c.setLastErr(host, cause)
		if e.Failures >= robotsMaxFailures {
			c.hostFailed(host, cause)
		} else {
			c.hostUnreachable(host, cause)
		}
	}
	rs.set(e, c.rules(e), c.cfg.RobotsTTL, c.cfg.RobotsRetry)
	c.applyCrawlDelay(host, rs)
	rs.mu.Lock()
	rules := rs.rules
	rs.mu.Unlock()
	c.discoverSitemaps(host, scheme, rules)
	if c.shared != nil && !c.shareRobots(e) {
		rs.mu.Lock()
		rs.unshared = true // saved when the host is this worker's again (syncSharedRobots)
		rs.mu.Unlock()
	}
	return errors.Join(keepErr, c.db.PutRobots(e))
}

// httpsUnanswered reports whether a request's error kind (retry.ClassifyError's reasons)
// means https could not connect or handshake, so that http may be tried instead.
func httpsUnanswered(kind string) bool {
	switch kind {
	case "conn-refused", "conn-reset", "tls", "protocol":
		return true
	}
	return false
}

// keepRobotsFetch stores one robots.txt response as received (body cut as the parser sees it),
// for the WARC export; the rules themselves are kept by PutRobots.
func (c *Crawler) keepRobotsFetch(resp *fetch.Response) error {
	body, truncated := resp.Body, resp.Truncated
	if len(body) > robotsMaxBytes {
		body, truncated = body[:robotsMaxBytes], true
	}
	return c.db.PutRobotsFetch(&storage.Page{
		URL: resp.URL.String(), FinalURL: resp.URL.String(), Status: resp.Status, StatusLine: resp.StatusLine,
		Proto: resp.Proto, Header: resp.Header, ReqHeader: resp.ReqHeader, ReqMethod: "GET",
		FetchedAt: resp.Started, Duration: resp.Duration, ContentType: resp.ContentType,
		Truncated: truncated, DecodedFrom: resp.DecodedFrom, RemoteAddr: resp.RemoteAddr, Body: body,
	})
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
