package hostlimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crawl-project/crawl/aimd"
	"github.com/crawl-project/crawl/internal/dnstest"
	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/storage"
)

// newTestClient returns a client whose transport wraps a fresh http.Transport, closed with the
// test so that no connection goroutine outlives it.
func newTestClient(t *testing.T, opts *TransportOptions) (*http.Client, *transport) {
	t.Helper()
	base := &http.Transport{MaxIdleConnsPerHost: 32}
	tr := newTransport(base, opts, time.Now, time.After, rand.New(rand.NewSource(1)))
	t.Cleanup(base.CloseIdleConnections)
	return &http.Client{Transport: tr}, tr
}

// get fetches u with ctx and returns the status, reading and closing the body.
func get(ctx context.Context, c *http.Client, u string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

// pageURLs returns the URLs of a simweb host's pages: its root and /p1 … /p<pages-1>.
func pageURLs(root string, pages int) []string {
	us := []string{root}
	for i := 1; i < pages; i++ {
		us = append(us, fmt.Sprintf("%sp%d", root, i))
	}
	return us
}

// fetchAll fetches every URL at once, one goroutine each, and fails the test on any error or
// non-200 answer.
func fetchAll(t *testing.T, c *http.Client, us []string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(us))
	for _, u := range us {
		wg.Go(func() {
			st, err := get(context.Background(), c, u)
			if err == nil && st != http.StatusOK {
				err = fmt.Errorf("%s: status %d", u, st)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A plain http.Client with the transport fetches 1,000 URLs queued at once from one host with
// a hidden limit, completes them all, draws few refusals and honours every Retry-After.
//
// Whether a request was let go inside a Retry-After is judged by the gate's count of admitted
// requests, not by when a request reached the server or even the RoundTripper under the gate: a
// request the gate admitted just before a refusal was read may be held by the scheduler for any
// time after it on a loaded machine (1,000 goroutines under -race at load 25-30 held some past
// the server's 250 ms grace; at load 6 one reached the RoundTripper 2 ms into the pause). Each
// time a request reaches the RoundTripper inside a pause, the gate's count is read: if it grew
// since the Observer was told of the refusal (the gate is paused before that) and the pause had
// not ended when it was read, the gate admitted during the pause. Each pause must also be at
// least the Retry-After the server sent. A gate admitting during a pause, a retry that ignored
// Retry-After or a pause shorter than announced is caught whatever the load.
func TestTransportBurst(t *testing.T) {
	t.Parallel()
	spec := simweb.HostSpec{Name: "burst", Pages: 1000, Limit: 100, Burst: 5, Reply: simweb.Reply429Seconds}
	// Arrivals are the kernel's receive times: this process's late handlers do not bunch the requests.
	web, err := simweb.Start([]simweb.HostSpec{spec}, &simweb.Options{Seed: 1, Grace: 250 * time.Millisecond, KernelArrival: true})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	start := time.Now()
	base := &http.Transport{MaxIdleConnsPerHost: 32}
	t.Cleanup(base.CloseIdleConnections)
	w := &pauseWatch{base: base}
	tr := newTransport(w, &TransportOptions{Observer: w.observe}, time.Now, time.After, rand.New(rand.NewSource(1)))
	w.admitted = func(host string) uint64 { n, _ := tr.reg.Admitted(host); return n }
	fetchAll(t, &http.Client{Transport: tr}, pageURLs(web.URL("burst"), spec.Pages))

	st := web.Stats()["burst"]
	t.Logf("%d pages at a hidden %v req/s: %d requests, %d refused, %d inside Retry-After by the server's clock (250 ms grace), %v",
		spec.Pages, spec.Limit, st.Requests, st.OverLimit, st.InRetryAfter, st.LastRequest.Sub(st.FirstRequest))
	if len(st.Fetched) != spec.Pages || st.Duplicates != 0 {
		t.Errorf("fetched %d distinct pages (%d duplicates), want %d", len(st.Fetched), st.Duplicates, spec.Pages)
	}
	if st.OverLimit > 10 {
		t.Errorf("%d refusals, want at most 10", st.OverLimit)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.inside) > 0 {
		v := w.inside[0]
		t.Errorf("the gate admitted %d requests inside the pause from +%v to +%v after a refusal (counted at +%v; %d such counts in all)",
			v.admitted, v.from.Sub(start), v.until.Sub(start), v.read.Sub(start), len(w.inside))
	}
	if w.unpaused > 0 && len(w.pauses) == 0 {
		t.Errorf("%d refusals, and the gate was never paused when the Observer was told of one", w.unpaused)
	}
	slices.Sort(w.retryAfter)
	slices.Sort(w.paused)
	if len(w.paused) != len(w.retryAfter) || len(w.retryAfter) != st.OverLimit {
		t.Errorf("%d refusals, %d with a Retry-After read, %d pauses; want one pause for each", st.OverLimit, len(w.retryAfter), len(w.paused))
	} else {
		for i := range w.paused {
			if w.paused[i] < w.retryAfter[i] {
				t.Errorf("pauses %v for the Retry-Afters %v: one is shorter", w.paused, w.retryAfter)
				break
			}
		}
	}
	// The gate reads a refusal after this RoundTripper returns it, so its pause must last at
	// least until each deadline read here.
	if w.unpaused == 0 && len(w.pauses) == len(w.deadlines) {
		ends := make([]time.Time, len(w.pauses))
		for i, p := range w.pauses {
			ends[i] = p.until
		}
		slices.SortFunc(ends, time.Time.Compare)
		slices.SortFunc(w.deadlines, time.Time.Compare)
		for i := range ends {
			if ends[i].Before(w.deadlines[i]) {
				t.Errorf("the gate paused until +%v, before a refusal's Retry-After ended at +%v", ends[i].Sub(start), w.deadlines[i].Sub(start))
			}
		}
	}
	for _, g := range tr.reg.Stats(time.Now()) {
		if g.InFlight != 0 {
			t.Errorf("gate %s: %d in flight after every body was closed", g.Host, g.InFlight)
		}
	}
}

// pauseWatch is a RoundTripper under the gate that sees every request the transport sends and
// every Retry-After it reads, and an Observer that sees every pause the gate then holds.
type pauseWatch struct {
	base     http.RoundTripper
	admitted func(host string) uint64 // the gate's count of admitted requests

	mu         sync.Mutex
	pauses     []pauseSpan     // every pause the Observer was told of
	inside     []insidePause   // admissions during one
	retryAfter []time.Duration // each refusal's Retry-After, as the test reads it
	deadlines  []time.Time     // each refusal's Retry-After from when it was read here
	paused     []time.Duration // each refusal's pause, as the transport took it
	unpaused   int             // refusals after which the Observer found the gate not paused
}

// pauseSpan is one pause: from when the Observer was told of its refusal until its end, and
// the gate's count of admitted requests when the Observer was told.
type pauseSpan struct {
	host        string
	from, until time.Time
	admitted    uint64
}

// insidePause is a pause in which the gate's count had grown by admitted when read at read.
type insidePause struct {
	from, until, read time.Time
	admitted          uint64
}

func (w *pauseWatch) RoundTrip(req *http.Request) (*http.Response, error) {
	now := time.Now()
	w.mu.Lock()
	for _, p := range w.pauses {
		if now.After(p.from) && now.Before(p.until) {
			n := w.admitted(p.host)
			if read := time.Now(); n > p.admitted && read.Before(p.until) {
				w.inside = append(w.inside, insidePause{p.from, p.until, read, n - p.admitted})
			}
		}
	}
	w.mu.Unlock()
	resp, err := w.base.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		s, perr := strconv.Atoi(resp.Header.Get("Retry-After"))
		if perr != nil {
			s = -1 // no pause can be shorter: the count of pauses tells
		}
		ra := time.Duration(s) * time.Second
		w.mu.Lock()
		w.retryAfter = append(w.retryAfter, ra)
		w.deadlines = append(w.deadlines, time.Now().Add(ra))
		w.mu.Unlock()
	}
	return resp, err
}

func (w *pauseWatch) observe(ev Event) {
	if ev.Kind != AttemptEnded || ev.Status != http.StatusTooManyRequests {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.paused = append(w.paused, ev.Pause)
	if ev.Gate.PausedUntil.IsZero() { // not paused, or the pause was over by the time it told
		w.unpaused++
		return
	}
	w.pauses = append(w.pauses, pauseSpan{ev.Host, now, ev.Gate.PausedUntil, ev.Gate.Admitted})
}

// A request whose context ends before or while it waits for its host returns the context's
// error and holds no window slot; one cancelled in flight gives its slot back.
func TestTransportCancelledContext(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		switch r.URL.Path {
		case "/block":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case "/hang": // until the client goes away
			<-r.Context().Done()
		}
	}))
	defer srv.Close()
	c, tr := newTestClient(t, &TransportOptions{MaxConcurrency: 1, InitialRate: 1000})
	host := srv.Listener.Addr().String()
	inFlight := func() int {
		g, _ := tr.reg.Host(time.Now(), host)
		return g.InFlight
	}

	held := make(chan error, 1)
	go func() { _, err := get(context.Background(), c, srv.URL+"/block"); held <- err }()
	<-arrived // the window (1) is full

	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := get(done, c, srv.URL+"/"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled before: err = %v, want context.Canceled", err)
	}
	waiting, cancelWaiting := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := get(waiting, c, srv.URL+"/"); errc <- err }()
	cancelWaiting()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled while waiting: err = %v, want context.Canceled", err)
	}
	if n := inFlight(); n != 1 {
		t.Fatalf("%d in flight, want 1 (the blocked request only)", n)
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if st, err := get(context.Background(), c, srv.URL+"/"); err != nil || st != http.StatusOK {
		t.Fatalf("after the slot came back: %d, %v", st, err)
	}

	// Cancelled in flight: the slot comes back.
	flight, cancelFlight := context.WithCancel(context.Background())
	go func() { _, err := get(flight, c, srv.URL+"/hang"); errc <- err }()
	<-arrived
	<-arrived
	cancelFlight()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled in flight: err = %v, want context.Canceled", err)
	}
	if n := inFlight(); n != 0 {
		t.Fatalf("%d in flight after a cancelled request, want 0", n)
	}
}

