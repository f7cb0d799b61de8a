package simweb

import (
	"cmp"
	"math"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// host is one simulated server. Its fields are fixed after Start except st, which mu guards.
type host struct {
	web    *Web
	index  int // in spec order
	spec   HostSpec
	base   string // "http://127.0.0.1:PORT" ("http://NAME:PORT" with Options.VirtualHosts)
	site   *site
	robots []byte
	sem    chan struct{} // nil when spec.Workers == 0
	flaky  *rand.Rand    // HostSpec.Flaky's draws; guarded by mu

	mu        sync.Mutex
	st        hostState
	revisions map[string]int // HostSpec.Revisions: page path -> revision (Web.Change); kept by reset
}

// hostState is everything a request can change. hostState requires host.mu to be held.
type hostState struct {
	lim        *rate.Limiter
	dropped    bool      // LimitDrop applied
	deadline   time.Time // latest Retry-After deadline announced
	opened     time.Time // arrival of the refusal that opened the current window
	strikes    int
	robotsDone bool      // a /robots.txt request has been answered usably (not the 5xx of RobotsFailures)
	robotsFail int       // /robots.txt requests answered 503 for RobotsFailures
	refused    bool      // the first page request has been refused (HostSpec.RefuseFirst)
	winStart   time.Time // HostSpec.FixedWindow: when the current window began (zero: none yet)
	winCount   int       // requests the current window has admitted
	inFlight   int
	recent     []time.Time // arrivals within the last EvasiveWindow (HostSpec.Evasive)
	blockedTo  time.Time   // the Evasive block lasts until then
	stats      HostStats
	latencies  []time.Duration
}

// reset returns the state to that of a fresh host, keeping the live in-flight count.
// reset requires h.mu to be held.
func (h *host) reset() {
	lim := rate.NewLimiter(rate.Inf, 0)
	if h.spec.Limit > 0 {
		lim = rate.NewLimiter(rate.Limit(h.spec.Limit), h.spec.burst())
	}
	inFlight := h.st.inFlight
	h.st = hostState{lim: lim, inFlight: inFlight}
	h.st.stats.PeakInFlight = inFlight
	h.st.stats.Fetched = make(map[string]int)
}

type verdict int

const (
	admitted verdict = iota
	overLimit
	banned
	robotsDown // an admitted /robots.txt request answered 503 (HostSpec.RobotsFailures)
	flaked     // an admitted page request answered HostSpec.FlakyStatus (HostSpec.Flaky)
)

// admit counts a request arriving at now for path p and decides whether it is served.
// For overLimit it also returns the announced deadline and whole seconds to wait; quota is the
// host's limit as the answer states it (HostSpec.Headers).
func (h *host) admit(now time.Time, p string) (v verdict, deadline time.Time, secs int, quota quotaView) {
	v, deadline, secs = h.admitLocked(now, p)
	if h.spec.Headers != HeadersNone && h.spec.Limit > 0 {
		quota = h.quotaLocked(now)
	}
	h.mu.Unlock()
	return v, deadline, secs, quota
}

// admitLocked is admit without the quota; it takes h.mu and returns with it held.
func (h *host) admitLocked(now time.Time, p string) (v verdict, deadline time.Time, secs int) {
	h.mu.Lock()
	s := &h.st
	st := &s.stats
	if h.web.kernel && now.Before(st.LastRequest) { // its handler overtaken by a later arrival's
		now = st.LastRequest
	}
	st.Requests++
	isRobots := p == "/robots.txt"
	if isRobots {
		st.RobotsRequests++
	} else {
		st.PageRequests++
		if !s.robotsDone {
			st.BeforeRobots++
		}
		if !allowed(&h.spec, p) {
			st.RobotsViolations++
		}
	}
	if st.FirstRequest.IsZero() {
		st.FirstRequest = now
	}
	if now.After(st.LastRequest) {
		st.LastRequest = now
	}
	s.inFlight++
	st.PeakInFlight = max(st.PeakInFlight, s.inFlight)

	if d := h.spec.LimitDrop; d != nil && !s.dropped && now.Sub(st.FirstRequest) >= d.After {
		s.lim.SetLimitAt(now, rate.Limit(h.spec.Limit*d.Factor))
		s.dropped = true
		st.DroppedAt = now
	}
	if st.Banned {
		st.BannedRequests++
		return banned, time.Time{}, 0
	}
	if h.evasive(now) {
		st.Blocked++
		return banned, time.Time{}, 0
	}
	announces := h.spec.Reply.announces()
	inWindow := now.Before(s.deadline)
	if inWindow && now.Sub(s.opened) >= h.web.grace {
		st.InRetryAfter++
		if announces {
			s.strikes++
		}
	}
	v = admitted
	first := h.spec.RefuseFirst && !isRobots && !s.refused // refused without taking a token
	refuse, wait := first, time.Duration(0)                // RefuseFirst: come back in a second
	if !first {
		var ok bool
		ok, wait = h.allowLocked(now)
		refuse = !ok
	}
	if refuse {
		v = overLimit
		st.OverLimit++
		st.OverLimitAt = append(st.OverLimitAt, now)
		if !announces {
			s.strikes++
		}
		if first {
			s.refused = true
		}
		secs = max(1, int(math.Ceil(wait.Seconds()-1e-9)))
		deadline = now.Add(time.Duration(secs) * time.Second)
		if h.spec.Reply == Reply429Date {
			// An HTTP-date has whole seconds: announce the first whole second after the token.
			deadline = now.Add(wait).Truncate(time.Second).Add(time.Second)
		}
		if announces {
			if !inWindow {
				s.opened = now // a refusal met outside any window opens a new one
			}
			if deadline.After(s.deadline) {
				s.deadline = deadline
			}
		}
	}
	if h.spec.BanAfter > 0 && s.strikes > h.spec.BanAfter {
		st.Banned = true
	}
	if v == admitted && !isRobots && h.spec.Flaky > 0 && h.flaky.Float64() < h.spec.Flaky {
		st.Flaky++
		return flaked, deadline, secs
	}
	if v == admitted && isRobots {
		if s.robotsFail < h.spec.RobotsFailures {
			s.robotsFail++
			return robotsDown, deadline, secs
		}
		s.robotsDone = true
	}
	return v, deadline, secs
}

// evasive counts a request arriving at now against HostSpec.Evasive and reports whether it is
// blocked. evasive requires h.mu to be held.
func (h *host) evasive(now time.Time) bool {
	if h.spec.Evasive <= 0 {
		return false
	}
	s := &h.st
	if now.Before(s.blockedTo) {
		s.blockedTo = now.Add(h.spec.EvasiveBlock) // a request during the block starts it again
		return true
	}
	keep := s.recent[:0]
	for _, t := range s.recent {
		if now.Sub(t) < h.spec.EvasiveWindow {
			keep = append(keep, t)
		}
	}
	s.recent = append(keep, now)
	if len(s.recent) > h.spec.Evasive {
		s.blockedTo = now.Add(h.spec.EvasiveBlock)
		s.recent = s.recent[:0]
		return true
	}
	return false
}

// done records the end of a request; served reports whether it was admitted and answered
// (its latency is kept); status and url (for page 200s) update the counters.
func (h *host) done(served bool, latency time.Duration, status int, pageURL string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &h.st
	s.inFlight--
	if !served {
		return
	}
	s.latencies = append(s.latencies, latency)
	switch {
	case status >= 200 && status < 300:
		s.stats.OK++
	case status == http.StatusNotModified:
		s.stats.NotModified++
	case status == http.StatusNotFound:
		s.stats.NotFound++
	}
	if pageURL != "" {
		s.stats.Fetched[pageURL]++
		if s.stats.Fetched[pageURL] > 1 {
			s.stats.Duplicates++
		}
	}
}

// snapshot returns a deep copy of the counters with latency percentiles filled in.
func (h *host) snapshot() HostStats {
	h.mu.Lock()
	st := h.st.stats
	st.Fetched = make(map[string]int, len(h.st.stats.Fetched))
	for k, v := range h.st.stats.Fetched {
		st.Fetched[k] = v
	}
	st.OverLimitAt = append([]time.Time(nil), h.st.stats.OverLimitAt...)
	st.InFlight = h.st.inFlight
	lat := append([]time.Duration(nil), h.st.latencies...)
	h.mu.Unlock()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	st.LatencyP50 = percentile(lat, 50)
	st.LatencyP95 = percentile(lat, 95)
	return st
}

// percentile returns the nearest-rank p-th percentile of sorted, or 0 if it is empty.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	return sorted[max(rank, 1)-1]
}

