package hostlimit

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/crawl-project/crawl/aimd"
)

// tokenSlack absorbs float rounding in the bucket's arithmetic (about 1e-16 of a token) so that
// asking again exactly at readyAt succeeds. It is far below one nanosecond's worth of tokens at
// any rate of 0.001 req/s or more, so nothing is admitted even a nanosecond early.
const tokenSlack = 1e-12

// maxReadyDelay bounds a computed readyAt so that a degenerate rate (0) cannot overflow time.
const maxReadyDelay = 24 * time.Hour

// A request admitted late takes its token as of when the token was due, by up to maxLateCredit
// or lateShare of the sending interval, whichever is less (see host.creditLocked). The
// dispatcher asks again at readyAt, but Go's timers wake late: on Linux the netpoller sleeps
// in whole milliseconds, so a timer fires up to 1 ms after its time (median 0.47 ms on the
// development machine, 0.75 ms for the crawler's dispatcher). A burst-1 bucket admitted at
// readyAt + δ is empty at that moment, so each interval grew by δ: a host allowed 49.4 req/s
// was sent 47.6. With the credit the gaps average 1/rate; one gap can be shorter than 1/rate
// by the credit. lateShare (2.5%) stays within the margin aimd keeps under a limit measured
// from one-token gaps (aimd's beta, 3%), so a one-token server bucket (nginx limit_req
// without burst) is not sent a gap it was never seen to accept; maxLateCredit (1 ms) is as
// late as a timer wakes.
const (
	maxLateCredit = time.Millisecond
	lateShare     = 0.025
)

// latencySamples is how many of a host's latest success latencies its base latency is taken
// from (see latencyLog).
const latencySamples = 16

// spacing says what a burst-1 bucket spaces the next request from.
type spacing uint8

const (
	// spacedFromWrites: one interval after the latest write (the host has refused nothing).
	spacedFromWrites spacing = iota
	// spacedFromHandling: also one interval after the server likely handled the latest
	// answered request, its write plus the excess of its latency over the host's base (the
	// host has said "slow down" at least once: its limit binds).
	spacedFromHandling
)

// latencyLog holds a host's latest success latencies, to the headers. The zero value is empty.
type latencyLog struct {
	d [latencySamples]time.Duration
	n int // samples held, at most latencySamples
	i int // where the next one goes
}

func (l *latencyLog) add(d time.Duration) {
	l.d[l.i] = d
	l.i = (l.i + 1) % latencySamples
	l.n = min(l.n+1, latencySamples)
}

// base is the second least latency held (the least if one is held, 0 if none): a low quantile
// of the host's latency that one unusually fast answer does not pull down.
func (l *latencyLog) base() time.Duration {
	if l.n == 0 {
		return 0
	}
	least, second := time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
	for _, d := range l.d[:l.n] {
		switch {
		case d < least:
			least, second = d, least
		case d < second:
			second = d
		}
	}
	if l.n == 1 {
		return least
	}
	return second
}

// host is one host's gate. Every field below mu is guarded by mu; the *Locked methods require
// that mu is held.
type host struct {
	key       string
	maxWindow int // Config.AIMD.MaxWindow; 0 = no cap

	mu   sync.Mutex
	ctrl *aimd.Controller // not safe for concurrent use: only touched under mu
	lim  *rate.Limiter    // burst 1; only AllowN/TokensAt/SetLimitAt, never reservations
	// creditFrom bounds a late admission's credit from below (see creditLocked): the latest
	// time lim was moved to (it must never be moved back, which would credit tokens twice),
	// and the latest Done (a request held back by a full window was not late before it).
	creditFrom  time.Time
	limit       float64 // rate currently set on lim
	ceiling     float64 // Crawl-delay cap, req/s; 0 = none
	inFlight    int
	pausedUntil time.Time
	// wrote is the latest time a request reached the wire (see Ticket.Wrote); a burst-1
	// bucket admits nothing until one interval after it, less the late credit.
	wrote time.Time
	// handled is the latest time the server likely handled a request (its write plus the excess
	// of its latency over latencies.base(), at most one interval); under spacedFromHandling a
	// burst-1 bucket admits nothing until one interval after it, less the late credit.
	handled    time.Time
	spacing    spacing
	latencies  latencyLog
	last       time.Time // latest time seen; earlier times are clamped to it
	lastActive time.Time
	admitted   uint64
	demand     aimd.Demand   // what the next admitted request tells the controller (see Config.DemandByCaller)
	byCaller   bool          // Config.DemandByCaller
	stateErr   string        // why saved state could not be loaded, if it could not
	fromHint   bool          // started from a hint (HintStore) and no outcome since: not saved
	changed    chan struct{} // closed (and replaced) when a waiter may now get in sooner
	evicting   bool          // state saved by a running Evict; cleared by any use
	evicted    bool          // removed from the registry: callers must look the key up again
}

