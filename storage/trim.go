package storage

import (
	"sync"
	"time"

	"go.etcd.io/bbolt"
)

// TrimRSS gives back the store's file pages that bbolt's read-only memory map has pulled into
// this process, so that the resident set does not grow to the size of the file as a crawl
// touches it: on Linux it applies madvise(MADV_DONTNEED) to the mapping. The data stays in the
// kernel's page cache and is faulted back in when read again, so this costs little; elsewhere
// it does nothing. It runs inside a read transaction, which keeps bbolt from remapping the file
// meanwhile. A store open for writing calls it every trimEvery by itself; callers that scan the
// store may call it as they go.
func (db *DB) TrimRSS() error {
	return db.View(trimTx)
}

// trimTx drops the mapped pages of tx's database. The caller's open transaction pins the
// mapping (bbolt remaps only under a lock that every transaction holds shared).
func trimTx(tx *bbolt.Tx) error {
	return dropMapped(tx.DB().Info().Data, tx.Size())
}

// trimEvery is the longest a store open for writing goes without calling TrimRSS. Each page a
// transaction reads maps its neighbours too (the kernel's fault-around, whole large folios on
// recent kernels), so a busy store pulls in hundreds of MB a second; trimming this often keeps
// the file's share of the resident set to tens of MB, at the cost of faulting the hot pages
// back in.
const trimEvery = 100 * time.Millisecond

// trimCheck is how often the trimmer reads the process's resident file pages, and trimGrowth
// how much they may grow since the last trim before it trims early: with a big store and
// random writes, 100 ms maps too much.
const (
	trimCheck  = 10 * time.Millisecond
	trimGrowth = 32 << 20
)

// trimDue reports whether a trim is due at now, the last one at last having left resident
// bytes of file pages mapped, now that resident bytes are (resident < 0: not known).
func trimDue(now, last time.Time, leftResident, resident int64) bool {
	return now.Sub(last) >= trimEvery || resident >= 0 && resident-leftResident >= trimGrowth
}

// trimmer calls TrimRSS when trimDue says so, until stopped. The zero value is stopped.
type trimmer struct {
	quit chan struct{}
	wg   sync.WaitGroup
}

func (t *trimmer) start(db *DB) {
	quit := make(chan struct{})
	t.quit = quit
	t.wg.Go(func() {
		res := openResident()
		defer res.close()
		tick := time.NewTicker(trimCheck)
		defer tick.Stop()
		last, left := time.Now(), res.read()
		for {
			select {
			case <-quit:
				return
			case now := <-tick.C:
				if !trimDue(now, last, left, res.read()) {
					continue
				}
				_ = db.TrimRSS() // best effort: only memory is at stake
				last, left = time.Now(), res.read()
			}
		}
	})
}

// stop ends the timer and waits for a trim in progress; it may be called more than once.
func (t *trimmer) stop() {
	if t.quit != nil {
		close(t.quit)
		t.quit = nil
	}
	t.wg.Wait()
}
