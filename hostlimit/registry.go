package hostlimit

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/crawl-project/crawl/aimd"
)

// Registry holds the gate of every host in use. Hosts are created on first use (restored from
// the StateStore when it has state for them). A Registry is safe for concurrent use by multiple
// goroutines.
type Registry struct {
	cfg   Config
	store StateStore

	saveMu sync.Mutex // serializes Flush and Evict so their saves land in order

	mu    sync.RWMutex // guards hosts and gen; held only to look up, insert or delete
	hosts map[string]*host
	gen   uint64 // incremented whenever Evict deletes hosts
}

// New returns an empty Registry. store may be nil: learned state is then kept in memory only.
func New(cfg Config, store StateStore) *Registry {
	if cfg.MaxPause <= 0 {
		cfg.MaxPause = DefaultMaxPause
	}
	if cfg.IdleEvict <= 0 {
		cfg.IdleEvict = DefaultIdleEvict
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	if store == nil {
		store = &memStore{m: make(map[string][]byte)}
	}
	return &Registry{cfg: cfg, store: store, hosts: make(map[string]*host)}
}

// lookup returns key's host, creating it (restored from the store) if it is not in memory.
func (r *Registry) lookup(now time.Time, key string) *host {
	for {
		r.mu.RLock()
		h, gen := r.hosts[key], r.gen
		r.mu.RUnlock()
		if h != nil {
			return h
		}
		// Load outside the lock: one host's store read never blocks other hosts.
		data, ok, err := r.store.LoadHostState(key)
		hint := false
		if hs, isHints := r.store.(HintStore); isHints && !ok && err == nil {
			data, ok, err = hs.LoadHostHint(key)
			hint = true
		}
		nh := newHost(&r.cfg, key, now, data, ok, err, hint)
		r.mu.Lock()
		if h := r.hosts[key]; h != nil {
			r.mu.Unlock()
			return h
		}
		if r.gen != gen {
			// An Evict saved and dropped hosts while we loaded: what we read may be stale.
			r.mu.Unlock()
			continue
		}
		r.hosts[key] = nh
		r.mu.Unlock()
		return nh
	}
}

// lockedHost returns key's host with its mutex held, never one that Evict has dropped. Using a
// host cancels an Evict that has saved it but not yet dropped it.
func (r *Registry) lockedHost(now time.Time, key string) *host {
	for {
		h := r.lookup(now, key)
		h.mu.Lock()
		if !h.evicted {
			h.evicting = false
			return h
		}
		h.mu.Unlock()
	}
}

// TryAdmit admits one request to host at now without blocking. If it may go, TryAdmit takes a
// token, holds one window slot and returns a Ticket that must be Done. Otherwise it returns nil
// and the earliest time worth asking again: the end of a pause, or when the token bucket refills
// at the current rate. A zero readyAt means the window is full: ask again after a Ticket of this
// host is Done. A host seen for the first time is restored from the StateStore, which may read
// from disk.
func (r *Registry) TryAdmit(now time.Time, host string) (t *Ticket, readyAt time.Time) {
	h := r.lockedHost(now, host)
	defer h.mu.Unlock()
	return h.tryAdmitLocked(now)
}

// Starved tells host's gate that at now the caller had a request ready for it, with a worker
// free, and TryAdmit refused it: if only a token was lacking (not a pause, not a full window),
// the host's next admitted request counts as held back by its rate, and the rate may grow on it
// (see Config.DemandByCaller).
func (r *Registry) Starved(now time.Time, host string) {
	h := r.lockedHost(now, host)
	defer h.mu.Unlock()
	h.starveLocked(now)
}

// Wait blocks until host admits a request and returns its Ticket, which must be Done. It uses
// the same accounting as TryAdmit. It returns ctx.Err() when ctx ends first, and a *PausedError
// (errors.Is ErrPaused) at once when host is paused for longer than Config.MaxPause from now.
// Time comes from Config.Now and Config.After.
func (r *Registry) Wait(ctx context.Context, host string) (*Ticket, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		now := r.cfg.Now()
		h := r.lockedHost(now, host)
		t, readyAt := h.tryAdmitLocked(now)
		if t == nil {
			h.starveLocked(now) // a blocked worker waits: whatever holds it back, the rate did if a token is all it lacks
		}
		pausedUntil, changed := h.pausedUntil, h.changed
		h.mu.Unlock()
		if t != nil {
			return t, nil
		}
		if pausedUntil.Sub(now) > r.cfg.MaxPause {
			return nil, &PausedError{Host: host, Until: pausedUntil}
		}
		var timer <-chan time.Time // nil (never fires) when only a Done can help
		if !readyAt.IsZero() {
			timer = r.cfg.After(readyAt.Sub(now))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer:
		case <-changed:
		}
	}
}

