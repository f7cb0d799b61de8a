package metrics

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/crawl-project/crawl/internal/crawler"
)

// TopHosts is how many hosts get per-host series by default.
const TopHosts = 20

// Collector is a crawler.Observer that keeps Prometheus metrics, in a registry of its own (no
// global state). It is safe for concurrent use by multiple goroutines.
type Collector struct {
	reg *prometheus.Registry

	requests    *prometheus.CounterVec
	errors      *prometheus.CounterVec
	overLimit   *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	retries     *prometheus.CounterVec
	exhausted   *prometheus.CounterVec
	limiterWait prometheus.Histogram

	snap *snapshot
}

var _ crawler.Observer = (*Collector)(nil)

// New returns a Collector that gives per-host series to at most topHosts hosts (TopHosts if
// topHosts <= 0).
func New(topHosts int) *Collector {
	if topHosts <= 0 {
		topHosts = TopHosts
	}
	c := &Collector{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "crawl_requests_total",
			Help: "HTTP requests that ended, by kind (page or robots) and status class (1xx..5xx, or error when no response came).",
		}, []string{"kind", "class"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "crawl_request_errors_total",
			Help: "Requests that ended without a response, by fetch error kind.",
		}, []string{"kind"}),
		overLimit: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "crawl_over_limit_responses_total",
			Help: "Replies saying slow down (429 Too Many Requests, 503 Service Unavailable), by code.",
		}, []string{"code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "crawl_request_duration_seconds",
			Help:    "Time from sending a request until its body was read (or it failed), by kind.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12), // 1 ms … about 60 s
		}, []string{"kind"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "crawl_retries_total",
			Help: "Retries scheduled, by reason (status-429, timeout, ...).",
		}, []string{"reason"}),
		exhausted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "crawl_retry_budget_exhaustions_total",
			Help: "Retries deferred because a retry budget was empty, by budget (host or global).",
		}, []string{"scope"}),
		limiterWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "crawl_limiter_wait_seconds",
			Help:    "How long a host's ready work waited for its gate (token bucket, concurrency window, pause) before a request was admitted.",
			Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300},
		}),
		snap: newSnapshot(topHosts),
	}
	c.reg.MustRegister(c.requests, c.errors, c.overLimit, c.duration, c.retries, c.exhausted, c.limiterWait, c.snap,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return c
}

