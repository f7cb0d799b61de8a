package crawler

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/crawl-project/crawl/hostlimit"
	"github.com/crawl-project/crawl/internal/retry"
	"github.com/crawl-project/crawl/storage"
)

// This file is how the crawl can be watched: counters for the progress line and `crawl status`
// (Status.Run), per-host samples in the store for `crawl report` (storage.Sample), and events
// for an optional Observer (the Prometheus metrics). The loop calls in at a few points: when a
// request ends, when a retry is scheduled or a retry budget is empty, when a host's gate
// admits a request, and on every status tick.

// Observer receives the crawl's events as they happen. Request, Retry, BudgetExhausted and
// LimiterWait are called from the fetch goroutines and the dispatcher at once, so an Observer
// must be safe for concurrent use; Tick is called from the dispatcher goroutine once per status
// interval (Config.StatusEvery) and at the end of Run. No method may block: the crawl waits for
// them.
type Observer interface {
	Request(RequestEvent)
	// Retry: a URL of host was scheduled for another attempt; reason is the retry class
	// ("status-429", "timeout", …: a small fixed set).
	Retry(host, reason string)
	// BudgetExhausted: a retry on host was deferred because a retry budget was empty; scope
	// is "host" (the host's own budget) or "global" (the whole crawl's).
	BudgetExhausted(host, scope string)
	// LimiterWait: host's gate admitted a request after the host's ready work had waited wait
	// for it (for the token bucket, the concurrency window or a pause; 0 if admitted at once).
	LimiterWait(host string, wait time.Duration)
	Tick(Tick)
}

// RequestEvent is one HTTP request that ended: a page fetch or a robots.txt fetch (each
// redirect hop is its own request).
type RequestEvent struct {
	Host    string
	Robots  bool          // a robots.txt request; otherwise a page
	Status  int           // HTTP status; 0 when the request ended without a response
	ErrKind string        // when Status is 0: the fetch error kind ("timeout", "conn-refused", …)
	Latency time.Duration // from sending the request until its body was read, or the error
}

// OverLimit reports whether the host said "slow down": 429, 503 and their kin
// (retry.StatusKind.SlowDown).
func (e RequestEvent) OverLimit() bool { return retry.KindOf(e.Status).SlowDown() }

// Failed reports whether the request counts as an error: no response, or a 5xx other than a
// "slow down" (retry.StatusKind.Failed).
func (e RequestEvent) Failed() bool { return retry.KindOf(e.Status).Failed() }

// Tick is the crawl's state once per status interval.
type Tick struct {
	Status Status
	// OldestReady is the longest time any host's next ready URL has waited at the head of its
	// queue: since the host last had a request admitted, or since it had ready work at all.
	// (The frontier keeps no enqueue times, so this is the age of the oldest head of a ready
	// queue, not of the oldest URL.) It grows while a host is paused, blocked by its gate or
	// held back by the --workers cap.
	OldestReady     time.Duration
	RetryBudget     float64            // tokens left in the whole crawl's retry budget
	HostRetryBudget map[string]float64 // tokens left in each host's retry budget (hosts with one)
}

// RunCounters are this process's request counters since Run started (Status.Run).
type RunCounters struct {
	Requests        int `json:"requests"`         // requests that ended, robots.txt included
	OverLimit       int `json:"over_limit"`       // "slow down" replies: 429, 503 and their kin
	Retries         int `json:"retries"`          // retries scheduled
	Errors          int `json:"errors"`           // no response, or a 5xx other than a "slow down"
	BudgetExhausted int `json:"budget_exhausted"` // retries deferred because a retry budget was empty
	// Pages counts the pages this process fetched and stored since Run started (RunTally.Fetched):
	// for a worker of a shared crawl, its own, while Status.Fetched is the crawl's.
	Pages int `json:"pages"`
}

// SetObserver makes o receive the crawl's events. Call it before Run.
func (c *Crawler) SetObserver(o Observer) { c.ob.obs = o }

// maxLatencies bounds the latencies kept per host per interval for its p50/p95.
const maxLatencies = 256

// observation is the Crawler's watching state. The zero value is ready to use.
type observation struct {
	obs Observer

	mu     sync.Mutex
	totals RunCounters
	hosts  map[string]*interval // events since the last tick, by host
	all    interval             // events since the last tick, all hosts

	// Owned by the dispatcher goroutine (dispatch, and publishStatus which Run calls).
	ready       map[string]*readyHost
	hostList    hostList  // the hosts the last scan listed (snapshot)
	relistAt    time.Time // when a running snapshot scans the hosts again
	lastTick    time.Time
	lastPages   map[string]int
	lastFetched int
	sampleErr   bool // a sample write failed (logged once)
}

