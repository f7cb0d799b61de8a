package fleet

import "errors"

var (
	// ErrFenced is returned by a write whose ownership is no longer the partition's current
	// one: the lease expired or another worker acquired the partition since. The worker must
	// stop using that Ownership.
	ErrFenced = errors.New("fleet: partition ownership lost (fenced)")

	// ErrNotInFlight is returned by Complete for a URL that is not in flight in its partition:
	// it was completed already or returned to its queue by a new owner.
	ErrNotInFlight = errors.New("fleet: URL not in flight")

	// ErrCrawlName is returned by Open for a crawl name that cannot be used in keys.
	ErrCrawlName = errors.New("fleet: invalid crawl name")

	// ErrConfigMismatch is returned by Open (and OpenExisting, ReadView) when the crawl
	// already exists in Redis with a different number of partitions, or was stored by a
	// version of crawl that laid it out otherwise.
	ErrConfigMismatch = errors.New("fleet: crawl exists with another configuration")

	// ErrWrongPartition is returned when a host given to a write does not belong to the
	// Ownership's partition.
	ErrWrongPartition = errors.New("fleet: host not in the ownership's partition")

	// ErrServerTooOld is returned by Open when a Redis node the crawl lives on is older than
	// 6.2, whose commands the scripts use (SMISMEMBER, ZMSCORE, LPOP with a count).
	ErrServerTooOld = errors.New("the shared crawl needs Redis 6.2 or later")

	// ErrNoCrawl is returned by ReadView when Redis holds no crawl of that name.
	ErrNoCrawl = errors.New("fleet: no such crawl")
)