// SetCeiling caps host's rate at rate req/s (robots.txt Crawl-delay: 1/delay); 0 removes the
// cap. The ceiling is saved with the host's state. Setting the ceiling the host has changes
// nothing.
func (r *Registry) SetCeiling(host string, rate float64) {
	now := r.cfg.Now()
	h := r.lockedHost(now, host)
	defer h.mu.Unlock()
	if validCeiling(rate) == h.ceiling {
		return
	}
	now = h.clockLocked(now)
	h.lastActive = now
	h.ceiling = validCeiling(rate)
	h.ctrl.SetCeiling(h.ceiling)
	h.syncLimitLocked(now)
	h.wakeLocked()
}

// HostStats is a snapshot of one host's gate.
type HostStats struct {
	Host string
	aimd.Stats
	Limit       float64   // rate the token bucket paces at now: the controller's rate capped by Ceiling
	Ceiling     float64   // Crawl-delay cap, req/s; 0 = none
	InFlight    int       // tickets not yet Done
	PausedUntil time.Time // zero unless paused at the snapshot time
	Admitted    uint64    // tickets handed out since the host was loaded
	LastActive  time.Time
	StateError  string // why saved state could not be restored ("" when it could)
}

func (h *host) statsLocked(now time.Time) HostStats {
	s := HostStats{
		Host:       h.key,
		Stats:      h.ctrl.Stats(),
		Limit:      h.limit,
		Ceiling:    h.ceiling,
		InFlight:   h.inFlight,
		Admitted:   h.admitted,
		LastActive: h.lastActive,
		StateError: h.stateErr,
	}
	if now.Before(h.pausedUntil) {
		s.PausedUntil = h.pausedUntil
	}
	return s
}

// snapshot returns the hosts in memory, sorted by key.
func (r *Registry) snapshot() []*host {
	r.mu.RLock()
	hs := make([]*host, 0, len(r.hosts))
	for _, h := range r.hosts {
		hs = append(hs, h)
	}
	r.mu.RUnlock()
	slices.SortFunc(hs, func(a, b *host) int { return strings.Compare(a.key, b.key) })
	return hs
}

// Stats returns a snapshot of every host in memory, sorted by host.
func (r *Registry) Stats(now time.Time) []HostStats {
	hs := r.snapshot()
	out := make([]HostStats, 0, len(hs))
	for _, h := range hs {
		h.mu.Lock()
		if !h.evicted {
			out = append(out, h.statsLocked(now))
		}
		h.mu.Unlock()
	}
	return out
}

// Host returns a snapshot of the host name; ok is false when it is not in memory (never used,
// or evicted). It never loads or creates a host.
func (r *Registry) Host(now time.Time, name string) (s HostStats, ok bool) {
	withLoaded(r, name, func(h *host) { s, ok = h.statsLocked(now), true })
	return s, ok
}

// withLoaded calls fn with the gate of key locked, if it is in memory and not evicted.
func withLoaded(r *Registry, key string, fn func(h *host)) {
	r.mu.RLock()
	h := r.hosts[key]
	r.mu.RUnlock()
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.evicted {
		fn(h)
	}
}