// 100 goroutines share one transport over three hosts (run with -race).
func TestTransportConcurrentUse(t *testing.T) {
	var srvs []*httptest.Server
	for range 3 {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
		defer s.Close()
		srvs = append(srvs, s)
	}
	var events atomic.Int64
	c, tr := newTestClient(t, &TransportOptions{InitialRate: 500, Observer: func(e Event) {
		if e.Kind == AttemptEnded {
			events.Add(1)
		}
	}})
	var us []string
	for i := range 100 {
		for j := range 3 {
			us = append(us, fmt.Sprintf("%s/%d", srvs[(i+j)%3].URL, i))
		}
	}
	fetchAll(t, c, us[:100*3])
	if n := events.Load(); n != int64(len(us)) {
		t.Errorf("observer saw %d attempts, want %d", n, len(us))
	}
	var admitted uint64
	for _, g := range tr.reg.Stats(time.Now()) {
		admitted += g.Admitted
		if g.InFlight != 0 {
			t.Errorf("gate %s: %d in flight at the end", g.Host, g.InFlight)
		}
	}
	if admitted != uint64(len(us)) {
		t.Errorf("%d admitted, want %d", admitted, len(us))
	}
}

// A host's refusal pauses it by its Retry-After, in either form, and an idempotent request is
// sent again after the pause within MaxAttempts; anything else gets the refusal.
func TestTransportRetry(t *testing.T) {
	serverNow := t0.Add(7 * time.Second) // the host's clock is 7 s ahead of ours
	tests := []struct {
		name       string
		retry      *RetryPolicy
		method     string
		header     http.Header // of the refusal
		wantStatus int
		wantCalls  int
		wantDelay  time.Duration // the wait before the retry (0: none)
	}{
		{"seconds", nil, http.MethodGet, http.Header{"Retry-After": {"2"}}, 200, 2, 2 * time.Second},
		{"date on the host's clock", nil, http.MethodHead, http.Header{"Date": {serverNow.Format(http.TimeFormat)},
			"Retry-After": {serverNow.Add(3 * time.Second).Format(http.TimeFormat)}}, 200, 2, 3 * time.Second},
		{"retries off", &RetryPolicy{}, http.MethodGet, http.Header{"Retry-After": {"2"}}, 429, 1, 0},
		{"not idempotent", nil, http.MethodPost, http.Header{"Retry-After": {"2"}}, 429, 1, 0},
		{"budget spent", &RetryPolicy{MaxAttempts: 2}, http.MethodGet, http.Header{"Retry-After": {"2"}}, 429, 2, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			refusals := 1
			if tt.name == "budget spent" {
				refusals = 2
			}
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if int(calls.Add(1)) <= refusals {
					for k, v := range tt.header {
						w.Header()[k] = v
					}
					w.WriteHeader(http.StatusTooManyRequests)
				}
			}))
			defer srv.Close()
			clk := newFakeClock(t0)
			base := &http.Transport{}
			defer base.CloseIdleConnections()
			tr := newTransport(base, &TransportOptions{Retry: tt.retry}, clk.Now, clk.After, rand.New(rand.NewSource(1)))
			c := &http.Client{Transport: tr}

			type result struct {
				status int
				err    error
			}
			res := make(chan result, 1)
			go func() {
				req, _ := http.NewRequest(tt.method, srv.URL, http.NoBody)
				resp, err := c.Do(req)
				if err != nil {
					res <- result{err: err}
					return
				}
				resp.Body.Close()
				res <- result{status: resp.StatusCode}
			}()
			if tt.wantDelay > 0 {
				if d := clk.nextArmed(t); d != tt.wantDelay {
					t.Fatalf("retry armed after %v, want %v", d, tt.wantDelay)
				}
				clk.Advance(tt.wantDelay)
			}
			var r result
			for waiting := true; waiting; {
				select {
				case r = <-res:
					waiting = false
				case d := <-clk.armed: // the gate waits for a token
					clk.Advance(d)
				}
			}
			if r.err != nil || r.status != tt.wantStatus || int(calls.Load()) != tt.wantCalls {
				t.Fatalf("got %d, %v after %d calls; want %d after %d", r.status, r.err, calls.Load(), tt.wantStatus, tt.wantCalls)
			}
			g, _ := tr.reg.Host(clk.Now(), srv.Listener.Addr().String())
			if g.OverLimit != refusals || g.InFlight != 0 {
				t.Errorf("gate: %d refusals seen, %d in flight; want %d, 0", g.OverLimit, g.InFlight, refusals)
			}
			if r.status == http.StatusTooManyRequests && g.PausedUntil.IsZero() {
				t.Errorf("the refusal given to the caller did not pause the host")
			}
		})
	}
}

