package hostlimit

import (
	"context"
	"errors"
	"io"
	"math/rand"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/crawl-project/crawl/aimd"
	"github.com/crawl-project/crawl/internal/retry"
	"github.com/crawl-project/crawl/internal/urlnorm"
)

// KeyBy says which requests share a gate.
type KeyBy int

const (
	// KeyByHost gives each host[:port] its own gate; http and https of one name share it.
	KeyByHost KeyBy = iota
	// KeyByIP gives each server address its own gate: the names one server answers for share
	// it, as a server that limits by client address across its virtual hosts counts them.
	KeyByIP
)

// DefaultMaxAttempts is RetryPolicy.MaxAttempts when TransportOptions.Retry is nil.
const DefaultMaxAttempts = 3

// RetryPolicy says when the transport sends a refused request again, plain data.
type RetryPolicy struct {
	// MaxAttempts is how many times in all an idempotent request without a body (GET, HEAD) is
	// sent while its host answers "slow down" (429, 503 and their kin); the caller gets the
	// last answer. 0 or 1: never retry, the refusal goes to the caller.
	MaxAttempts int
	// Retry n (0 for the first) waits max(Retry-After, full jitter in [0, min(Cap, Base·2^n)))
	// before it asks the host's gate again. Zero: 500ms and 60s.
	Base, Cap time.Duration
}

// TransportOptions configures NewTransport; nil means every default. Every zero field takes
// its default.
type TransportOptions struct {
	// Each host's rate, req/s: where it starts and the bounds it is learned within. Zero:
	// aimd's defaults (2, 0.1 and 1000).
	InitialRate, MinRate, MaxRate float64
	// MaxConcurrency caps each host's requests in flight (the learned window). Zero: 8.
	MaxConcurrency int
	// KeyBy chooses the gates: per host (the zero value) or per server address.
	KeyBy KeyBy
	// Resolver looks names up for KeyByIP, once per name for the transport's life; a name that
	// does not resolve is keyed by its host. Nil: net.DefaultResolver.
	Resolver *net.Resolver
	// Retry is the retry policy; nil means RetryPolicy{MaxAttempts: DefaultMaxAttempts}.
	Retry *RetryPolicy
	// Store persists what each host's gate learned (rate, window, running pause), so that the
	// next transport given the same store starts there. storage.DB implements it. Nil: it is
	// kept in memory for the transport's life.
	Store StateStore
	// Observer, if set, is told of every attempt when it ends and of every failed save. It is
	// called from the goroutine that ends the attempt, so it must be quick and safe for
	// concurrent use.
	Observer func(Event)
}

// EventKind says what an Event reports.
type EventKind int

const (
	// AttemptEnded: one attempt of a request ended (for a served response, when its body was
	// read to the end or closed).
	AttemptEnded EventKind = iota
	// SaveFailed: saving learned state through the StateStore failed; Err says why.
	SaveFailed
)

// Event is what the transport tells TransportOptions.Observer.
type Event struct {
	Kind    EventKind
	Host    string        // the gate's key
	Attempt int           // 1 for the first attempt of a request
	Wait    time.Duration // from the request (or the previous attempt's answer) to admission
	Latency time.Duration // from sending to the response headers
	Status  int           // 0: no response
	Err     error         // the attempt's error, or why a save failed
	Pause   time.Duration // how long the answer paused the host (Retry-After, a spent quota)
	Gate    HostStats     // the host's gate after the attempt's outcome
}

// NewTransport returns an http.RoundTripper that sends every request through base (nil:
// http.DefaultTransport) once its host's gate admits it: the same token bucket, concurrency
// window, pause and aimd controller the crawler uses, which learn the host's limit from the
// outcomes. RoundTrip blocks until admission and returns ctx.Err() at once, holding no slot, if
// the request's context ends first; a host paused for longer than DefaultMaxPause is answered
// with a *PausedError (errors.Is ErrPaused) at once. A "slow down" answer pauses its host by
// its Retry-After (delta-seconds or an HTTP-date on the host's clock) and is retried as opts'
// RetryPolicy says. A served request holds its window slot until its body is read to the end
// or closed, so the caller must close it, as with any RoundTripper.
//
// The transport is safe for concurrent use by multiple goroutines and starts no goroutine. It
// implements CloseIdleConnections (http.Client.CloseIdleConnections calls it): it closes base's
// idle connections and saves every host's learned state through the Store.
func NewTransport(base http.RoundTripper, opts *TransportOptions) http.RoundTripper {
	return newTransport(base, opts, time.Now, time.After, rand.New(rand.NewSource(time.Now().UnixNano())))
}

// chorePeriod is how often the transport evicts idle hosts and saves learned state, on the way
// through RoundTrip.
const chorePeriod = DefaultIdleEvict / 2

