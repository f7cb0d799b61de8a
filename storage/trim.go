package storage

import "go.etcd.io/bbolt"

// TrimRSS gives back the store's file pages that bbolt's read-only memory map has pulled into
// this process, so that the resident set does not grow to the size of the file as a crawl
// touches it: on Linux it applies madvise(MADV_DONTNEED) to the mapping. The data stays in the
// kernel's page cache and is faulted back in when read again, so this costs little; elsewhere
// it does nothing. It runs inside a read transaction, which keeps bbolt from remapping the file
// meanwhile. The frontier calls it every so often; callers that scan the store may too.
func (db *DB) TrimRSS() error {
	return db.bolt.View(trimTx)
}

// trimTx drops the mapped pages of tx's database. The caller's open transaction pins the
// mapping (bbolt remaps only under a lock that every transaction holds shared).
func trimTx(tx *bbolt.Tx) error {
	return dropMapped(tx.DB().Info().Data, tx.Size())
}