// newHost makes key's host from what the store gave: data (found) was saved by this crawl, or is
// a hint from another if hint.
func newHost(cfg *Config, key string, now time.Time, data []byte, found bool, loadErr error, hint bool) *host {
	h := &host{
		key:        key,
		maxWindow:  cfg.AIMD.MaxWindow,
		byCaller:   cfg.DemandByCaller,
		last:       now,
		lastActive: now,
		changed:    make(chan struct{}),
	}
	if n := cfg.MaxWindowOf[key]; n > 0 && (h.maxWindow <= 0 || n < h.maxWindow) {
		h.maxWindow = n
	}
	switch {
	case loadErr != nil:
		h.stateErr = "load: " + loadErr.Error()
	case found:
		s, err := decodeState(data)
		if err != nil {
			h.stateErr = "decode: " + err.Error()
			break
		}
		if hint {
			h.ctrl = aimd.Hint(cfg.AIMD, s.AIMD.Rate, s.AIMD.Window, now)
			h.fromHint = true
			break
		}
		h.ctrl = aimd.Restore(cfg.AIMD, s.AIMD, now)
		h.pausedUntil = restoredPause(s, now)
		h.ceiling = validCeiling(s.Ceiling)
		if s.AIMD.OverLimit > 0 {
			h.spacing = spacedFromHandling
		}
	}
	if h.ctrl == nil {
		h.ctrl = aimd.New(cfg.AIMD, now)
	}
	if h.ceiling > 0 {
		h.ctrl.SetCeiling(h.ceiling)
	}
	h.demand = h.unheld()
	h.limit = h.effectiveRateLocked()
	h.lim = rate.NewLimiter(rate.Limit(h.limit), 1)
	h.creditFrom = now
	return h
}

// clockLocked returns now, or the latest time the host has seen if now is earlier, and records
// it. Concurrent callers pass slightly out-of-order times; moving the limiter's clock backwards
// would credit tokens twice.
func (h *host) clockLocked(now time.Time) time.Time {
	if now.Before(h.last) {
		return h.last
	}
	h.last = now
	return now
}

func (h *host) effectiveRateLocked() float64 {
	r := h.ctrl.Rate()
	if h.ceiling > 0 && r > h.ceiling {
		r = h.ceiling
	}
	return r
}

// syncLimitLocked makes the token bucket pace at the controller's current rate.
func (h *host) syncLimitLocked(now time.Time) {
	if r := h.effectiveRateLocked(); r != h.limit {
		h.lim.SetLimitAt(now, rate.Limit(r))
		h.limit = r
		h.creditFrom = later(h.creditFrom, now)
	}
}

func (h *host) windowLocked() int {
	w := h.ctrl.Window()
	if h.maxWindow > 0 && w > h.maxWindow {
		w = h.maxWindow
	}
	return max(w, 1)
}

// tokenReadyAtLocked is the earliest time at or after at when the bucket holds a whole token at
// the current rate. It is rounded up to the nanosecond so that asking again then succeeds.
func (h *host) tokenReadyAtLocked(at time.Time) time.Time {
	tokens := h.lim.TokensAt(at)
	if tokens >= 1-tokenSlack {
		return at
	}
	if h.limit <= 0 {
		return at.Add(maxReadyDelay)
	}
	ns := math.Ceil((1 - tokens) / h.limit * float64(time.Second))
	if ns > float64(maxReadyDelay) {
		return at.Add(maxReadyDelay)
	}
	return at.Add(time.Duration(ns))
}