// readyHost is a host with ready work, as the dispatcher last saw it.
type readyHost struct {
	since   time.Time // its next URL became the head of a ready queue
	blocked time.Time // its gate first refused it since the last admission (zero: not refused)
}

// interval accumulates one host's (or all hosts') requests between two ticks.
type interval struct {
	requests, overLimit, retries, errors int
	busy                                 time.Duration   // the latencies' sum
	lat                                  []time.Duration // every stride-th latency, at most maxLatencies
	stride, skipped                      int
}

func (iv *interval) addLatency(d time.Duration) {
	if iv.stride == 0 {
		iv.stride = 1
	}
	if iv.skipped++; iv.skipped < iv.stride {
		return
	}
	iv.skipped = 0
	if len(iv.lat) == maxLatencies {
		// Thin evenly: keep every other latency, and take every other one from now on.
		for i := range maxLatencies / 2 {
			iv.lat[i] = iv.lat[2*i+1]
		}
		iv.lat = iv.lat[:maxLatencies/2]
		iv.stride *= 2
	}
	iv.lat = append(iv.lat, d)
}

// quantiles returns the p50 and p95 (nearest rank) of the latencies kept.
func (iv *interval) quantiles() (p50, p95 time.Duration) {
	if len(iv.lat) == 0 {
		return 0, 0
	}
	s := slices.Clone(iv.lat)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(int(q*float64(len(s))), len(s)-1)] }
	return at(0.50), at(0.95)
}

func (o *observation) hostLocked(host string) *interval {
	if o.hosts == nil {
		o.hosts = map[string]*interval{}
	}
	iv := o.hosts[host]
	if iv == nil {
		iv = &interval{}
		o.hosts[host] = iv
	}
	return iv
}

// observeRequest records one request that ended.
func (c *Crawler) observeRequest(e RequestEvent) {
	o := &c.ob
	o.mu.Lock()
	o.totals.Requests++
	for _, iv := range []*interval{o.hostLocked(e.Host), &o.all} {
		iv.requests++
		iv.busy += e.Latency
		iv.addLatency(e.Latency)
		if e.OverLimit() {
			iv.overLimit++
		}
		if e.Failed() {
			iv.errors++
		}
	}
	if e.OverLimit() {
		o.totals.OverLimit++
	}
	if e.Failed() {
		o.totals.Errors++
	}
	o.mu.Unlock()
	if o.obs != nil {
		o.obs.Request(e)
	}
}

// observeRetry records a retry scheduled for a URL of host.
func (c *Crawler) observeRetry(host, reason string) {
	o := &c.ob
	o.mu.Lock()
	o.totals.Retries++
	o.hostLocked(host).retries++
	o.all.retries++
	o.mu.Unlock()
	if o.obs != nil {
		o.obs.Retry(host, reason)
	}
}

// withdrawRetry takes one retry from host's budget, then from the crawl's, and reports whether
// both allowed it; an empty budget is recorded as an exhaustion.
func (c *Crawler) withdrawRetry(host string, now time.Time) bool {
	scope := ""
	switch {
	case !c.budget(host).Withdraw(now):
		scope = "host"
	case !c.global.Withdraw(now):
		scope = "global"
	default:
		return true
	}
	o := &c.ob
	o.mu.Lock()
	o.totals.BudgetExhausted++
	o.mu.Unlock()
	if o.obs != nil {
		o.obs.BudgetExhausted(host, scope)
	}
	return false
}

// noteReady tells the observation that hosts have ready work from now on (frontier.TakeReady).
// Dispatcher only.
func (c *Crawler) noteReady(now time.Time, hosts []string) {
	o := &c.ob
	if o.ready == nil {
		o.ready = map[string]*readyHost{}
	}
	for _, h := range hosts {
		if o.ready[h] == nil {
			o.ready[h] = &readyHost{since: now}
		}
	}
}

// noteNotReady tells the observation that host has no ready work. Dispatcher only.
func (c *Crawler) noteNotReady(host string) { delete(c.ob.ready, host) }

// tryAdmit is Registry.TryAdmit on host's gate that measures how long the host's ready work
// waited for it. Dispatcher only.
func (c *Crawler) tryAdmit(now time.Time, host, gate string) (*hostlimit.Ticket, time.Time) {
	t, readyAt := c.reg.TryAdmit(now, gate)
	r := c.ob.ready[host]
	if t == nil && !readyAt.IsZero() {
		c.held = append(c.held, gate)
	}
	if t == nil {
		if r != nil && r.blocked.IsZero() {
			r.blocked = now
		}
		return nil, readyAt
	}
	var wait time.Duration
	if r != nil {
		if !r.blocked.IsZero() {
			wait = now.Sub(r.blocked)
		}
		r.since, r.blocked = now, time.Time{}
	}
	if c.ob.obs != nil {
		c.ob.obs.LimiterWait(host, wait)
	}
	return t, readyAt
}