func (h *host) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.web.enter() {
		http.Error(w, "closing", http.StatusServiceUnavailable)
		return
	}
	defer h.web.leave()
	start := time.Now()
	now := h.web.arrival(r)
	w.Header().Set("Date", now.UTC().Format(http.TimeFormat))
	p := r.URL.Path

	h.web.arrive(now)
	v, deadline, secs, quota := h.admit(now, p)
	if h.spec.Headers != HeadersNone && h.spec.Limit > 0 && v != banned {
		h.writeQuota(w.Header(), quota, now)
	}
	switch v {
	case banned:
		h.done(false, 0, 0, "")
		http.Error(w, "banned", http.StatusForbidden)
		return
	case robotsDown:
		h.done(false, 0, 0, "")
		http.Error(w, "robots.txt temporarily unavailable", http.StatusServiceUnavailable)
		return
	case flaked:
		h.done(false, 0, 0, "")
		status := cmp.Or(h.spec.FlakyStatus, http.StatusBadGateway)
		http.Error(w, http.StatusText(status), status)
		return
	case overLimit:
		h.done(false, 0, 0, "")
		status := http.StatusTooManyRequests
		switch h.spec.Reply {
		case Reply429Seconds:
			w.Header().Set("Retry-After", strconv.Itoa(secs))
		case Reply429Date:
			w.Header().Set("Retry-After", deadline.UTC().Format(http.TimeFormat))
		case Reply503RetryAfter:
			status = http.StatusServiceUnavailable
			w.Header().Set("Retry-After", strconv.Itoa(secs))
		}
		http.Error(w, http.StatusText(status), status)
		return
	}

	if !h.hold(r) {
		h.done(false, 0, 0, "")
		panic(http.ErrAbortHandler) // drop the connection: no answer, not even an empty 200
	}
	// The answer is counted when its status is written, before any byte of it can reach the
	// client: a client that has read the whole answer then always finds it in Stats.
	cw := &countingWriter{ResponseWriter: w, count: func(status int) {
		pageURL := ""
		if _, ok := h.site.byPath[p]; ok && status == http.StatusOK {
			pageURL = h.base + p
		}
		h.done(true, time.Since(start), status, pageURL)
	}}
	h.respond(cw, r)
	cw.flushCount(http.StatusOK) // a handler that wrote nothing is answered 200 on return
}