// What one transport learned of a host, saved through the crawl store (storage.DB) when its
// client closes its idle connections, starts the next transport given that store at the
// learned rate instead of the initial one.
func TestTransportStateRestored(t *testing.T) {
	t.Parallel()
	spec := simweb.HostSpec{Name: "h", Pages: 300, Limit: 40, Burst: 1, Reply: simweb.Reply429Seconds}
	web, err := simweb.Start([]simweb.HostSpec{spec}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	db, err := storage.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	observe := func(e Event) {
		if e.Kind == SaveFailed {
			t.Errorf("save: %v", e.Err)
		}
	}
	us := pageURLs(web.URL("h"), spec.Pages)
	first, tr1 := newTestClient(t, &TransportOptions{Store: db, Observer: observe})
	req, err := http.NewRequest(http.MethodGet, us[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	key, err := tr1.key(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	fetchAll(t, first, us[:spec.Pages-1])
	first.CloseIdleConnections() // saves
	saved, ok := tr1.reg.Host(time.Now(), key)
	if !ok {
		t.Fatalf("no gate for %s after the first transport's fetches", key)
	}
	learned := saved.Rate

	// The next transport's own initial rate is ten times what was learned (how much that is
	// depends on the machine's load), so that starting there cannot pass for the restore. Its
	// gate is read as restored, before any request: a first answer (a refusal, on a loaded
	// machine) would move the rate.
	initial := 10 * learned
	second, tr2 := newTestClient(t, &TransportOptions{Store: db, Observer: observe, InitialRate: initial})
	tr2.reg.lockedHost(time.Now(), key).mu.Unlock() // loads the gate from the store
	restored, ok := tr2.reg.Host(time.Now(), key)
	if !ok {
		t.Fatalf("no gate for %s in the next transport", key)
	}
	t.Logf("learned %.1f req/s (initial %v); the next transport (initial %.1f) restored %.1f (%v)",
		learned, aimd.DefaultInitialRate, initial, restored.Rate, restored.Phase)
	if restored.Rate < 0.9*learned || restored.Rate > 1.1*learned {
		t.Errorf("restored at %.1f req/s, want the learned %.1f (its own initial rate: %.1f)", restored.Rate, learned, initial)
	}
	if restored.StateError != "" {
		t.Errorf("state error: %s", restored.StateError)
	}
	fetchAll(t, second, us[spec.Pages-1:])
}

// With KeyByIP two names of one server share one gate; by default each has its own.
func TestTransportKeyByIP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	dns, err := dnstest.Start(&dnstest.Options{Resolve: func(name string) []netip.Addr {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer dns.Close()
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, dns.Addr())
	}}
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	for _, tt := range []struct {
		keyBy KeyBy
		want  []string
	}{
		{KeyByHost, []string{"a.test:" + port, "b.test:" + port}},
		{KeyByIP, []string{"127.0.0.1:" + port}},
	} {
		var mu sync.Mutex
		gates := map[string]bool{}
		base := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, srv.Listener.Addr().String())
		}}
		defer base.CloseIdleConnections()
		tr := newTransport(base, &TransportOptions{KeyBy: tt.keyBy, Resolver: resolver, Observer: func(e Event) {
			mu.Lock()
			gates[e.Host] = true
			mu.Unlock()
		}}, time.Now, time.After, rand.New(rand.NewSource(1)))
		c := &http.Client{Transport: tr}
		for _, name := range []string{"a.test", "b.test"} {
			if _, err := get(context.Background(), c, "http://"+name+":"+port+"/"); err != nil {
				t.Fatal(err)
			}
		}
		if len(gates) != len(tt.want) {
			t.Errorf("KeyBy %d: gates %v, want %v", tt.keyBy, gates, tt.want)
		}
		for _, g := range tt.want {
			if !gates[g] {
				t.Errorf("KeyBy %d: gates %v, want %v", tt.keyBy, gates, tt.want)
			}
		}
	}
}

