package main

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/dnstest"
	"github.com/crawl-project/crawl/internal/redistest"
	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"
)

// oneServer is a web server on one loopback address that answers for many host names (virtual
// hosts, told apart by the Host header) behind ONE limit: a token bucket over every request,
// whatever name it is for, as nginx's limit_req keyed by the client's address does. Over the
// limit it answers 429 with Retry-After (whole seconds until a token). A request's arrival is
// the kernel's receive time of its bytes (simweb.KernelArrivals), never earlier than one
// counted before: on a loaded machine the handlers run late, and requests queued meanwhile
// would seem to arrive together.
type oneServer struct {
	names []string
	pages int
	lim   *rate.Limiter
	srv   *http.Server
	addr  string

	mu      sync.Mutex
	served  map[string]int // 200s by URL
	last    time.Time      // the latest arrival counted
	total   int            // every request
	refused int            // 429s
	log     []string       // each refusal: time, host and path
}

func startOneServer(t *testing.T, names []string, pages int, limit float64, burst int) *oneServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &oneServer{names: names, pages: pages, lim: rate.NewLimiter(rate.Limit(limit), burst),
		addr: ln.Addr().String(), served: map[string]int{}}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(simweb.KernelArrivals(s.srv, ln))
	t.Cleanup(func() { s.srv.Close() })
	return s
}

// url is the address of page i of host name ("/" for 0).
func (s *oneServer) url(name string, i int) string {
	_, port, _ := net.SplitHostPort(s.addr)
	if i == 0 {
		return "http://" + name + ":" + port + "/"
	}
	return fmt.Sprintf("http://%s:%s/p%d", name, port, i)
}