// Handler serves the metrics in the Prometheus exposition formats.
func (c *Collector) Handler() http.Handler {
	return promhttp.HandlerFor(c.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Gatherer returns the registry, for tests and for serving it some other way.
func (c *Collector) Gatherer() prometheus.Gatherer { return c.reg }

func kindLabel(robots bool) string {
	if robots {
		return "robots"
	}
	return "page"
}

// Request implements crawler.Observer.
func (c *Collector) Request(e crawler.RequestEvent) {
	kind := kindLabel(e.Robots)
	class := "error"
	if e.Status >= 100 && e.Status < 600 {
		class = strconv.Itoa(e.Status/100) + "xx"
	}
	c.requests.WithLabelValues(kind, class).Inc()
	if e.Status == 0 {
		c.errors.WithLabelValues(cmp.Or(e.ErrKind, "other")).Inc()
	}
	if e.OverLimit() {
		c.overLimit.WithLabelValues(strconv.Itoa(e.Status)).Inc()
	}
	c.duration.WithLabelValues(kind).Observe(e.Latency.Seconds())
}

// Retry implements crawler.Observer.
func (c *Collector) Retry(host, reason string) { c.retries.WithLabelValues(reason).Inc() }

// BudgetExhausted implements crawler.Observer.
func (c *Collector) BudgetExhausted(host, scope string) { c.exhausted.WithLabelValues(scope).Inc() }

// LimiterWait implements crawler.Observer.
func (c *Collector) LimiterWait(host string, wait time.Duration) {
	c.limiterWait.Observe(wait.Seconds())
}

// Tick implements crawler.Observer: the gauges show this tick until the next one.
func (c *Collector) Tick(t crawler.Tick) { c.snap.set(t) }

// snapshot is a prometheus.Collector that reports the latest tick as gauges. Building the
// series at scrape time (instead of setting gauge vectors each tick) lets hosts that drop out
// of the top N disappear without a window where a scrape sees half-updated vectors.
type snapshot struct {
	topN int

	mu   sync.Mutex
	tick crawler.Tick
	have bool

	urls, oldest, inFlight, budget, hosts, active, paused  *prometheus.Desc
	rate, accepted, window, hostInFlight, p95, baseline    *prometheus.Desc
	queued, fetched, hostOverLimit, hostBudget, hostPaused *prometheus.Desc
}

func newSnapshot(topN int) *snapshot {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &snapshot{
		topN:     topN,
		urls:     d("crawl_frontier_urls", "URLs the crawl knows, by state: queued (waiting, retries included), leased (being fetched), fetched, failed, excluded.", "state"),
		oldest:   d("crawl_frontier_oldest_ready_age_seconds", "Longest time any host's next ready URL has waited at the head of its queue."),
		inFlight: d("crawl_requests_in_flight", "Requests in flight, robots.txt included."),
		budget:   d("crawl_retry_budget_balance_tokens", "Tokens left in the whole crawl's retry budget."),
		hosts:    d("crawl_hosts", "Hosts the crawl knows."),
		active:   d("crawl_hosts_active", "Hosts with URLs queued or requests in flight."),
		paused:   d("crawl_hosts_paused", "Hosts paused by a Retry-After."),

		rate:          d("crawl_host_rate_requests_per_second", "Requests per second the host's controller allows now (busiest hosts only).", "host"),
		accepted:      d("crawl_host_accepted_rate_requests_per_second", "Successful replies per second the host's controller measured recently (busiest hosts only).", "host"),
		window:        d("crawl_host_window_requests", "Concurrency window: requests the host may have in flight (busiest hosts only).", "host"),
		hostInFlight:  d("crawl_host_in_flight_requests", "Requests in flight to the host (busiest hosts only).", "host"),
		p95:           d("crawl_host_latency_p95_seconds", "Recent p95 latency of the host's successful replies (busiest hosts only).", "host"),
		baseline:      d("crawl_host_latency_baseline_seconds", "The host's own low-load latency (busiest hosts only).", "host"),
		queued:        d("crawl_host_queued_urls", "URLs of the host queued (busiest hosts only).", "host"),
		fetched:       d("crawl_host_fetched_urls", "URLs of the host fetched, all runs together (busiest hosts only).", "host"),
		hostOverLimit: d("crawl_host_over_limit_responses", "429/503 replies the host's controller has seen since it was loaded (busiest hosts only).", "host"),
		hostBudget:    d("crawl_host_retry_budget_balance_tokens", "Tokens left in the host's retry budget (busiest hosts only).", "host"),
		hostPaused:    d("crawl_host_paused", "1 while the host is paused by a Retry-After, else 0 (busiest hosts only).", "host"),
	}
}

func (s *snapshot) set(t crawler.Tick) {
	s.mu.Lock()
	s.tick, s.have = t, true
	s.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (s *snapshot) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{s.urls, s.oldest, s.inFlight, s.budget, s.hosts, s.active, s.paused,
		s.rate, s.accepted, s.window, s.hostInFlight, s.p95, s.baseline, s.queued, s.fetched, s.hostOverLimit,
		s.hostBudget, s.hostPaused} {
		ch <- d
	}
}

// busiest returns the hosts that get series: those with work queued or in flight first, then
// the most pages fetched, then by name; at most n.
func busiest(hosts []crawler.HostStatus, n int) []crawler.HostStatus {
	busy := func(h crawler.HostStatus) bool { return h.InFlight > 0 || h.Queued > 0 }
	hs := slices.Clone(hosts)
	slices.SortStableFunc(hs, func(a, b crawler.HostStatus) int {
		if busy(a) != busy(b) {
			if busy(a) {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(b.Pages, a.Pages), cmp.Compare(a.Host, b.Host))
	})
	return hs[:min(n, len(hs))]
}

// Collect implements prometheus.Collector.
func (s *snapshot) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	t, have := s.tick, s.have
	s.mu.Unlock()
	if !have {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	st := t.Status
	gauge(s.urls, float64(st.Queued-st.InFlight), "queued")
	gauge(s.urls, float64(st.InFlight), "leased")
	gauge(s.urls, float64(st.Fetched), "fetched")
	gauge(s.urls, float64(st.Failed), "failed")
	gauge(s.urls, float64(st.Excluded), "excluded")
	gauge(s.oldest, t.OldestReady.Seconds())
	gauge(s.budget, t.RetryBudget)
	// st.Hosts lists the hosts contacted; the others are only counted.
	inFlight, active, paused := 0, st.HostsNotCrawledQueued, 0
	for _, h := range st.Hosts {
		inFlight += h.InFlight
		if h.InFlight > 0 || h.Queued > 0 {
			active++
		}
		if h.PausedUntil != nil {
			paused++
		}
	}
	gauge(s.inFlight, float64(inFlight))
	gauge(s.hosts, float64(len(st.Hosts)+st.HostsNotListed+st.HostsNotCrawled))
	gauge(s.active, float64(active))
	gauge(s.paused, float64(paused))
	for _, h := range busiest(st.Hosts, s.topN) {
		gauge(s.rate, h.Rate, h.Host)
		gauge(s.accepted, h.AcceptedRate, h.Host)
		gauge(s.window, float64(h.Window), h.Host)
		gauge(s.hostInFlight, float64(h.InFlight), h.Host)
		gauge(s.p95, h.P95Ms/1000, h.Host)
		gauge(s.baseline, h.BaselineMs/1000, h.Host)
		gauge(s.queued, float64(h.Queued), h.Host)
		gauge(s.fetched, float64(h.Pages), h.Host)
		gauge(s.hostOverLimit, float64(h.OverLimit), h.Host)
		if b, ok := t.HostRetryBudget[h.Host]; ok {
			gauge(s.hostBudget, b, h.Host)
		}
		p := 0.0
		if h.PausedUntil != nil {
			p = 1
		}
		gauge(s.hostPaused, p, h.Host)
	}
}
