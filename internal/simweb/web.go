package simweb

import (
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// HostStats are one host's counters since Start (or the last Reset). All requests to a host are
// treated as coming from one client.
type HostStats struct {
	Requests       int // every request that reached the host
	PageRequests   int // requests for any path other than /robots.txt
	RobotsRequests int // requests for /robots.txt

	OK       int // admitted requests answered 2xx (pages, robots.txt, Extra)
	NotFound int // admitted requests answered 404

	// Conditional counts page requests carrying If-None-Match or If-Modified-Since to a host
	// with Revisions; NotModified the answers 304 Not Modified.
	Conditional int
	NotModified int

	OverLimit int // requests refused by the token bucket (429 or 503)
	// InRetryAfter counts requests that arrived before the latest Retry-After deadline the host
	// had announced (whether or not the bucket then had a token), except those arriving within
	// Options.Grace of the refusal that opened the window. A polite client scores 0.
	InRetryAfter int

	// RobotsViolations counts requests, whatever their outcome, for paths robots.txt disallows
	// (every path but /robots.txt when RobotsStatus is 5xx).
	RobotsViolations int
	// BeforeRobots counts non-robots requests that arrived before any /robots.txt request had
	// been answered usably (the 503s of RobotsFailures do not count as an answer).
	BeforeRobots int

	Duplicates   int // page 200s beyond the first for the same URL
	PeakInFlight int // most requests inside the handler at once, queued ones included
	InFlight     int // requests inside the handler when the copy was made

	Banned         bool // the client crossed BanAfter strikes
	BannedRequests int  // requests answered 403 because of the ban
	Blocked        int  // requests answered 403 by the Evasive block
	Flaky          int  // page requests answered 502 at random (HostSpec.Flaky)

	// Latency percentiles (nearest rank) of admitted requests: real time spent in the handler,
	// waiting for a worker included. Refused requests (429/503/403) are not sampled.
	LatencyP50, LatencyP95 time.Duration

	FirstRequest, LastRequest time.Time // arrival times by the Web's clock; zero if none

	OverLimitAt []time.Time // arrival time of each refused request, in order
	DroppedAt   time.Time   // when LimitDrop took effect; zero if it has not

	// Fetched maps each page URL (as in Expected) to the number of 200 answers it got.
	Fetched map[string]int
}

// Web is a running set of simulated hosts. It is safe for concurrent use by multiple goroutines.
type Web struct {
	clock    func() time.Time
	kernel   bool // Options.KernelArrival
	grace    time.Duration
	hosts    []*host
	byName   map[string]*host
	expected map[string][]string
	addr     string // the one listener's address with VirtualHosts, else ""
	servers  []*http.Server

	// A lazy web (VirtualHosts, or a host with Links) renders each page per request from
	// these; nil otherwise.
	sites []site
	specs []HostSpec
	bases []string

	arrMu    sync.Mutex
	arrivals arrivals // guarded by arrMu

	gate     sync.RWMutex // guards closed against handler entry
	closed   bool
	handlers sync.WaitGroup // handlers running
	serving  sync.WaitGroup // Serve goroutines
	closing  chan struct{}
	once     sync.Once
}

// Start binds one loopback listener per spec (one for all, with Options.VirtualHosts), builds
// every host's pages from opts.Seed and starts serving. The caller must call Close. It returns an
// error wrapping ErrBadSpec for invalid specs, or the listen error.
func Start(specs []HostSpec, opts *Options) (*Web, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.KernelArrival && o.Clock != nil {
		return nil, fmt.Errorf("%w: KernelArrival needs the real clock (Clock nil)", ErrBadSpec)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if err := validate(specs, o.VirtualHosts); err != nil {
		return nil, err
	}
	specs = append([]HostSpec(nil), specs...)
	lazy := o.VirtualHosts || slices.ContainsFunc(specs, func(s HostSpec) bool { return s.Links > 0 })
	sites := buildSites(specs, o.Seed, lazy)
	for i := range specs {
		for p := range specs[i].Extra {
			if _, clash := sites[i].byPath[p]; clash {
				return nil, fmt.Errorf("%w: host %q: Extra %q is a page path", ErrBadSpec, specs[i].Name, p)
			}
		}
	}

	w := &Web{
		clock:   o.Clock,
		grace:   max(o.Grace, 0),
		kernel:  o.KernelArrival,
		byName:  make(map[string]*host, len(specs)),
		closing: make(chan struct{}),
	}
	lns, bases, err := listenAll(specs, &o)
	if err != nil {
		return nil, err
	}
	w.hosts = make([]*host, len(specs))
	for i := range specs {
		h := &host{
			web:    w,
			index:  i,
			spec:   specs[i],
			base:   bases[i],
			site:   &sites[i],
			robots: robotsTxt(&specs[i]),
			flaky:  rand.New(rand.NewPCG(uint64(o.Seed), uint64(i)|1<<32)),
		}
		if specs[i].Workers > 0 {
			h.sem = make(chan struct{}, specs[i].Workers)
		}
		h.reset()
		w.hosts[i] = h
		w.byName[specs[i].Name] = h
	}
	if lazy {
		w.sites, w.specs, w.bases = sites, specs, bases // pages are rendered per request
	} else {
		render(sites, specs, bases)
	}
	w.expected = expected(sites, specs, bases)
	if o.VirtualHosts {
		w.addr = lns[0].Addr().String()
		w.servers = []*http.Server{newServer(http.HandlerFunc(w.route))}
	} else {
		for _, h := range w.hosts {
			w.servers = append(w.servers, newServer(h))
		}
	}
	for i, srv := range w.servers {
		if o.KernelArrival {
			lns[i] = KernelArrivals(srv, lns[i])
		}
	}
	for i, srv := range w.servers {
		// Serve returns http.ErrServerClosed after Close; any other error means the listener
		// died, which the hosts' silence (and the client's errors) already shows.
		w.serving.Go(func() { _ = srv.Serve(lns[i]) })
	}
	return w, nil
}

func newServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
}

// listenAll binds the Web's listeners and returns them with each host's base URL
// ("http://ip:port", or "http://NAME:port" with VirtualHosts, where one listener serves all).
func listenAll(specs []HostSpec, o *Options) ([]net.Listener, []string, error) {
	bases := make([]string, len(specs))
	if o.VirtualHosts {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return nil, nil, fmt.Errorf("simweb: %w", err)
		}
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		for i := range specs {
			bases[i] = "http://" + net.JoinHostPort(specs[i].Name, port)
		}
		return []net.Listener{ln}, bases, nil
	}
	var lns []net.Listener
	for i := range specs {
		ln, err := listen(i, o.LoopbackIPs)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, nil, fmt.Errorf("simweb: host %q: %w", specs[i].Name, err)
		}
		lns = append(lns, ln)
		bases[i] = "http://" + ln.Addr().String()
	}
	return lns, bases, nil
}