// Admitted returns how many requests name's gate has admitted since it was last created or
// restored, without computing its other figures; ok is false if the gate is not in memory.
func (r *Registry) Admitted(name string) (n uint64, ok bool) {
	withLoaded(r, name, func(h *host) { n, ok = h.admitted, true })
	return n, ok
}

// Limit returns the rate, req/s, name's token bucket paces at now (HostStats.Limit), without
// computing its other figures; ok is false if the gate is not in memory. It never loads or
// creates a host.
func (r *Registry) Limit(name string) (limit float64, ok bool) {
	withLoaded(r, name, func(h *host) { limit, ok = h.limit, true })
	return limit, ok
}

// Evict saves the state of every host that has nothing in flight and has been idle for at
// least Config.IdleEvict, then drops those hosts from memory; their next use restores them from
// the store. If saving fails, nothing is dropped and the error is returned. Call it now and then
// (say every IdleEvict/2), not in a tight loop: a host load that overlaps an eviction is redone.
func (r *Registry) Evict(now time.Time) error { return r.EvictUnless(now, nil) }

// EvictUnless is Evict keeping the hosts keep names (a caller's hosts with work waiting for
// their gate), however long idle; a nil keep keeps none. keep is called with no lock of the
// registry held, on Evict's goroutine.
func (r *Registry) EvictUnless(now time.Time, keep func(host string) bool) error {
	r.saveMu.Lock()
	defer r.saveMu.Unlock()

	batch := make(map[string][]byte)
	var cands []*host
	var encErr error // a host whose state cannot be encoded stays in memory
	for _, h := range r.snapshot() {
		if keep != nil && keep(h.key) {
			continue
		}
		h.mu.Lock()
		if !h.evicted && h.inFlight == 0 && now.Sub(h.lastActive) >= r.cfg.IdleEvict {
			if b, err := h.stateLocked(now); err != nil {
				encErr = cmp.Or(encErr, fmt.Errorf("hostlimit: encode %s: %w", h.key, err))
			} else {
				if b != nil {
					batch[h.key] = b
				}
				h.evicting = true
				cands = append(cands, h)
			}
		}
		h.mu.Unlock()
	}
	if len(cands) == 0 {
		return encErr
	}
	if err := r.saveStates(batch); err != nil {
		for _, h := range cands {
			h.mu.Lock()
			h.evicting = false
			h.mu.Unlock()
		}
		return fmt.Errorf("hostlimit: evict: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	dropped := false
	for _, h := range cands {
		h.mu.Lock()
		if h.evicting { // not used since it was saved
			delete(r.hosts, h.key)
			h.evicted = true
			dropped = true
		}
		h.mu.Unlock()
	}
	if dropped {
		r.gen++
	}
	return encErr
}

// saveStates saves batch through the store; an empty batch is no call.
func (r *Registry) saveStates(batch map[string][]byte) error {
	if len(batch) == 0 {
		return nil
	}
	return r.store.SaveHostStates(batch)
}

// Flush saves every in-memory host's learned state (controller state, pause, ceiling) through
// the store, stamped with Config.Now.
func (r *Registry) Flush() error {
	r.saveMu.Lock()
	defer r.saveMu.Unlock()
	now := r.cfg.Now()
	batch := make(map[string][]byte)
	var encErr error // a host whose state cannot be encoded is skipped; the others are saved
	for _, h := range r.snapshot() {
		h.mu.Lock()
		if !h.evicted {
			if b, err := h.stateLocked(now); err != nil {
				encErr = cmp.Or(encErr, fmt.Errorf("hostlimit: encode %s: %w", h.key, err))
			} else if b != nil {
				batch[h.key] = b
			}
		}
		h.mu.Unlock()
	}
	if len(batch) == 0 {
		return encErr
	}
	if err := r.store.SaveHostStates(batch); err != nil {
		return fmt.Errorf("hostlimit: flush: %w", err)
	}
	return encErr
}
