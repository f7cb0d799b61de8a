// Package frontier keeps the crawl's to-do list: per-host FIFO queues of URLs and the seen-set
// that gives every URL ever learned exactly one state, queued → fetched | failed | excluded, in
// storage's bbolt file. Revise may put a URL back in the queue: a failed or excluded one to try
// again, a fetched one to revisit (its stored page kept, named by the Lease).
//
// The contract is crash safety. A URL handed out by Lease is leased in memory only: it stays in
// the on-disk queue until the one write transaction of Complete, which stores the page, marks the
// URL done and enqueues its new links together (or marks it failed or excluded, or moves it to
// the delayed set for a retry). A process killed at any instant therefore loses nothing; at most
// the URLs leased at the time are fetched again after a restart. Counters (total, per host, per
// reason) are updated in the same transactions, so `crawl status` reads them without a scan.
//
// Memory stays bounded whatever the size of the queue: the seen-set and the queues live on disk;
// in memory there are the per-host counters and the leases, O(hosts + leases), and the 8-byte
// fingerprint of each seen URL with the place of its record, up to Options.SeenInMemory of them
// (about 13 bytes per URL in all), which answers most seen-set checks without reading the store:
// a fingerprint joins it only once the transaction that wrote its URL committed
// (docs/frontier.md). A fingerprint is
// SipHash-2-4 of the URL under a random key kept in the store, and is the key of the URL's
// record on disk. Two URLs with the same fingerprint are taken for one: the second is never
// queued (probability n/2^64 per new URL with n URLs seen).
//
// The store is in format 3 (docs/frontier.md): records named by fingerprint, hosts named by
// ID, a queue per host. A new URL's record is appended (frontier/records, keyed by a sequence
// number the seen-set keeps beside its fingerprint), so that a commit's new links fill a leaf
// or two rather than one each; older records, and those past the seen-set's bound, are keyed
// by fingerprint (frontier/urls). records.go gives the key layout. Open upgrades a store of
// formats 1 and 2 once (upgrade.go); a format 3 store without frontier/records needs none.
//
// Concurrent Complete calls are coalesced into one commit (one fsync) by bbolt's DB.Batch.
//
// The queues are written by hand on bbolt rather than taken from a queue library because the
// page, the URL's state and its links must commit in one transaction of the store's own file.
package frontier
