package crawler

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crawl-project/crawl/fetch"
	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/hostlimit"
	"github.com/crawl-project/crawl/internal/dnstest"
	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/internal/urlnorm"
	"github.com/crawl-project/crawl/storage"
)

// sharedFake stands in for a shared crawl (internal/fleet's Frontier, tested against Redis
// there and in cmd/crawl): the URLs in a bbolt frontier of a store of its own, the settings,
// robots.txt and hosts' state in memory. As the fleet's does, its Complete stores a Fetched
// page in the worker's store (Join) and then records the rest without it.
type sharedFake struct {
	*frontier.Frontier
	states   hostlimit.StateStore
	robots   *robotsFake                                            // nil: no robots.txt shared
	hostCtx  func(ctx context.Context, host string) context.Context // nil: ctx itself
	notHeld  atomic.Bool                                            // Holds is false for every host
	mu       sync.Mutex
	sets     map[string][]string
	values   map[string]string
	pages    *storage.DB // the worker's store (Join)
	unstored []string    // Fetched results whose page Complete was given no store for
}

var _ Shared = (*sharedFake)(nil)

func newSharedFake(t *testing.T) *sharedFake {
	t.Helper()
	db, err := storage.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	fr, err := frontier.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &sharedFake{Frontier: fr, states: db, sets: map[string][]string{}, values: map[string]string{}}
}

func (s *sharedFake) Join(pages *storage.DB, checkpoint func() error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pages = pages
}

func (s *sharedFake) Complete(l frontier.Lease, r frontier.Result) error {
	if r.Kind == frontier.Fetched && r.Page != nil {
		s.mu.Lock()
		pages := s.pages
		if pages == nil {
			s.unstored = append(s.unstored, l.URL)
		}
		s.mu.Unlock()
		if pages != nil {
			if _, err := pages.StorePage(r.Page); err != nil {
				return err
			}
		}
		r.Page = nil
	}
	return s.Frontier.Complete(l, r)
}

func (s *sharedFake) Where() (redis, crawl string) { return "fake://", "fake" }

func (s *sharedFake) HostStates() hostlimit.StateStore { return s.states }

func (s *sharedFake) HostContext(ctx context.Context, host string) context.Context {
	if s.hostCtx != nil {
		return s.hostCtx(ctx, host)
	}
	return ctx
}

func (s *sharedFake) Holds(host string, now time.Time) bool { return !s.notHeld.Load() }

func (s *sharedFake) LoadRobots(host string) ([]byte, bool, error) {
	if s.robots == nil {
		return nil, false, nil
	}
	return s.robots.LoadRobots(host)
}

func (s *sharedFake) SaveRobots(host string, b []byte) (bool, error) {
	if s.robots == nil {
		return false, nil
	}
	return s.robots.SaveRobots(host, b)
}

func (s *sharedFake) Union(name string, members []string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range members {
		if !slices.Contains(s.sets[name], m) {
			s.sets[name] = append(s.sets[name], m)
		}
	}
	return slices.Clone(s.sets[name]), nil
}

func (s *sharedFake) Count(name string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sets[name]), nil
}

func (s *sharedFake) Value(name string) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.values[name]
	return v, ok, nil
}

func (s *sharedFake) Settle(name, value string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.values[name]; ok {
		return v, nil
	}
	s.values[name] = value
	return value, nil
}

