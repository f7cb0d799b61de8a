package frontier

import (
	"errors"

	"github.com/crawl-project/crawl/storage"
)

var (
	// ErrNotLeased is returned by Complete when the lease is not held: it was already completed
	// or released, or it comes from another Frontier.
	ErrNotLeased = errors.New("frontier: URL is not leased")

	// ErrInvalid is returned when an Entry, Exclusion or Result is malformed: empty URL or
	// host, a host containing a NUL byte, an unknown Kind, a missing reason. Nothing is written.
	ErrInvalid = errors.New("frontier: invalid argument")

	// ErrCorrupt is returned when the records on disk contradict each other (a queue entry
	// without its URL record, counters that do not add up); Check reports what it found. It is
	// damage: errors.Is(ErrCorrupt, storage.ErrDamaged) holds.
	ErrCorrupt error = corrupt{}

	// ErrOldFormat is returned by Open on a read-only store that still holds records of
	// formats 1 and 2: only a writable Open upgrades them.
	ErrOldFormat = errors.New("frontier: store is in an older format; open it for writing once (crawl run) to upgrade it")
)

// corrupt is ErrCorrupt: store damage of the frontier's own kind.
type corrupt struct{}

func (corrupt) Error() string { return "frontier: store is inconsistent" }
func (corrupt) Unwrap() error { return storage.ErrDamaged }