// drainLimit bounds how much of a refused response's body is read so that its connection can
// be reused.
const drainLimit = 64 << 10

// transport is NewTransport's RoundTripper.
type transport struct {
	base     http.RoundTripper
	reg      *Registry
	policy   retry.Policy // MaxAttempts: attempts in all, at least 1
	keyBy    KeyBy
	resolver *net.Resolver
	observe  func(Event)
	now      func() time.Time
	after    func(time.Duration) <-chan time.Time

	chores atomic.Int64 // when (UnixNano) the next chores are due

	mu     sync.Mutex // guards what follows
	rnd    *rand.Rand
	peers  map[string]*peer  // by gate key
	ipKeys map[string]string // host key → gate key, KeyByIP only
}

// peer is what the transport knows of one gate's host besides the gate itself.
type peer struct {
	clock retry.HostClock
	used  time.Time
}

func newTransport(base http.RoundTripper, opts *TransportOptions, now func() time.Time,
	after func(time.Duration) <-chan time.Time, rnd *rand.Rand) *transport {
	var o TransportOptions
	if opts != nil {
		o = *opts
	}
	if base == nil {
		base = http.DefaultTransport
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	rp := RetryPolicy{MaxAttempts: DefaultMaxAttempts}
	if o.Retry != nil {
		rp = *o.Retry
	}
	t := &transport{
		base: base,
		reg: New(Config{AIMD: aimd.Config{InitialRate: o.InitialRate, MinRate: o.MinRate,
			MaxRate: o.MaxRate, MaxWindow: o.MaxConcurrency}, Now: now, After: after}, o.Store),
		policy:   retry.Policy{Base: rp.Base, Cap: rp.Cap, MaxAttempts: max(rp.MaxAttempts, 1)},
		keyBy:    o.KeyBy,
		resolver: o.Resolver,
		observe:  o.Observer,
		now:      now,
		after:    after,
		rnd:      rnd,
		peers:    map[string]*peer{},
		ipKeys:   map[string]string{},
	}
	t.chores.Store(now().Add(chorePeriod).UnixNano())
	return t
}

// RoundTrip sends req once its host's gate admits it, and again after a "slow down" answer
// while the RetryPolicy allows.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	key, err := t.key(ctx, req)
	if err != nil {
		return nil, err
	}
	attempts := 1
	if retryable(req) {
		attempts = t.policy.MaxAttempts
	}
	start := t.now()
	for n := 1; ; n++ {
		tk, err := t.reg.Wait(ctx, key)
		if err != nil {
			return nil, err
		}
		resp, wait, err := t.send(req, tk, key, n, tk.Sent().Sub(start))
		if err != nil || n >= attempts || !retry.KindOf(resp.StatusCode).SlowDown() {
			return resp, err
		}
		t.mu.Lock()
		delay := t.policy.Delay(n-1, wait, t.rnd)
		t.mu.Unlock()
		if deadline, ok := ctx.Deadline(); delay > DefaultMaxPause || ok && t.now().Add(delay).After(deadline) {
			return resp, nil // the caller could not wait for the retry: the refusal is the answer
		}
		discard(resp.Body)
		start = t.now()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.after(delay):
		}
	}
}

// retryable reports whether req may be sent again: an idempotent method without a body.
func retryable(req *http.Request) bool {
	return (req.Method == "" || req.Method == http.MethodGet || req.Method == http.MethodHead) &&
		(req.Body == nil || req.Body == http.NoBody)
}

func discard(b io.ReadCloser) {
	io.Copy(io.Discard, io.LimitReader(b, drainLimit))
	b.Close()
}