func (s *oneServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now, ok := simweb.Arrival(r)
	if !ok {
		now = time.Now()
	}
	name, _, _ := net.SplitHostPort(r.Host)
	s.mu.Lock()
	if now.Before(s.last) { // its handler overtaken by a later arrival's
		now = s.last
	}
	s.last = now
	s.total++
	if !s.lim.AllowN(now, 1) {
		s.refused++
		s.log = append(s.log, fmt.Sprintf("%s %s%s", now.Format("15:04:05.000"), r.Host, r.URL.Path))
		res := s.lim.ReserveN(now, 1)
		wait := res.DelayFrom(now)
		res.CancelAt(now)
		s.mu.Unlock()
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	s.mu.Unlock()
	host := -1
	for i, n := range s.names {
		if n == name {
			host = i
		}
	}
	if host < 0 {
		http.Error(w, "no such host", http.StatusMisdirectedRequest)
		return
	}
	if r.URL.Path == "/robots.txt" {
		fmt.Fprint(w, "User-agent: *\nDisallow:\n")
		return
	}
	page := 0
	if r.URL.Path != "/" {
		p, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/p"))
		if err != nil || p < 1 || p >= s.pages || r.URL.Path != "/p"+strconv.Itoa(p) {
			http.NotFound(w, r)
			return
		}
		page = p
	}
	s.mu.Lock()
	s.served[s.url(name, page)]++
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/html")
	fmt.Fprintf(w, "<html><head><title>%s %d</title></head><body>", name, page)
	if page == 0 { // the root links to every page of its host and to the next host's root
		for i := 1; i < s.pages; i++ {
			fmt.Fprintf(w, `<a href="/p%d">p%d</a> `, i, i)
		}
		fmt.Fprintf(w, `<a href="%s">next</a>`, s.url(s.names[(host+1)%len(s.names)], 0))
	} else {
		fmt.Fprintf(w, `<a href="/">home</a> <a href="/p%d">next</a>`, page%(s.pages-1)+1)
	}
	fmt.Fprint(w, "</body></html>")
}

// With --key-by-ip, three workers crawling 20 host names of ONE server behind one server-side
// limit (40 requests/s, burst 2, 429 + Retry-After) stay within it: at most 1% of the requests
// are refused, and every page is fetched, once unless returned to its queue. The names fall to one owner (they are
// partitioned by the address they resolve to), whose one gate learns the server's limit.
// Partitioned by name, the three workers' gates each learn on their own and overrun it
// together (docs/fleet.md "Politeness per server").
func TestFleetKeyByIPOneServer(t *testing.T) {
	t.Parallel()
	const (
		hosts = 20
		pages = 24
		limit = 40 // requests/s, burst 2, over every name
	)
	names := make([]string, hosts)
	for i := range names {
		names[i] = fmt.Sprintf("v%02d.oneserver.test", i)
	}
	web := startOneServer(t, names, pages, limit, 2)
	dns, err := dnstest.Start(&dnstest.Options{Resolve: func(name string) []netip.Addr {
		if strings.HasSuffix(name, ".oneserver.test") {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dns.Close)
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), fleetDeadline)
	t.Cleanup(cancel)
	seeds := make([]string, hosts)
	for i, n := range names {
		seeds[i] = web.url(n, 0)
	}
	f := &fleetRun{t: t, ctx: ctx, srv: srv, url: srv.URL(), rdb: rdb, seeds: writeSeeds(t, seeds), ttl: steadyLease,
		requeues: watchRequeues(t, "t", srv.Addr)}
	f.progress = func() int {
		web.mu.Lock()
		defer web.mu.Unlock()
		return web.total
	}
	f.args = []string{"--redis", f.url, "--crawl", "t", "--quiet", "--workers", "8", "--key-by-ip",
		"--dns-server", dns.Addr(), "--host-concurrency", "2", "--initial-rate", "20",
		"--lease-ttl", steadyLease.String(), "--partitions", "64", "--seeds", f.seeds}
	t.Cleanup(func() {
		for _, w := range f.all() {
			w.cmd.Process.Kill()
			<-w.exited
		}
	})
	start := time.Now()
	f.finish(f.start(""), f.start(""), f.start(""))
	// A page served again must have been returned to its queue as often (a lease that lapsed
	// on a loaded machine hands its host over, and the new owner fetches again what was in
	// flight), as checkComplete counts.
	back, _ := f.requeues.counts(ctx)
	web.mu.Lock()
	total, refused := web.total, web.refused
	var missing, again, unexplained int
	var why []string
	for _, n := range names {
		for i := range pages {
			u := web.url(n, i)
			switch k := web.served[u]; {
			case k == 0:
				missing++
			case k-1 > back[u]:
				unexplained += k - 1 - back[u]
				why = append(why, fmt.Sprintf("%s served %d times, returned to its queue %d times", u, k, back[u]))
			case k > 1:
				again += k - 1
			}
		}
	}
	web.mu.Unlock()
	t.Logf("3 workers, %d names on one server (%d req/s, burst 2): %d requests in %v, %d refused (%.2f%%); %d pages never served, %d served again after a return to the queue",
		hosts, limit, total, time.Since(start).Round(time.Millisecond), refused, 100*float64(refused)/float64(total), missing, again)
	if refused*100 > total {
		t.Errorf("%d of %d requests refused: more than 1%%; refusals: %v", refused, total, web.log)
	}
	if missing > 0 || unexplained > 0 {
		t.Errorf("%d pages never fetched, %d fetched again without cause; want every page, each once unless returned to its queue:\n%s",
			missing, unexplained, strings.Join(why[:min(len(why), 20)], "\n"))
	}
	f.idleInRedis()
	// Every name is placed by the server's address, recorded once for the crawl.
	_, port, _ := net.SplitHostPort(web.addr)
	placed := map[string]string{}
	keys, err := f.keys(ctx, "crawl:t:{*}:place")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		m, err := rdb.HGetAll(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		maps.Copy(placed, m)
	}
	for _, n := range names {
		if got := placed[n+":"+port]; got != "127.0.0.1:"+port {
			t.Errorf("%s placed by %q, want the server's address 127.0.0.1:%s", n, got, port)
		}
	}
	// A worker that would partition by name cannot join the crawl.
	code, out := crawlOutput(t, ctx, "run", "--data", t.TempDir(), "--redis", f.url, "--crawl", "t", "--partitions", "64", "--seeds", f.seeds)
	if code != exitUsage || !strings.Contains(out, "places hosts by address, this worker by name") {
		t.Errorf("a worker without --key-by-ip joining: exit %d, want %d saying why:\n%s", code, exitUsage, out)
	}
}
