package fetch

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/dnstest"
)

var loopback = netip.MustParseAddr("127.0.0.1")

// testDNS is a dnstest server for the names "*.test" but "nope.test" (all 127.0.0.1) whose
// answers for "slow.test" wait until release is called (at cleanup at the latest, before the
// server closes).
type testDNS struct {
	*dnstest.Server
	release func()
}

func startDNS(t *testing.T, ttl time.Duration) testDNS {
	t.Helper()
	held := make(chan struct{})
	s, err := dnstest.Start(&dnstest.Options{TTL: ttl, Resolve: func(name string) []netip.Addr {
		switch {
		case name == "slow.test":
			<-held
		case name == "nope.test" || !strings.HasSuffix(name, ".test"):
			return nil
		}
		return []netip.Addr{loopback}
	}})
	if err != nil {
		t.Fatal(err)
	}
	release := sync.OnceFunc(func() { close(held) })
	t.Cleanup(s.Close)
	t.Cleanup(release) // runs first
	return testDNS{s, release}
}

// fakeNow is a clock the test moves by hand.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeNow) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeNow) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestResolver(server string, timeout time.Duration) (*Resolver, *fakeNow) {
	r := NewResolver(ResolverConfig{Server: server, Timeout: timeout})
	clk := &fakeNow{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	r.now = clk.now
	return r, clk
}

// TestResolverCache: a name is asked once per TTL (an A and an AAAA query, counted by the
// server), the TTL clamped to 30 s .. 1 h; "no such host" is kept 10 s.
func TestResolverCache(t *testing.T) {
	tests := []struct {
		name     string
		host     string
		ttl      time.Duration // the server's
		kept     time.Duration // what the resolver should keep the answer for
		notFound bool
	}{
		{"ttl 60s", "a.test", time.Minute, time.Minute, false},
		{"ttl 5s raised to 30s", "a.test", 5 * time.Second, 30 * time.Second, false},
		{"ttl 2h lowered to 1h", "a.test", 2 * time.Hour, time.Hour, false},
		{"nxdomain", "nope.test", time.Hour, 10 * time.Second, true},
		{"case and trailing dot", "A.Test.", time.Minute, time.Minute, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dnsSrv := startDNS(t, tc.ttl)
			r, clk := newTestResolver(dnsSrv.Addr(), time.Minute)
			for period := 1; period <= 3; period++ {
				for range 3 {
					addrs, err := r.LookupNetIP(context.Background(), tc.host)
					var dnsErr *net.DNSError
					switch {
					case tc.notFound && (!errors.As(err, &dnsErr) || !dnsErr.IsNotFound):
						t.Fatalf("err %v, want a not-found *net.DNSError", err)
					case !tc.notFound && (err != nil || len(addrs) != 1 || addrs[0] != loopback):
						t.Fatalf("LookupNetIP = %v, %v; want [127.0.0.1]", addrs, err)
					}
				}
				if got := dnsSrv.Queries(tc.host); got != 2*period {
					t.Fatalf("period %d: the server got %d queries, want %d (A and AAAA once per TTL)", period, got, 2*period)
				}
				clk.advance(tc.kept - time.Second)
				r.LookupNetIP(context.Background(), tc.host)
				if dnsSrv.Queries(tc.host) != 2*period {
					t.Fatalf("period %d: asked again a second before the answer expired", period)
				}
				clk.advance(time.Second)
			}
		})
	}
}

// TestResolverIPLiteral: an address is its own answer; nothing is asked.
func TestResolverIPLiteral(t *testing.T) {
	dnsSrv := startDNS(t, time.Minute)
	r, _ := newTestResolver(dnsSrv.Addr(), time.Minute)
	for _, host := range []string{"127.0.0.1", "::1"} {
		addrs, err := r.LookupNetIP(context.Background(), host)
		if err != nil || len(addrs) != 1 || addrs[0] != netip.MustParseAddr(host) {
			t.Errorf("LookupNetIP(%s) = %v, %v", host, addrs, err)
		}
	}
	if dnsSrv.Total() != 0 {
		t.Errorf("%d queries for IP literals", dnsSrv.Total())
	}
}

