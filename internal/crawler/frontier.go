package crawler

import (
	"time"

	"github.com/crawl-project/crawl/frontier"
)

// Frontier is what the loop needs from a URL frontier: *frontier.Frontier (bbolt, one process)
// implements it, and a shared backend for multi-machine crawls can implement it later without
// the loop changing. Implementations must be safe for concurrent use, and Complete must commit
// a page, its URL's new state and its links atomically.
type Frontier interface {
	Add(entries []frontier.Entry) (added int, err error)
	Exclude(ex []frontier.Exclusion) error
	// TakeReady returns the hosts that became ready since the last call (the first call: all
	// ready hosts); Ready reports whether a host still has ready work.
	TakeReady(now time.Time) []string
	Ready(host string) bool
	NextAt(now time.Time) time.Time
	Lease(now time.Time, host string) (frontier.Lease, bool, error)
	Complete(l frontier.Lease, r frontier.Result) error
	Release(l frontier.Lease)
	Counts() frontier.Counts
	Hosts() []frontier.HostCount
	Idle() bool
}

var _ Frontier = (*frontier.Frontier)(nil)