// hold waits for a worker slot (if the host has a pool) and for the service time, returning
// false if the client or the Web went away first. The slot is released before returning.
func (h *host) hold(r *http.Request) bool {
	if h.sem != nil {
		select {
		case h.sem <- struct{}{}:
			defer func() { <-h.sem }()
		case <-r.Context().Done():
			return false
		case <-h.web.closing:
			return false
		}
	}
	if h.spec.Service <= 0 {
		return true
	}
	t := time.NewTimer(h.spec.Service)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	case <-h.web.closing:
		return false
	}
}

// respond writes the answer to an admitted request.
func (h *host) respond(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if x := h.spec.Extra[p]; x != nil && p != "/robots.txt" {
		x.ServeHTTP(w, r) // any method: the handler answers it
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if p == "/robots.txt" {
		if st := h.spec.robotsStatus(); st != http.StatusOK {
			http.Error(w, http.StatusText(st), st)
			return
		}
		body := h.robots
		if h.spec.Sitemaps {
			body = append(append([]byte(nil), body...), sitemapRobotsLine(r)...)
		}
		writeBody(w, "text/plain; charset=utf-8", body)
		return
	}
	if h.spec.Assets && serveAsset(w, r, p) {
		return
	}
	if h.spec.Sitemaps && serveSitemap(w, r, p) {
		return
	}
	if i, ok := h.site.byPath[p]; ok {
		rev, revising := h.revision(p)
		if revising {
			h.countConditional(r)
			if notModified(w, r, i, rev) {
				w.WriteHeader(http.StatusNotModified)
				return
			}
		}
		body := h.site.pages[i].body
		if body == nil { // a lazy web
			body = renderPage(h.web.sites, h.web.specs, h.web.bases, h.index, i)
		}
		writeBody(w, "text/html; charset=utf-8", revised(body, rev))
		return
	}
	http.NotFound(w, r)
}

func writeBody(w http.ResponseWriter, ctype string, body []byte) {
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body) // a client that went away is not the server's problem
}

// countingWriter calls count once, with the status, when the answer's status is written.
type countingWriter struct {
	http.ResponseWriter
	count   func(status int)
	counted bool
}

func (c *countingWriter) flushCount(status int) {
	if !c.counted {
		c.counted = true
		c.count(status)
	}
}

func (c *countingWriter) WriteHeader(code int) {
	if code >= 200 { // 1xx answers are not the final status
		c.flushCount(code)
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *countingWriter) Write(b []byte) (int, error) {
	c.flushCount(http.StatusOK)
	return c.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
