package fetch

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sync/singleflight"
)

// DefaultDNSTimeout bounds one lookup when ResolverConfig.Timeout is 0.
const DefaultDNSTimeout = 5 * time.Second

// How long the Resolver keeps answers.
const (
	minTTL      = 30 * time.Second // a positive answer's TTL is raised to this at least
	maxTTL      = time.Hour        // and lowered to this at most
	systemTTL   = 5 * time.Minute  // the system resolver does not tell the TTL: assume this
	negativeTTL = 10 * time.Second // "no such host" and "no address"
	sweepEvery  = 4096             // answers stored between two sweeps of expired ones
)

// ResolverConfig configures NewResolver. Zero fields take the documented defaults.
type ResolverConfig struct {
	// Server is the DNS server to ask, "host:port" with host an IP address (UDP, and TCP
	// when an answer comes truncated). "" asks the system resolver (its configuration,
	// /etc/hosts included), which does not tell the TTL: its answers are kept 5 minutes.
	Server string
	// Timeout bounds one lookup of a name, A and AAAA together (default DefaultDNSTimeout).
	// A query is sent once: an answer lost on the way costs the timeout.
	Timeout time.Duration
}

// Resolver looks up host names for a crawl. An answer is kept for its TTL, clamped to 30 s .. 1 h
// ("no such host" and "no address": 10 s; failures such as a timeout or SERVFAIL are not
// kept), so a name is looked up once per TTL. Concurrent lookups of one name share one;
// lookups of different names run in parallel, each bounded by the timeout whatever its
// callers' contexts, so a slow answer holds back only the requests to that name.
//
// A Resolver is safe for concurrent use by multiple goroutines; share one per crawl.
type Resolver struct {
	server  string
	timeout time.Duration
	udp     *dns.Client
	tcp     *dns.Client
	now     func() time.Time // read for expiry; tests replace it

	flight singleflight.Group

	mu     sync.Mutex
	cache  map[string]answer // by name; mu guards it and stored
	stored int               // answers stored since the last sweep
}

// answer is a kept lookup result: addresses, or the "not found" error, until expires.
type answer struct {
	addrs   []netip.Addr
	err     *net.DNSError
	expires time.Time
}

// NewResolver returns a Resolver for cfg, filling in defaults.
func NewResolver(cfg ResolverConfig) *Resolver {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultDNSTimeout
	}
	return &Resolver{
		server:  cfg.Server,
		timeout: cfg.Timeout,
		udp:     &dns.Client{Net: "udp", Timeout: cfg.Timeout},
		tcp:     &dns.Client{Net: "tcp", Timeout: cfg.Timeout},
		now:     time.Now,
		cache:   map[string]answer{},
	}
}

// LookupNetIP returns the addresses of host: a name (case and a trailing dot do not matter), or
// an IP literal, returned as it is. A failure is a *net.DNSError: IsNotFound when the name does
// not exist or has no address, IsTimeout when the lookup ran past the timeout. When ctx ends
// first LookupNetIP returns ctx.Err(); the lookup goes on for other callers and the cache.
func (r *Resolver) LookupNetIP(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	name := canonicalName(host)
	if addrs, err, ok := r.cached(name); ok {
		return addrs, err
	}
	ch := r.flight.DoChan(name, func() (any, error) {
		// Another lookup may have stored the answer between cached and DoChan.
		if addrs, err, ok := r.cached(name); ok {
			return addrs, err
		}
		lctx, cancel := context.WithTimeout(context.Background(), r.timeout)
		defer cancel()
		addrs, ttl, err := r.ask(lctx, name)
		r.store(name, addrs, ttl, err)
		return addrs, err
	})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return slices.Clone(res.Val.([]netip.Addr)), nil
	}
}

