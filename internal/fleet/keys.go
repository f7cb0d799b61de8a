package fleet

import (
	"fmt"
	"strconv"

	"github.com/cespare/xxhash/v2"
)

// PartitionOf returns the partition (0 ≤ p < n) that owns host key host. Every worker of a
// crawl computes the same answer: the hash is xxhash64, not a per-process seed.
func PartitionOf(host string, n int) int {
	return int(xxhash.Sum64String(host) % uint64(n))
}

// Fingerprint is the exact 64-bit seen-set fingerprint of a normalized URL. Two URLs with the
// same fingerprint are taken for one (probability about n/2^64 per new URL with n seen).
func Fingerprint(url string) uint64 { return xxhash.Sum64String(url) }

// keys names the Redis keys of one crawl. Every key of partition p carries the hash tag {p},
// so each script touches one Redis Cluster slot.
type keys struct {
	crawl string // crawl name, validated by validName
}

func (k keys) config() string { return "crawl:" + k.crawl + ":config" }

// active is the set of partitions that may have work (Store.markActive): one key of its own.
func (k keys) active() string { return "crawl:" + k.crawl + ":active" }

// workers is the crawl's heartbeat set: each worker scored by the end of its lease (one key
// of its own, outside any partition).
func (k keys) workers() string { return "crawl:" + k.crawl + ":workers" }

// released counts the partitions handed back (Store.Release), a hint for the workers below
// their fair share (one key of its own).
func (k keys) released() string { return "crawl:" + k.crawl + ":released" }

func (k keys) part(p int, name string) string {
	return "crawl:" + k.crawl + ":{" + strconv.Itoa(p) + "}:" + name
}

func (k keys) owner(p int) string    { return k.part(p, "owner") }
func (k keys) epoch(p int) string    { return k.part(p, "epoch") }
func (k keys) inflight(p int) string { return k.part(p, "inflight") }
func (k keys) hosts(p int) string    { return k.part(p, "hosts") }
func (k keys) counts(p int) string   { return k.part(p, "counts") }
func (k keys) outbox(p int) string   { return k.part(p, "outbox") }
func (k keys) used(p int) string     { return k.part(p, "used") }

func (k keys) queue(p int, host string) string   { return k.part(p, "q:"+host) }
func (k keys) delayed(p int, host string) string { return k.part(p, "d:"+host) }
func (k keys) state(p int, host string) string   { return k.part(p, "h:"+host) }
func (k keys) robots(p int, host string) string  { return k.part(p, "r:"+host) }

// seenLog is partition p's seen-set: a list whose elements are the 8-byte little-endian
// fingerprints, packed, of the URLs each of its owner's scripts recorded in p (one element a
// script). The owner checks URLs against its copy in memory (seenSet).
func (k keys) seenLog(p int) string { return k.part(p, "sl") }

// inbox is partition p's inbox: payloads of URLs for p sent by workers that do not own it, which
// its owner checks against its seen-set and records (Store.Drain).
func (k keys) inbox(p int) string { return k.part(p, "in") }

// validName reports whether a crawl name may be used in keys: 1 to 64 of [A-Za-z0-9._-].
func validName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("%w: %q must be 1 to 64 characters", ErrCrawlName, name)
	}
	for _, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("%w: %q has %q (allowed: letters, digits, '.', '_', '-')", ErrCrawlName, name, c)
		}
	}
	return nil
}

// shared names a crawl-wide setting every worker reads (Store.Union, Store.Settle): one key of
// its own, outside any partition.
func (k keys) shared(name string) string { return "crawl:" + k.crawl + ":shared:" + name }
