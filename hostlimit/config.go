package hostlimit

import (
	"sync"
	"time"

	"github.com/crawl-project/crawl/aimd"
)

// Defaults for the zero fields of Config.
const (
	DefaultMaxPause  = 10 * time.Minute
	DefaultIdleEvict = 2 * time.Minute
)

// Config is the registry's policy, plain data. Zero fields take the defaults above.
type Config struct {
	// AIMD configures each host's controller. AIMD.MaxWindow, when positive, also caps the
	// window here.
	AIMD aimd.Config

	// MaxWindowOf caps the window of particular hosts, by key, below AIMD.MaxWindow (a value
	// of 0, or above AIMD.MaxWindow, changes nothing). It is read whenever a host's gate is
	// made: at its first use, and again after Evict dropped it.
	MaxWindowOf map[string]int

	// MaxPause: Wait returns a *PausedError at once, instead of blocking, when a host is paused
	// for longer than this from now. Zero or negative means DefaultMaxPause.
	MaxPause time.Duration

	// IdleEvict: Evict saves and drops hosts with nothing in flight that have not been used for
	// this long. Zero or negative means DefaultIdleEvict.
	IdleEvict time.Duration

	// DemandByCaller makes a host's rate grow only while it held back work the caller had
	// ready with a worker free for it (aimd.Outcome.Demand): a request TryAdmit admits counts
	// as held back only if Starved was called for its host since the host's previous
	// admission, and as having had room to spare otherwise. Unset, TryAdmit leaves the
	// judgement to the controller's spacing rule (aimd.DemandUnknown). Wait always knows: its
	// request was held back if it waited for a token.
	DemandByCaller bool

	// Now and After are Wait's clock and timer; nil means time.Now and time.After. They are
	// useful for tests that must not sleep. Methods that take a now use it instead of Now.
	Now   func() time.Time
	After func(d time.Duration) <-chan time.Time
}

// StateStore persists each host's learned state as opaque bytes. storage.DB implements it.
// It must be safe for concurrent use.
type StateStore interface {
	// LoadHostState returns the bytes last saved for host; ok is false when there are none.
	LoadHostState(host string) (b []byte, ok bool, err error)
	// SaveHostStates stores each host's bytes, all or nothing.
	SaveHostStates(states map[string][]byte) error
}

// HintStore is a StateStore that also holds hints: states learned by another crawl (its store,
// or a file of them) for hosts this store has none of. A hint is loaded only for a host
// LoadHostState has nothing for, and gives it a starting rate and window only (aimd.Hint):
// never a pause, a Crawl-delay ceiling or the rest of a controller's state. A host started
// from a hint is not saved until it has had an outcome of its own, so nothing of the hint
// reaches the store unless the crawl's own observations carried it.
type HintStore interface {
	StateStore
	// LoadHostHint returns the hint for host; ok is false when there is none.
	LoadHostHint(host string) (b []byte, ok bool, err error)
}

// memStore is the StateStore used when New is given nil: evicted hosts' states stay in memory
// (a few hundred bytes each) so eviction never loses a running pause.
type memStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memStore) LoadHostState(host string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[host]
	return b, ok, nil
}

func (s *memStore) SaveHostStates(states map[string][]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range states {
		s.m[k] = v
	}
	return nil
}
