package crawler

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/crawl-project/crawl/hostlimit"
	"github.com/crawl-project/crawl/storage"
)

// learnedStates is the host state store of a crawl started from another's learned politeness
// (Config.LearnedFrom): a host the crawl's own store has no state for is restored from the
// other's. Saves go to the own store only.
type learnedStates struct {
	own     hostlimit.StateStore
	learned *storage.DB // read-only
}

// LoadHostState returns the own store's state for host, else the learned store's.
func (s learnedStates) LoadHostState(host string) ([]byte, bool, error) {
	if b, ok, err := s.own.LoadHostState(host); ok || err != nil {
		return b, ok, err
	}
	return s.learned.LoadHostState(host)
}

// SaveHostStates saves to the own store.
func (s learnedStates) SaveHostStates(states map[string][]byte) error {
	return s.own.SaveHostStates(states)
}

// openLearned opens the store in dir read-only for Config.LearnedFrom; own is the crawl's own
// data directory, which it must not be.
func openLearned(dir, own string) (*storage.DB, error) {
	a, aerr := filepath.Abs(dir)
	b, berr := filepath.Abs(own)
	if aerr == nil && berr == nil && a == b {
		return nil, fmt.Errorf("--learned-from %s: that is this crawl's own --data directory: %w", dir, ErrUsage)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("--learned-from %s: want the data directory of another crawl: %w", dir, ErrUsage)
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