// listen binds host i: 127.0.0.(i+2) when ips is set and that address can be bound, else
// 127.0.0.1, always on a free port.
func listen(i int, ips bool) (net.Listener, error) {
	if ips {
		if ln, err := net.Listen("tcp4", "127.0.0."+strconv.Itoa(i+2)+":0"); err == nil {
			return ln, nil
		}
	}
	return net.Listen("tcp4", "127.0.0.1:0")
}

// route serves a request with VirtualHosts: the host its Host header names, else 421.
func (w *Web) route(rw http.ResponseWriter, r *http.Request) {
	name := r.Host
	if h, _, err := net.SplitHostPort(name); err == nil {
		name = h
	}
	h := w.byName[strings.ToLower(strings.TrimSuffix(name, "."))]
	if h == nil {
		http.Error(rw, "no such host here", http.StatusMisdirectedRequest)
		return
	}
	h.ServeHTTP(rw, r)
}

// enter registers a handler; it returns false once Close has begun.
func (w *Web) enter() bool {
	w.gate.RLock()
	defer w.gate.RUnlock()
	if w.closed {
		return false
	}
	w.handlers.Add(1)
	return true
}

func (w *Web) leave() { w.handlers.Done() }

// Close stops every host, aborts requests waiting for a worker or service time, and returns once
// all handlers and serving goroutines have finished. It is safe to call more than once.
func (w *Web) Close() {
	w.once.Do(func() {
		w.gate.Lock()
		w.closed = true
		w.gate.Unlock()
		close(w.closing)
		for _, srv := range w.servers {
			srv.Close()
		}
		w.handlers.Wait()
		w.serving.Wait()
	})
}

