package crawler

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/crawl-project/crawl/hostlimit"
	"github.com/crawl-project/crawl/internal/learnedfile"
	"github.com/crawl-project/crawl/storage"
)

// learnedStates is the host state store of a crawl started from another's learned politeness
// (Config.LearnedFrom): a hostlimit.HintStore whose hints are the other's states, so that a
// host the crawl's own store has no state for starts from the other's rate and window, clamped,
// and from nothing else of it (hostlimit.HintStore). Saves go to the own store only.
type learnedStates struct {
	own     hostlimit.StateStore
	learned learnedSource
}

// learnedSource is where Config.LearnedFrom's states are read: another crawl's store (read-only)
// or a file written by crawl export --format learned.
type learnedSource interface {
	LoadHostState(host string) ([]byte, bool, error)
	Close() error
}

// learnedFile is the states of a learned-politeness file, by host key.
type learnedFile map[string][]byte

func (f learnedFile) LoadHostState(host string) ([]byte, bool, error) {
	b, ok := f[host]
	return b, ok, nil
}

func (learnedFile) Close() error { return nil }

// LoadHostState returns the own store's state for host.
func (s learnedStates) LoadHostState(host string) ([]byte, bool, error) {
	return s.own.LoadHostState(host)
}

// LoadHostHint returns the learned store's state for host.
func (s learnedStates) LoadHostHint(host string) ([]byte, bool, error) {
	return s.learned.LoadHostState(host)
}

// SaveHostStates saves to the own store.
func (s learnedStates) SaveHostStates(states map[string][]byte) error {
	return s.own.SaveHostStates(states)
}

// openLearned opens what Config.LearnedFrom names: another crawl's data directory (its store
// read-only; own is the crawl's own data directory, which it must not be) or a file written by
// crawl export --format learned.
func openLearned(dir, own string) (learnedSource, error) {
	a, aerr := filepath.Abs(dir)
	b, berr := filepath.Abs(own)
	if aerr == nil && berr == nil && a == b {
		return nil, fmt.Errorf("--learned-from %s: that is this crawl's own --data directory: %w", dir, ErrUsage)
	}
	if fi, err := os.Stat(dir); err == nil && fi.Mode().IsRegular() {
		states, err := learnedfile.Read(dir)
		if err != nil {
			return nil, fmt.Errorf("--learned-from %v: %w", err, ErrUsage)
		}
		return learnedFile(states), nil
	} else if err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("--learned-from %s: want the data directory of another crawl, or a file of crawl export --format learned: %w", dir, ErrUsage)
	}
	db, err := storage.Open(dir, &storage.Options{ReadOnly: true, Timeout: 200 * time.Millisecond})
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("--learned-from %s: no crawl store there (%s): %w", dir, storage.FileName, ErrUsage)
	case errors.Is(err, storage.ErrLocked):
		return nil, fmt.Errorf("--learned-from %s: its crawl is running; start from it once it has stopped: %w", dir, err)
	case err != nil:
		return nil, fmt.Errorf("--learned-from %s: %w", dir, err)
	}
	return db, nil
}