// TestResolverSlowNameHoldsOnlyItself: while slow.test's answer is held, other names are looked
// up; callers of slow.test share one lookup, and one that gives up does not end it for the rest.
func TestResolverSlowNameHoldsOnlyItself(t *testing.T) {
	dnsSrv := startDNS(t, time.Minute)
	r, _ := newTestResolver(dnsSrv.Addr(), time.Hour)
	const callers = 8
	results := make(chan error, callers)
	for range callers {
		go func() {
			_, err := r.LookupNetIP(context.Background(), "slow.test")
			results <- err
		}()
	}
	for dnsSrv.Queries("slow.test") < 2 {
		time.Sleep(time.Millisecond) // wait for the lookup to reach the server; nothing is timed
	}
	for _, host := range []string{"a.test", "b.test", "c.test"} {
		if addrs, err := r.LookupNetIP(context.Background(), host); err != nil || len(addrs) != 1 {
			t.Errorf("%s while slow.test is held: %v, %v", host, addrs, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.LookupNetIP(ctx, "slow.test"); !errors.Is(err, context.Canceled) {
		t.Errorf("a caller that gave up: %v, want context.Canceled", err)
	}
	select {
	case err := <-results:
		t.Fatalf("slow.test answered while held: %v", err)
	default:
	}
	dnsSrv.release()
	for range callers {
		if err := <-results; err != nil {
			t.Errorf("slow.test: %v", err)
		}
	}
	if got := dnsSrv.Queries("slow.test"); got != 2 {
		t.Errorf("%d callers sent %d queries, want one lookup (2 queries)", callers, got)
	}
}

// TestResolverTimeout: a lookup past the timeout fails as a timeout and is not kept: the next
// lookup asks the server again. (How many of a lookup's two queries leave before its timeout
// depends on the machine's load, so only that the server is asked again is checked.)
func TestResolverTimeout(t *testing.T) {
	dnsSrv := startDNS(t, time.Minute)
	r, _ := newTestResolver(dnsSrv.Addr(), 250*time.Millisecond)
	asked := 0
	for i := 1; i <= 2; i++ {
		_, err := r.LookupNetIP(context.Background(), "slow.test")
		var dnsErr *net.DNSError
		if !errors.As(err, &dnsErr) || !dnsErr.IsTimeout {
			t.Fatalf("lookup %d: %v, want a timeout *net.DNSError", i, err)
		}
		got := dnsSrv.Queries("slow.test")
		if got <= asked || got > 2*i {
			t.Errorf("lookup %d: %d queries after %d, want 1 or 2 more (a timeout is not kept)", i, got, asked)
		}
		asked = got
	}
}

// TestGetResolvesWithResolver: Get looks the URL's name up with Config.Resolver and dials the
// address, which DialControl checks; a name that does not exist fails with Kind DNS.
func TestGetResolvesWithResolver(t *testing.T) {
	dnsSrv := startDNS(t, time.Minute)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(r.Host)) })
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	var mu sync.Mutex
	var dialled []string
	c := newClient(t, Config{
		Resolver: NewResolver(ResolverConfig{Server: dnsSrv.Addr()}),
		DialControl: func(_, address string, _ syscall.RawConn) error {
			mu.Lock()
			defer mu.Unlock()
			dialled = append(dialled, address)
			return nil
		},
	})
	for _, host := range []string{"a.test", "b.test"} {
		resp, err := c.Get(context.Background(), mustURL(t, "http://"+host+":"+port+"/"))
		if err != nil || resp.Status != 200 || string(resp.Body) != host+":"+port {
			t.Fatalf("GET %s: %v %v", host, resp, err)
		}
	}
	mu.Lock()
	if want := "127.0.0.1:" + port; len(dialled) != 2 || dialled[0] != want || dialled[1] != want {
		t.Errorf("dialled %v, want %s twice (one connection per host name)", dialled, want)
	}
	mu.Unlock()
	_, err := c.Get(context.Background(), mustURL(t, "http://nope.test:"+port+"/"))
	wantKind(t, err, DNS)
	if dnsSrv.Queries("a.test") != 2 || dnsSrv.Queries("nope.test") != 2 {
		t.Errorf("queries a.test %d, nope.test %d; want 2 each", dnsSrv.Queries("a.test"), dnsSrv.Queries("nope.test"))
	}
}