// openSharedSeeded opens a worker of shared with the default settings and seeds, closed when
// the test ends.
func openSharedSeeded(t *testing.T, shared Shared, seeds ...string) *Crawler {
	t.Helper()
	cfg := Defaults()
	cfg.Dir = t.TempDir()
	cfg.Seeds = seeds
	c, err := OpenWith(cfg, shared)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// runShared runs a worker of the shared crawl to its end and closes it.
func runShared(t *testing.T, cfg Config, shared Shared) {
	t.Helper()
	c, err := OpenWith(cfg, shared)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a safety net (runCrawl)
	defer cancel()
	sum, err := c.Run(ctx)
	if cerr := c.Close(); err == nil {
		err = cerr
	}
	if err != nil || sum.StopReason != "done" {
		t.Fatalf("Run: %v, %+v", err, sum)
	}
}

// A worker of a shared crawl runs the whole crawl loop on the injected frontier, stores every
// page in its own store before the frontier's Complete, and takes the scope from the shared
// settings: a second worker given no seeds joins the finished crawl with the first one's
// scope, and a worker with another --scope mode is refused.
func TestSharedCrawl(t *testing.T) {
	t.Parallel()
	web, err := simweb.Start(simweb.Small(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	sh := newSharedFake(t)
	cfg := testConfig(t, web)
	runShared(t, cfg, sh)
	checkComplete(t, web, cfg.Dir, 0)
	if len(sh.unstored) > 0 {
		t.Errorf("pages completed before the worker joined (no store for them): %v", sh.unstored)
	}
	if got := sh.sets["scope-allowed"]; len(got) != 3 {
		t.Errorf("shared scope %v; want the 3 seed hosts", got)
	}

	late := testConfig(t, web)
	late.Seeds = nil
	c2, err := OpenWith(late, sh)
	if err != nil {
		t.Fatalf("a worker without seeds: %v", err)
	}
	if len(c2.scope.Allowed) != 3 {
		t.Errorf("a worker without seeds has scope %v; want the shared one", c2.scope.Allowed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if sum, err := c2.Run(ctx); err != nil || sum.StopReason != "done" || sum.Fetched != len(storedOK(t, cfg.Dir)) {
		t.Errorf("a worker joining the finished crawl: %v, %+v", err, sum)
	}
	c2.Close()

	other := testConfig(t, web)
	other.Scope = ScopeDomain
	if _, err := OpenWith(other, sh); !errors.Is(err, ErrUsage) {
		t.Errorf("a worker with --scope domain on a host-scoped crawl: %v, want ErrUsage", err)
	}
}

// robotsFake is a shared robots.txt cache in memory.
type robotsFake struct {
	mu      sync.Mutex
	m       map[string][]byte
	saves   int  // saves made
	notHeld bool // the worker holds no host: saves are skipped
}

func (r *robotsFake) LoadRobots(host string) ([]byte, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.m[host]
	return b, ok, nil
}

func (r *robotsFake) SaveRobots(host string, b []byte) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.notHeld {
		return false, nil
	}
	r.m[host] = b
	r.saves++
	return true, nil
}

// robotsRequests is how many times the web's hosts were asked for robots.txt, and how many
// requests they had for paths it disallows.
func robotsRequests(web *simweb.Web) (n, violations int) {
	for _, st := range web.Stats() {
		n += st.RobotsRequests
		violations += st.RobotsViolations
	}
	return n, violations
}

// A host's robots.txt fetched by one worker of a shared crawl is used by the next without a
// fetch of its own, and its rules hold there.
func TestSharedRobots(t *testing.T) {
	t.Parallel()
	web, err := simweb.Start(simweb.Small(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	robots := &robotsFake{m: map[string][]byte{}}
	crawl := func() string {
		sh := newSharedFake(t)
		sh.robots = robots
		cfg := testConfig(t, web)
		runShared(t, cfg, sh)
		return cfg.Dir
	}
	firstDir := crawl()
	first, _ := robotsRequests(web)
	if len(robots.m) != len(web.Seeds()) || first < len(robots.m) {
		t.Fatalf("after the first worker: %d robots.txt shared, %d requested; want one per host (%d)", len(robots.m), first, len(web.Seeds()))
	}
	dir := crawl() // the next owner of every host
	if got, want := len(storedOK(t, dir)), len(storedOK(t, firstDir)); got != want || got == 0 {
		t.Errorf("the second worker stored %d pages, the first %d", got, want)
	}
	if n, violations := robotsRequests(web); n != first || violations != 0 {
		t.Errorf("the second worker requested robots.txt %d times and disallowed paths %d times; want 0 and 0", n-first, violations)
	}
}

// A robots.txt fetch cut short because the host's partition moved (its context cancelled)
// leaves the host as if never loaded: when the worker holds the host again, it takes the
// robots.txt another owner saved meanwhile instead of fetching its own.
func TestSharedRobotsAfterAMove(t *testing.T) {
	t.Parallel()
	web, err := simweb.Start(simweb.Small(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	saved := &robotsFake{m: map[string][]byte{}}
	first := newSharedFake(t)
	first.robots = saved
	runShared(t, testConfig(t, web), first) // every host's robots.txt, saved by an earlier owner
	before, _ := robotsRequests(web)
	sh := newSharedFake(t)
	sh.robots = &robotsFake{m: map[string][]byte{}} // nothing saved yet when the host is met
	var mu sync.Mutex
	moved := map[string]bool{}
	sh.hostCtx = func(ctx context.Context, host string) context.Context {
		mu.Lock()
		defer mu.Unlock()
		if !moved[host] { // the first request to host is cut short by a move...
			moved[host] = true
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			return ctx
		}
		saved.mu.Lock() // ...meanwhile its next owner fetched and saved its robots.txt
		if b, ok := saved.m[host]; ok {
			sh.robots.SaveRobots(host, b)
		}
		saved.mu.Unlock()
		return ctx
	}
	runShared(t, testConfig(t, web), sh)
	after, _ := robotsRequests(web)
	if after != before || len(moved) == 0 {
		t.Errorf("robots.txt requested %d more times after %d cut short by a move; want none: the saved ones are used", after-before, len(moved))
	}
}

// A host the worker saw before its robots.txt was saved anywhere (while another worker held
// it, or in an earlier ownership that fetched nothing) is looked up in the shared cache again
// when its rules are needed: the worker uses the copy an owner saved since, and fetches none.
func TestSharedRobotsSavedAfterSeen(t *testing.T) {
	sh := newSharedFake(t)
	sh.robots = &robotsFake{m: map[string][]byte{}}
	cfg := Defaults()
	cfg.Dir = t.TempDir()
	cfg.Seeds = []string{"http://127.0.0.2:9/"}
	c, err := OpenWith(cfg, sh)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const host = "127.0.0.2:9"
	now := time.Now()
	if _, err := c.robotsFor(host, now); err != nil { // seen, nothing saved yet
		t.Fatal(err)
	}
	b, err := json.Marshal(storage.RobotsEntry{Host: host, Status: 200, Body: []byte("User-agent: *\nDisallow: /private/\n"), FetchedAt: now.Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	sh.robots.SaveRobots(host, b) // the owner of the time fetched and saved it
	j, _, err := c.nextJob(context.Background(), now.Add(2*time.Second), host)
	if err != nil {
		t.Fatal(err)
	}
	if j.run != nil && !j.page { // the saved copy's install (parsed in a job, not by the dispatcher)
		if err := j.run(); err != nil {
			t.Fatal(err)
		}
		if j, _, err = c.nextJob(context.Background(), now.Add(2*time.Second), host); err != nil {
			t.Fatal(err)
		}
	}
	if !j.page {
		t.Errorf("the host held again: job %+v, want a page fetch (no robots.txt fetch: a copy is saved)", j)
	}
	private, _ := url.Parse("http://" + host + "/private/a")
	if v, known := c.robotsVerdict(host, private); !known || v.Allowed {
		t.Errorf("/private/a: verdict %+v, known %v; want disallowed by the saved copy", v, known)
	}
}

// A robots.txt fetch that ends when its host is no longer the worker's is not saved then (the
// shared cache saves only a holder's); once the host is the worker's again, the worker saves
// it for the host's later owners, unless an owner saved a newer copy meanwhile, which it takes.
func TestSharedRobotsSavedWhenHeldAgain(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "User-agent: *\nDisallow: /mine/\n")
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	host := urlnorm.HostKey(u)
	newer, err := json.Marshal(storage.RobotsEntry{Host: host, Status: 200, Body: []byte("User-agent: *\nDisallow: /theirs/\n"), FetchedAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		meanwhile []byte // saved by the host's owner while the worker did not hold it
		disallows string // the path the rules in force disallow
		saves     int    // by the worker
	}{
		{"nothing saved meanwhile", nil, "/mine/", 1},
		{"a newer copy saved meanwhile", newer, "/theirs/", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := &robotsFake{m: map[string][]byte{}, notHeld: true}
			sh := newSharedFake(t)
			sh.robots = cache
			c := openSharedSeeded(t, sh, srv.URL+"/")
			now := time.Now()
			if _, err := c.robotsFor(host, now); err != nil {
				t.Fatal(err)
			}
			gate, _ := c.gates.key(host)
			tk, _ := c.tryAdmit(now, host, gate)
			if tk == nil {
				t.Fatal("the host's gate admits no request")
			}
			if err := c.fetchRobots(context.Background(), host, "http", tk); err != nil {
				t.Fatal(err)
			}
			if cache.saves != 0 {
				t.Fatalf("%d saves while the host was not the worker's", cache.saves)
			}
			cache.mu.Lock()
			if tc.meanwhile != nil {
				cache.m[host] = tc.meanwhile
			}
			cache.notHeld = false // the host is the worker's again
			cache.mu.Unlock()
			for range 2 {
				if _, err := c.robotsFor(host, time.Now()); err != nil {
					t.Fatal(err)
				}
				runStagedRobots(t, c, host)
			}
			if cache.saves != tc.saves {
				t.Errorf("the worker saved robots.txt %d times once it held the host again, want %d", cache.saves, tc.saves)
			}
			for _, path := range []string{"/mine/a", "/theirs/a"} {
				p, _ := url.Parse(srv.URL + path)
				v, known := c.robotsVerdict(host, p)
				if want := strings.HasPrefix(path, tc.disallows); !known || v.Allowed == want {
					t.Errorf("%s: verdict %+v, known %v; want allowed %v", path, v, known, !want)
				}
			}
		})
	}
}

// Seeds added to a shared crawl from outside its workers (crawl add) widen its scope under the
// crawl's mode, and a running worker takes the wider scope in; seeds with credentials, and a
// crawl with no scope yet, are refused.
func TestAddSeedsToShared(t *testing.T) {
	web, err := simweb.Start(simweb.Small(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	sh := newSharedFake(t)
	dns, err := dnstest.Start(&dnstest.Options{Resolve: func(name string) []netip.Addr {
		if name == "late.test" {
			return []netip.Addr{netip.MustParseAddr("10.1.2.3")}
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer dns.Close()
	res := fetch.NewResolver(fetch.ResolverConfig{Server: dns.Addr()})
	if _, err := AddSeedsTo(sh, []string{"http://late.test/"}, res); !errors.Is(err, ErrUsage) {
		t.Errorf("adding to a crawl with no scope: %v, want ErrUsage", err)
	}
	cfg := testConfig(t, web)
	c, err := OpenWith(cfg, sh)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	late, _ := url.Parse("http://late.test/a")
	if r, _ := c.admit(late, 1, frontier.RolePage); r != frontier.ReasonScope {
		t.Fatalf("late.test admitted before it was added (%q)", r)
	}
	if _, err := AddSeedsTo(sh, []string{"http://u:p@late.test/"}, res); !errors.Is(err, ErrUsage) {
		t.Errorf("a seed with credentials: %v, want ErrUsage", err)
	}
	n, err := AddSeedsTo(sh, []string{"http://late.test/", "http://late.test/", web.Seeds()[0]}, res)
	if err != nil || n != 1 {
		t.Fatalf("AddSeedsTo = %d, %v; want 1 added (the other seed was seen)", n, err)
	}
	if !slices.ContainsFunc(sh.sets["private-ranges"], func(b string) bool {
		p, err := netip.ParsePrefix(b)
		return err == nil && p.Contains(netip.MustParseAddr("10.1.2.3"))
	}) {
		t.Errorf("private blocks %v; want the added seed's (10.1.2.3) among them", sh.sets["private-ranges"])
	}
	c.widenScope()
	if r, _ := c.admit(late, 1, frontier.RolePage); r != "" {
		t.Errorf("late.test still out of scope after widening (%q)", r)
	}
	if st, ok, err := sh.State("http://late.test/"); err != nil || !ok || st.State != "queued" {
		t.Errorf("the added seed: %+v %v %v; want queued", st, ok, err)
	}
}

// A job made while its host was the worker's is not sent once the host is not (a worker
// resumed after a pause past its lease): its robots.txt is left to be looked up again, its
// page's lease is given back, and the server sees no request.
func TestSharedJobNotSentOnceTheHostMoved(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	host := urlnorm.HostKey(u)
	sh := newSharedFake(t)
	c := openSharedSeeded(t, sh, srv.URL+"/")
	gate, _ := c.gates.key(host)
	at := time.Now()
	admit := func() *hostlimit.Ticket { // a second apart on the gate's clock: its rate allows each
		t.Helper()
		at = at.Add(time.Second)
		tk, _ := c.tryAdmit(at, host, gate)
		if tk == nil {
			t.Fatal("the host's gate admits no request")
		}
		return tk
	}
	if _, err := c.robotsFor(host, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, held := range []bool{false, true} {
		sh.notHeld.Store(!held)
		if err := c.fetchRobots(context.Background(), host, "http", admit()); err != nil {
			t.Fatal(err)
		}
		rs, err := c.robotsFor(host, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		st, _ := rs.state(time.Now())
		if n := requests.Load(); held && (n != 1 || st != robotsReady) || !held && (n != 0 || st != robotsNeeded) {
			t.Fatalf("held %v: %d requests, robots.txt %v after its fetch", held, n, st)
		}
	}
	l, ok, err := c.fr.Lease(time.Now(), host)
	if err != nil || !ok {
		t.Fatalf("lease: %v, %v", ok, err)
	}
	sh.notHeld.Store(true)
	if err := c.fetchPage(context.Background(), l, u.JoinPath("/"), admit()); err != nil {
		t.Fatal(err)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("%d requests after a page job whose host is no longer held, want only robots.txt's", n)
	}
	if again, ok, err := c.fr.Lease(time.Now(), host); err != nil || !ok || again.URL != l.URL {
		t.Errorf("lease after the page job: %q, %v, %v; want %s given back", again.URL, ok, err, l.URL)
	}
}