// send makes one attempt with the admitted ticket tk and returns its answer and its
// Retry-After (0 if none). The ticket is Done before send returns, except for a served
// response with a body, whose ticket is Done when the body is read to the end or closed.
func (t *transport) send(req *http.Request, tk *Ticket, key string, attempt int, waited time.Duration) (*http.Response, time.Duration, error) {
	var wrote atomic.Int64 // UnixNano of WroteRequest; 0 until then
	trace := &httptrace.ClientTrace{WroteRequest: func(info httptrace.WroteRequestInfo) {
		if info.Err == nil {
			at := t.now()
			wrote.Store(at.UnixNano())
			tk.Wrote(at)
		}
	}}
	r := req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	sent := t.now()
	resp, err := t.base.RoundTrip(r)
	got := t.now()
	ev := Event{Host: key, Attempt: attempt, Wait: waited, Err: err}
	if err != nil {
		tk.Done(got, aimd.Outcome{Signal: errSignal(err), Sent: sent})
		t.told(got, ev)
		return nil, 0, err
	}
	resp.Request = req // as sent by the caller, without the trace
	if w := wrote.Load(); w != 0 && w >= sent.UnixNano() && w <= got.UnixNano() {
		sent = time.Unix(0, w) // a dial or a handshake before it is not the host's latency
	}
	a := t.read(key, resp, sent, got)
	wait, pause := a.Wait, a.Pause
	o := aimd.Outcome{Signal: retry.ClassifyStatus(resp.StatusCode).Signal, Sent: sent, Latency: got.Sub(sent),
		Pause: pause, Stated: a.Stated.Rate()}
	ev.Status, ev.Latency, ev.Pause = resp.StatusCode, o.Latency, pause
	end := func() {
		now := t.now()
		tk.Done(now, o)
		t.told(now, ev)
	}
	_, upgraded := resp.Body.(io.Writer) // 101 Switching Protocols: the body is the connection
	if o.Signal != aimd.Success || pause > 0 || resp.Body == nil || resp.Body == http.NoBody || upgraded {
		end() // at once: a pause must hold before anything else is admitted
		return resp, wait, nil
	}
	resp.Body = &body{ReadCloser: resp.Body, end: end}
	return resp, wait, nil
}

// read reads resp's Retry-After, spent quota and stated policy against its host's clock
// (retry.HostClock).
func (t *transport) read(key string, resp *http.Response, sent, got time.Time) retry.Answer {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peers[key]
	if p == nil {
		p = &peer{}
		t.peers[key] = p
	}
	p.used = got
	return p.clock.Read(resp.StatusCode, resp.Header, sent, got, got)
}

// errSignal is what a request that got no response tells its host's controller
// (retry.ClassifyError): a timeout, a reset or a refused connection is a Failure; our own
// cancellation and anything else say nothing.
func errSignal(err error) aimd.Signal {
	var ne net.Error
	kind := "other"
	switch {
	case errors.Is(err, context.Canceled):
		kind = "canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		kind = "timeout"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF):
		kind = "conn-reset"
	case errors.Is(err, syscall.ECONNREFUSED):
		kind = "conn-refused"
	}
	return retry.ClassifyError(kind).Signal
}

// told tells the Observer of an ended attempt, then does the chores if they are due.
func (t *transport) told(now time.Time, ev Event) {
	if t.observe != nil {
		ev.Gate, _ = t.reg.Host(now, ev.Host)
		t.observe(ev)
	}
	if ev.Pause >= longPause {
		t.save() // a long pause outlives a program that stops now
	}
	if due := t.chores.Load(); now.UnixNano() >= due && t.chores.CompareAndSwap(due, now.Add(chorePeriod).UnixNano()) {
		t.doChores(now)
	}
}

// longPause is a pause long enough to be saved at once.
const longPause = 2 * time.Second

// doChores saves every host's learned state, drops the hosts idle for DefaultIdleEvict from
// memory (their state stays in the store) and forgets their clocks.
func (t *transport) doChores(now time.Time) {
	t.save()
	if err := t.reg.Evict(now); err != nil {
		t.saveFailed(err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, p := range t.peers {
		if now.Sub(p.used) >= DefaultIdleEvict {
			delete(t.peers, k)
		}
	}
}

func (t *transport) save() {
	if err := t.reg.Flush(); err != nil {
		t.saveFailed(err)
	}
}

func (t *transport) saveFailed(err error) {
	if t.observe != nil {
		t.observe(Event{Kind: SaveFailed, Err: err})
	}
}

// CloseIdleConnections closes base's idle connections, if it can, and saves every host's
// learned state through the Store.
func (t *transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
	t.save()
}

// key returns the key of req's gate (see KeyBy).
func (t *transport) key(ctx context.Context, req *http.Request) (string, error) {
	host := urlnorm.HostKey(req.URL)
	if t.keyBy != KeyByIP {
		return host, nil
	}
	t.mu.Lock()
	k, ok := t.ipKeys[host]
	t.mu.Unlock()
	if ok {
		return k, nil
	}
	name, _ := urlnorm.SplitHostKey(host)
	if a, err := netip.ParseAddr(name); err == nil {
		return urlnorm.AddrKey(host, []netip.Addr{a}), nil
	}
	addrs, err := t.resolver.LookupNetIP(ctx, "ip", name)
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if err != nil {
		return host, nil // its fetch reports the failure
	}
	k = urlnorm.AddrKey(host, addrs)
	t.mu.Lock()
	t.ipKeys[host] = k
	t.mu.Unlock()
	return k, nil
}

// body ends its attempt (end) when it is read to the end, fails or is closed.
type body struct {
	io.ReadCloser
	once sync.Once
	end  func()
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(b.end)
	}
	return n, err
}

func (b *body) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.end)
	return err
}