// waitAdmit is Registry.Wait on host's gate that reports how long it waited.
func (c *Crawler) waitAdmit(ctx context.Context, host string) (*hostlimit.Ticket, error) {
	start := time.Now()
	t, err := c.reg.Wait(ctx, c.gates.keyNow(ctx, host))
	if err == nil && c.ob.obs != nil {
		c.ob.obs.LimiterWait(host, time.Since(start))
	}
	return t, err
}

// run returns the counters for Status.Run: nil for a crawl that is not running and made no
// request in this process (crawl status on a stopped store).
func (o *observation) run(running bool) *RunCounters {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !running && o.totals == (RunCounters{}) {
		return nil
	}
	r := o.totals
	return &r
}

// meanInFlight is the mean number of requests in flight over an interval of length span, by
// Little's law: the time the requests that ended in it took, divided by span.
func meanInFlight(iv *interval, span time.Duration) float64 {
	if iv == nil || span <= 0 {
		return 0
	}
	return float64(iv.busy) / float64(span)
}

// observed is called with every published status (from the dispatcher goroutine): it records
// one sample per active host and one for the whole crawl in the store, and passes the tick to
// the Observer. A host is active in an interval when it had a request in flight or finished
// one, fetched a page, or is paused.
func (c *Crawler) observed(st Status) {
	o := &c.ob
	now := st.UpdatedAt
	o.mu.Lock()
	hosts, all := o.hosts, o.all
	o.hosts, o.all = nil, interval{}
	o.mu.Unlock()

	first := o.lastTick.IsZero()
	var span time.Duration
	if !first {
		span = now.Sub(o.lastTick)
	}
	o.lastTick = now
	if o.lastPages == nil {
		o.lastPages = map[string]int{}
	}
	batch := map[string]storage.Sample{}
	active := 0
	for _, h := range st.Hosts {
		pages := 0
		if prev, ok := o.lastPages[h.Host]; ok {
			pages = h.Pages - prev
		} else if !first {
			pages = h.Pages // a host new in this run
		}
		o.lastPages[h.Host] = h.Pages
		iv := hosts[h.Host]
		if iv == nil && h.InFlight == 0 && h.PausedUntil == nil && pages == 0 {
			continue
		}
		active++
		s := storage.Sample{
			At: now, Span: span, Rate: h.Rate, Limit: h.Rate, Accepted: h.AcceptedRate,
			Window: float64(h.Window), InFlight: meanInFlight(iv, span), Queued: float64(h.Queued), Pages: pages,
		}
		if g, ok := c.reg.Host(now, c.gates.known(h.Host)); ok {
			s.Limit = g.Limit
		}
		if iv != nil {
			s.Requests, s.OverLimit, s.Retries, s.Errors = iv.requests, iv.overLimit, iv.retries, iv.errors
			s.P50, s.P95 = iv.quantiles()
		}
		if h.PausedUntil != nil {
			s.PausedUntil = *h.PausedUntil
		}
		batch[h.Host] = s
	}
	active = max(active, len(hosts)) // a running snapshot lists only the busiest hosts
	crawl := storage.Sample{
		At: now, Span: span, Queued: float64(st.Queued), InFlight: meanInFlight(&all, span), Hosts: float64(active),
		Requests: all.requests, OverLimit: all.overLimit, Retries: all.retries, Errors: all.errors,
	}
	if !first {
		crawl.Pages = st.Fetched - o.lastFetched
	}
	o.lastFetched = st.Fetched
	crawl.P50, crawl.P95 = all.quantiles()
	batch[storage.CrawlWide] = crawl
	if err := c.db.AddSamples(batch); err != nil && !o.sampleErr {
		o.sampleErr = true
		c.log.Warn("cannot record samples for crawl report", "err", err)
	}

	if o.obs == nil {
		return
	}
	t := Tick{Status: st, HostRetryBudget: map[string]float64{}}
	for _, r := range o.ready {
		t.OldestReady = max(t.OldestReady, now.Sub(r.since))
	}
	if c.global != nil {
		t.RetryBudget = c.global.Balance()
	}
	c.mu.Lock()
	for h, r := range c.hosts {
		if r.budget != nil {
			t.HostRetryBudget[h] = r.budget.Balance()
		}
	}
	c.mu.Unlock()
	o.obs.Tick(t)
}
