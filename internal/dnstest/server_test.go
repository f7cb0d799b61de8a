package dnstest

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	v4 = netip.MustParseAddr("127.0.0.1")
	v6 = netip.MustParseAddr("::1")
)

func start(t *testing.T, opts *Options) *Server {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func zone(name string) []netip.Addr {
	switch name {
	case "a.test":
		return []netip.Addr{v4}
	case "both.test":
		return []netip.Addr{v4, v6}
	case "slow.test":
		return []netip.Addr{v4}
	}
	return nil
}

func query(ctx context.Context, t *testing.T, network, addr, name string, qtype uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	r, _, err := (&dns.Client{Net: network}).ExchangeContext(ctx, m, addr)
	if err != nil {
		t.Fatalf("%s %s over %s: %v", dns.TypeToString[qtype], name, network, err)
	}
	return r
}

func TestAnswers(t *testing.T) {
	s := start(t, &Options{Resolve: zone, TTL: 90 * time.Second})
	tests := []struct {
		name    string
		qtype   uint16
		rcode   int
		answers []string
	}{
		{"a.test", dns.TypeA, dns.RcodeSuccess, []string{"127.0.0.1"}},
		{"A.Test.", dns.TypeA, dns.RcodeSuccess, []string{"127.0.0.1"}},
		{"a.test", dns.TypeAAAA, dns.RcodeSuccess, nil}, // NODATA
		{"both.test", dns.TypeAAAA, dns.RcodeSuccess, []string{"::1"}},
		{"nope.test", dns.TypeA, dns.RcodeNameError, nil},
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, tc := range tests {
			t.Run(network+"/"+tc.name+"/"+dns.TypeToString[tc.qtype], func(t *testing.T) {
				r := query(context.Background(), t, network, s.Addr(), tc.name, tc.qtype)
				if r.Rcode != tc.rcode || len(r.Answer) != len(tc.answers) {
					t.Fatalf("rcode %s, %d answers; want %s, %v", dns.RcodeToString[r.Rcode], len(r.Answer),
						dns.RcodeToString[tc.rcode], tc.answers)
				}
				for i, rr := range r.Answer {
					var got string
					switch rr := rr.(type) {
					case *dns.A:
						got = rr.A.String()
					case *dns.AAAA:
						got = rr.AAAA.String()
					}
					if got != tc.answers[i] || rr.Header().Ttl != 90 {
						t.Errorf("answer %d: %s TTL %d, want %s TTL 90", i, got, rr.Header().Ttl, tc.answers[i])
					}
				}
				if len(r.Answer) == 0 {
					if soa, ok := r.Ns[0].(*dns.SOA); len(r.Ns) != 1 || !ok || soa.Minttl != 90 {
						t.Errorf("no SOA with minimum 90 in the authority section: %v", r.Ns)
					}
				}
			})
		}
	}
	if s.Queries("a.test") != 6 || s.Queries("A.TEST.") != 6 || s.Queries("nope.test") != 2 || s.Total() != 10 {
		t.Errorf("queries a.test %d, nope.test %d, total %d; want 6, 2, 10",
			s.Queries("a.test"), s.Queries("nope.test"), s.Total())
	}
}

// TestSlowNameHoldsOnlyItself: while an answer for slow.test is held for an hour, a.test is
// answered; Close drops the held answer and returns.
func TestSlowNameHoldsOnlyItself(t *testing.T) {
	s := start(t, &Options{Resolve: zone, Delay: func(name string) time.Duration {
		if name == "slow.test" {
			return time.Hour
		}
		return 0
	}})
	done := make(chan error, 1)
	go func() {
		m := new(dns.Msg)
		m.SetQuestion("slow.test.", dns.TypeA)
		// Over TCP, so that Close ends the exchange at once instead of a UDP read timeout.
		_, _, err := (&dns.Client{Net: "tcp", Timeout: time.Hour}).Exchange(m, s.Addr())
		done <- err
	}()
	for s.Queries("slow.test") == 0 {
		time.Sleep(time.Millisecond) // wait for the slow query to arrive; no decision rides on it
	}
	if r := query(context.Background(), t, "udp", s.Addr(), "a.test", dns.TypeA); len(r.Answer) != 1 {
		t.Errorf("a.test: %v", r)
	}
	select {
	case err := <-done:
		t.Fatalf("slow.test answered while held: %v", err)
	default:
	}
	s.Close()
	s.Close() // idempotent
	if err := <-done; err == nil {
		t.Error("slow.test answered after Close")
	}
}

func TestNilOptions(t *testing.T) {
	s := start(t, nil)
	if r := query(context.Background(), t, "udp", s.Addr(), "a.test", dns.TypeA); r.Rcode != dns.RcodeNameError {
		t.Errorf("rcode %s, want NXDOMAIN", dns.RcodeToString[r.Rcode])
	}
}
