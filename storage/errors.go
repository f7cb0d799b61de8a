package storage

import "errors"

var (
	// ErrLocked is returned by Open when another process (or another DB in this process) holds
	// the store's file lock and the lock was not released within Options.Timeout.
	ErrLocked = errors.New("store is in use by another crawl")

	// ErrNotStore is returned by Open when the file exists but is not a crawl store: not a bbolt
	// file at all, a bbolt file written by something else, or a store of an unsupported format
	// version.
	ErrNotStore = errors.New("not a crawl store")

	// ErrDamaged is returned (wrapped, with the store file's name and bbolt's complaint) when
	// bbolt meets a page of the file it cannot read: bytes changed on disk or by a bad copy.
	// bbolt panics on such a page; every transaction of DB (View, Update, Batch) recovers the
	// panic and returns this instead. crawl check lists the damage, crawl salvage copies what
	// is readable into a new store.
	ErrDamaged = errors.New("store is damaged")

	// ErrNotFound is returned when a requested record (a page by sequence number) does not exist.
	ErrNotFound = errors.New("not found")
)