// tryAdmitLocked admits one request at now or says when to ask again (zero: after a Done).
func (h *host) tryAdmitLocked(now time.Time) (*Ticket, time.Time) {
	now = h.clockLocked(now)
	h.lastActive = now
	if now.Before(h.pausedUntil) {
		return nil, h.tokenReadyAtLocked(h.pausedUntil)
	}
	if h.inFlight >= h.windowLocked() {
		return nil, time.Time{}
	}
	// Check first (AllowN alone would admit up to a nanosecond early: it truncates the wait),
	// then take the token. AllowN(at, 1) either takes one token or changes
	// nothing: no reservation is ever left behind to fire after a rate change or a pause.
	if ready := h.tokenReadyAtLocked(now); ready.After(now) {
		return nil, ready
	}
	if free := h.wireFreeLocked(); now.Before(free) {
		return nil, free
	}
	// A late request takes its token as of when it was due (creditLocked); if float rounding
	// leaves a hair less than a token then, it takes it now.
	at := h.creditLocked(now)
	if !h.lim.AllowN(at, 1) {
		if at = now; !h.lim.AllowN(now, 1) { // cannot happen after the check above; never spin on it
			return nil, now.Add(time.Nanosecond)
		}
	}
	h.creditFrom = at
	h.inFlight++
	h.admitted++
	t := &Ticket{h: h, sent: now, inFlight: h.inFlight, demand: h.demand}
	h.demand = h.unheld()
	return t, time.Time{}
}

// unheld is what a request admitted with no Starved before it tells the controller: that it
// had room to spare if the caller reports starvation (Config.DemandByCaller), else nothing.
func (h *host) unheld() aimd.Demand {
	if h.byCaller {
		return aimd.DemandSpare
	}
	return aimd.DemandUnknown
}

// starveLocked records that a request was ready for host at now, with a worker free for it,
// and waits for a token only: the next admitted request was held back by the host's rate.
// A pause or a full window holds nothing back that the rate could change.
func (h *host) starveLocked(now time.Time) {
	now = h.clockLocked(now)
	if now.Before(h.pausedUntil) || h.inFlight >= h.windowLocked() ||
		(!h.tokenReadyAtLocked(now).After(now) && !now.Before(h.wireFreeLocked())) {
		return
	}
	h.demand = aimd.DemandHeld
}

// creditLocked returns the time a request admitted at now takes its token at: when it could
// first have been admitted (its token whole, the host not paused, creditFrom), but no earlier
// than the late credit before now (see maxLateCredit). The bucket must hold a whole token at
// now.
func (h *host) creditLocked(now time.Time) time.Time {
	credit := h.lateCreditLocked()
	at := later(now.Add(-credit), later(h.creditFrom, h.pausedUntil))
	if ready := h.tokenReadyAtLocked(at); ready.Before(now) {
		return ready
	}
	return now
}

// lateCreditLocked is how much earlier than now a late request may take its token: maxLateCredit
// or lateShare of the sending interval, whichever is less.
func (h *host) lateCreditLocked() time.Duration {
	credit := maxLateCredit
	if h.limit > 0 {
		credit = min(credit, time.Duration(lateShare/h.limit*float64(time.Second)))
	}
	return credit
}

// wireFreeLocked is the earliest a burst-1 bucket admits after the latest write (and, under
// spacedFromHandling, after the latest handling): one interval at the current rate, less the
// late credit. Zero for no rate or neither time yet.
func (h *host) wireFreeLocked() time.Time {
	from := h.wrote
	if h.spacing == spacedFromHandling {
		from = later(from, h.handled)
	}
	if h.limit <= 0 || from.IsZero() {
		return time.Time{}
	}
	return from.Add(h.intervalLocked() - h.lateCreditLocked())
}

// intervalLocked is the sending interval at the current rate; the rate must be positive.
func (h *host) intervalLocked() time.Duration {
	return time.Duration(float64(time.Second) / h.limit)
}

