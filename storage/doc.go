// Package storage owns the crawl store: one bbolt file, DIR/crawl.db, holding the fetched pages
// (metadata as JSON, it, the bodies and rendered pages' DOMs compressed with zstd), the host
// limiter's learned state, the robots.txt cache, every robots.txt response as received (for
// export; kept apart from the pages, which hold exactly the fetched URLs, see PutRobotsFetch)
// and small crawl metadata. The frontier keeps its queues in the same file (see DB.Bolt) so
// that storing a page and marking its URL done is one transaction (see PutPage).
//
// A store is marked with a format record when it is created; Open refuses any other file with
// ErrNotStore, and so a store file shorter than its own meta page says (a copy cut short): bbolt
// would read the missing pages through its memory map and fault, killing the process. That
// check reads bbolt's meta page by hand (filecheck.go), as bbolt offers no way to ask before it
// maps the file. bbolt holds an exclusive lock on the file while a crawl has it open for writing,
// so a second writer, or a reader while a writer runs, gets ErrLocked after Options.Timeout
// instead of hanging.
//
// Open walks the file's page graph (pagewalk.go) before bbolt reads it, unless the file is
// sealed (seal.go): closed cleanly by a writer and unchanged since, byte for byte.
//
// bbolt reads the file through a memory map, so the pages a process touches count in its
// resident set (as file-backed memory) until the kernel reclaims them; TrimRSS gives them back
// early: a store open for writing calls it at least every trimEvery, and sooner once the
// process's resident file pages grew by trimGrowth (on Linux), and Pages as it scans, so
// memory stays bounded on big stores.
//
// A DB is safe for concurrent use by multiple goroutines; so is PutPage within the rules of the
// caller's transaction.
package storage