// TestTransportStatedLimit: a host that states its limit (the IETF draft's RateLimit-Policy) is
// paced just under it from its first answer, and its spent bucket pauses it one token, not the
// whole second its rounded reset names.
func TestTransportStatedLimit(t *testing.T) {
	tests := []struct {
		name      string
		remaining string
		pause     time.Duration
	}{
		{"tokens left", "3", 0},
		{"bucket spent", "0", 50 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("RateLimit-Policy", `"default";q=200;w=10`)
				w.Header().Set("RateLimit", `"default";r=`+tt.remaining+`;t=1`)
			}))
			defer srv.Close()
			clk := newFakeClock(t0)
			base := &http.Transport{}
			defer base.CloseIdleConnections()
			tr := newTransport(base, nil, clk.Now, clk.After, rand.New(rand.NewSource(1)))
			resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			g, _ := tr.reg.Host(clk.Now(), srv.Listener.Addr().String())
			if g.Stated != 20 || math.Abs(g.Limit-19.4) > 1e-9 {
				t.Errorf("gate: stated %v, paced at %v; want 20, 19.4", g.Stated, g.Limit)
			}
			var paused time.Duration
			if !g.PausedUntil.IsZero() {
				paused = g.PausedUntil.Sub(clk.Now())
			}
			if paused != tt.pause {
				t.Errorf("paused for %v, want %v", paused, tt.pause)
			}
		})
	}
}