func canonicalName(host string) string {
	b := []byte(host)
	if n := len(b); n > 1 && b[n-1] == '.' {
		b = b[:n-1]
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// cached returns the kept answer for name, if there is one that has not expired.
func (r *Resolver) cached(name string) ([]netip.Addr, error, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.cache[name]
	if !ok || !r.now().Before(a.expires) {
		return nil, nil, false
	}
	if a.err != nil {
		return nil, a.err, true
	}
	return slices.Clone(a.addrs), nil, true
}

// store keeps the outcome of a lookup that took ttl (the answer's own TTL; 0 when unknown):
// addresses for ttl clamped to [minTTL, maxTTL], "not found" for negativeTTL, nothing else.
// Every sweepEvery answers it drops the expired ones.
func (r *Resolver) store(name string, addrs []netip.Addr, ttl time.Duration, err error) {
	var a answer
	var dnsErr *net.DNSError
	switch {
	case err == nil:
		a.addrs = addrs
		ttl = min(max(ttl, minTTL), maxTTL)
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		a.err = dnsErr
		ttl = negativeTTL
	default:
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	a.expires = now.Add(ttl)
	r.cache[name] = a
	if r.stored++; r.stored >= sweepEvery {
		r.stored = 0
		for k, v := range r.cache {
			if !now.Before(v.expires) {
				delete(r.cache, k)
			}
		}
	}
}

// ask looks name up once: with the system resolver, or with A and AAAA queries to the server in
// parallel. It returns the addresses and the least TTL among the records that gave them.
func (r *Resolver) ask(ctx context.Context, name string) ([]netip.Addr, time.Duration, error) {
	if r.server == "" {
		addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", name)
		return addrs, systemTTL, err
	}
	var v6 reply
	var wg sync.WaitGroup
	wg.Go(func() { v6 = r.exchange(ctx, name, dns.TypeAAAA) })
	v4 := r.exchange(ctx, name, dns.TypeA)
	wg.Wait()
	addrs := append(v4.addrs, v6.addrs...)
	switch {
	case len(addrs) > 0: // one family is enough, even if the other query failed
		ttl := v4.ttl
		if len(v4.addrs) == 0 || (len(v6.addrs) > 0 && v6.ttl < ttl) {
			ttl = v6.ttl
		}
		return addrs, ttl, nil
	case v4.err == nil && v6.err == nil:
		return nil, 0, &net.DNSError{Err: "no such host", Name: name, Server: r.server, IsNotFound: true}
	case v4.err != nil:
		return nil, 0, v4.err
	}
	return nil, 0, v6.err
}

// reply is the outcome of one query: addresses with their least TTL, none (the name does not
// exist or has no address of the type), or an error (a *net.DNSError).
type reply struct {
	addrs []netip.Addr
	ttl   time.Duration
	err   error
}

// exchange sends one query for name of type qtype (A or AAAA) to the server, over UDP and, if
// the answer comes truncated, again over TCP.
func (r *Resolver) exchange(ctx context.Context, name string, qtype uint16) reply {
	fail := func(msg string, timeout bool) reply {
		return reply{err: &net.DNSError{Err: msg, Name: name, Server: r.server, IsTimeout: timeout, IsTemporary: true}}
	}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	in, _, err := r.udp.ExchangeContext(ctx, m, r.server)
	if err == nil && in.Truncated {
		in, _, err = r.tcp.ExchangeContext(ctx, m, r.server)
	}
	if err != nil {
		var ne net.Error
		return fail(err.Error(), errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded))
	}
	switch in.Rcode {
	case dns.RcodeSuccess, dns.RcodeNameError:
	default:
		return fail("server answered "+dns.RcodeToString[in.Rcode], false)
	}
	var out reply
	for _, rr := range in.Answer { // a CNAME's targets come in the same answer
		var a netip.Addr
		switch rr := rr.(type) {
		case *dns.A:
			a, _ = netip.AddrFromSlice(rr.A.To4())
		case *dns.AAAA:
			a, _ = netip.AddrFromSlice(rr.AAAA.To16())
		default:
			continue
		}
		if ttl := time.Duration(rr.Header().Ttl) * time.Second; len(out.addrs) == 0 || ttl < out.ttl {
			out.ttl = ttl
		}
		if a.IsValid() {
			out.addrs = append(out.addrs, a)
		}
	}
	return out
}

// dialContext returns a DialContext for an http.Transport that resolves names with r and
// dials their addresses with d in turn (IPv4 first) until one connects; d.Control, if set,
// sees every address dialled. The error of a failed lookup keeps its *net.DNSError.
func (r *Resolver) dialContext(d *net.Dialer) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(address)
		if err != nil {
			return nil, err
		}
		if _, err := netip.ParseAddr(host); err == nil {
			return d.DialContext(ctx, network, address)
		}
		addrs, err := r.LookupNetIP(ctx, host)
		if err != nil {
			return nil, &net.OpError{Op: "dial", Net: network, Err: err}
		}
		slices.SortStableFunc(addrs, func(a, b netip.Addr) int { // IPv4 first
			switch {
			case a.Unmap().Is4() == b.Unmap().Is4():
				return 0
			case a.Unmap().Is4():
				return -1
			}
			return 1
		})
		var first error
		for _, a := range addrs {
			a = a.Unmap()
			if (network == "tcp4" && !a.Is4()) || (network == "tcp6" && !a.Is6()) {
				continue
			}
			c, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
			if err == nil {
				return c, nil
			}
			if first == nil {
				first = err
			}
			if ctx.Err() != nil {
				break
			}
		}
		if first == nil {
			first = &net.OpError{Op: "dial", Net: network, Err: &net.DNSError{Err: "no address for " + network, Name: host, IsNotFound: true}}
		}
		return nil, first
	}
}