// Names returns the host names in spec order.
func (w *Web) Names() []string {
	out := make([]string, len(w.hosts))
	for i, h := range w.hosts {
		out[i] = h.spec.Name
	}
	return out
}

// Handler returns host name's handler, for a caller that serves requests in-process (on a
// fake Clock, where a loopback round trip adds only CPU); nil for a name not in the web.
func (w *Web) Handler(name string) http.Handler {
	if h := w.byName[name]; h != nil {
		return h
	}
	return nil
}

// Addr returns the address every host is served on with Options.VirtualHosts
// ("127.0.0.1:PORT"), or "" without it: a client may dial it for any host name of the Web.
func (w *Web) Addr() string { return w.addr }

// Seeds returns every host's root URL ("http://127.0.0.1:PORT/", or "http://NAME:PORT/" with
// VirtualHosts) in spec order.
func (w *Web) Seeds() []string {
	out := make([]string, len(w.hosts))
	for i, h := range w.hosts {
		out[i] = h.base + "/"
	}
	return out
}

// URL returns the root URL (as in Seeds) of the named host, or "" if there is none.
func (w *Web) URL(name string) string {
	h := w.byName[name]
	if h == nil {
		return ""
	}
	return h.base + "/"
}

// Expected returns, per host name, the sorted URLs ("http://127.0.0.1:PORT/p12", root as
// "http://127.0.0.1:PORT/") that a perfect polite crawl seeded with Seeds stores: pages reachable
// from the roots without passing through a page robots.txt disallows. Fragments are never part
// of these URLs. Every host has an entry, possibly empty. The caller owns the result.
func (w *Web) Expected() map[string][]string {
	out := make(map[string][]string, len(w.expected))
	for k, v := range w.expected {
		out[k] = append([]string{}, v...)
	}
	return out
}

// Stats returns a copy of every host's counters, keyed by host name.
func (w *Web) Stats() map[string]HostStats {
	out := make(map[string]HostStats, len(w.hosts))
	for _, h := range w.hosts {
		out[h.spec.Name] = h.snapshot()
	}
	return out
}

// Reset zeroes every counter and returns each host's bucket, announced deadline, strikes, ban,
// LimitDrop and robots.txt bookkeeping to their state at Start. Requests in flight finish
// normally and are counted after the reset.
func (w *Web) Reset() {
	for _, h := range w.hosts {
		h.mu.Lock()
		h.reset()
		h.mu.Unlock()
	}
	w.arrMu.Lock()
	w.arrivals = arrivals{}
	w.arrMu.Unlock()
}

// arrivals counts requests per whole second since the first one.
type arrivals struct {
	first     time.Time
	perSecond []int
}

// arrive counts a request arriving at now (the Web's clock) in Arrivals.
func (w *Web) arrive(now time.Time) {
	w.arrMu.Lock()
	defer w.arrMu.Unlock()
	a := &w.arrivals
	if a.first.IsZero() {
		a.first = now
	}
	i := int(now.Sub(a.first) / time.Second)
	if i < 0 {
		return // a fake clock set back: not counted
	}
	for len(a.perSecond) <= i {
		a.perSecond = append(a.perSecond, 0)
	}
	a.perSecond[i]++
}

// Arrivals returns the time of the first request that reached any host since Start (or the last
// Reset), by the Web's clock, and how many requests arrived in each whole second from then to
// the latest arrival: the seconds a client left every host alone are its zeros.
func (w *Web) Arrivals() (first time.Time, perSecond []int) {
	w.arrMu.Lock()
	defer w.arrMu.Unlock()
	return w.arrivals.first, append([]int(nil), w.arrivals.perSecond...)
}