// observeLatencyLocked learns from o (Sent filled in): a success's latency joins the host's
// log; a "slow down" moves the host to spacedFromHandling; under it, a success answered later
// than the host's base latency moves handled to its write plus that excess, at most one
// interval at the current rate (so a jittery or hostile host at most halves its rate).
func (h *host) observeLatencyLocked(o aimd.Outcome) {
	switch o.Signal {
	case aimd.Overload:
		h.spacing = spacedFromHandling
		return
	case aimd.Success:
	default:
		return
	}
	if o.Latency <= 0 {
		return
	}
	h.latencies.add(o.Latency)
	if h.spacing != spacedFromHandling || h.limit <= 0 {
		return
	}
	excess := min(o.Latency-h.latencies.base(), h.intervalLocked())
	if excess > 0 {
		h.handled = later(h.handled, o.Sent.Add(excess))
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// pauseLocked pauses the whole host until until; it never shortens a longer pause.
func (h *host) pauseLocked(until time.Time) {
	if until.After(h.pausedUntil) {
		h.pausedUntil = until
	}
}

// wakeLocked releases every Wait blocked on this host so it asks again.
func (h *host) wakeLocked() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// stateLocked encodes the host's state to save, stamped savedAt; nil (no error) for a host
// that holds only a hint.
func (h *host) stateLocked(savedAt time.Time) ([]byte, error) {
	if h.fromHint {
		return nil, nil
	}
	return encodeState(savedState{
		AIMD:        h.ctrl.State(),
		PausedUntil: h.pausedUntil,
		Ceiling:     h.ceiling,
		SavedAt:     savedAt,
	})
}

// Ticket is one admitted request. It holds one slot of its host's window until Done.
// A Ticket is safe for concurrent use.
type Ticket struct {
	h        *host
	sent     time.Time
	inFlight int         // the host's requests in flight when it was admitted, itself included
	demand   aimd.Demand // whether the host's rate held it back
	done     bool        // guarded by h.mu
}

// Host returns the key of the host that admitted the ticket.
func (t *Ticket) Host() string { return t.h.key }

// Sent returns the time the ticket was admitted.
func (t *Ticket) Sent() time.Time { return t.sent }

// Wrote tells the gate that the ticket's request reached the wire at at. The bucket (burst 1)
// took the request's token when it was admitted; a request that left later than that (a busy
// machine, a dial or a handshake first) would otherwise leave the next one, sent on time, a
// shorter gap than the rate's interval at the server. So the host admits nothing until one
// interval after the latest write, less the late credit. Calls after Done have no effect.
func (t *Ticket) Wrote(at time.Time) {
	h := t.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if t.done {
		return
	}
	h.wrote = later(h.wrote, at)
}

// Done releases the ticket's window slot and feeds the outcome to the host's controller, which
// may change the host's rate and window. A positive o.Pause (Retry-After, or a spent quota)
// first pauses the whole host until now + o.Pause (never shortening a longer pause), under the
// same lock: no request is admitted between the slot's release and the pause. A success's
// o.Latency beyond the host's base latency may hold back the next request (see
// observeLatencyLocked); o.Sent should then be when the request was written. A zero o.Sent is
// taken to be t.Sent(), a zero o.InFlight the number in flight when the ticket was admitted.
// Only the first call has any effect; later calls are no-ops. Every Ticket must be Done exactly
// once in the normal flow (use aimd.Neutral for a request that was never sent).
func (t *Ticket) Done(now time.Time, o aimd.Outcome) {
	h := t.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if t.done {
		return
	}
	t.done = true
	h.fromHint = false // the host's own outcome: its state is the crawl's now
	if o.Pause > 0 {
		h.pauseLocked(now.Add(o.Pause))
	}
	now = h.clockLocked(now)
	h.inFlight--
	h.lastActive = now
	h.creditFrom = later(h.creditFrom, now)
	if o.Sent.IsZero() {
		o.Sent = t.sent
	}
	if o.InFlight <= 0 {
		o.InFlight = t.inFlight
	}
	if o.Demand == aimd.DemandUnknown {
		o.Demand = t.demand
	}
	h.ctrl.Observe(now, o)
	h.syncLimitLocked(now)
	h.observeLatencyLocked(o)
	h.wakeLocked()
}
