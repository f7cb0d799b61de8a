package storage

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/bbolt"
)

// Batch runs fn in a transaction shared with other Batch calls made within the bolt DB's
// MaxBatchDelay (up to its MaxBatchSize), as bbolt's DB.Batch does, with damage returned as
// ErrDamaged (see View). As with bbolt, fn may run more than once and must be idempotent; a
// function that fails or panics is taken out of the batch and run again alone.
//
// Unlike bbolt's, the shared transaction is committed by the goroutine of the batch's first
// caller, never by a timer goroutine: a damaged page met while committing becomes ErrDamaged
// for every caller rather than a panic no caller can recover.
func (db *DB) Batch(fn func(*bbolt.Tx) error) error {
	c := batchCall{fn: fn, done: make(chan error, 1)}
	g, leader := db.batch.join(c, db.bolt.MaxBatchSize)
	if leader {
		if g.wait(db.bolt.MaxBatchDelay) {
			db.batch.close(g)
		}
		db.commitBatch(g.calls)
	}
	err := <-c.done
	if errors.Is(err, errRunAlone) {
		return db.Update(fn)
	}
	return err
}

// errRunAlone tells a Batch caller that its function failed in the shared transaction and must
// be run again in one of its own, whose outcome is the caller's.
var errRunAlone = errors.New("storage: batch function failed; run it alone")

// batchCall is one Batch call waiting for its outcome on done.
type batchCall struct {
	fn   func(*bbolt.Tx) error
	done chan error // buffered: the committer never blocks
}

// batcher gathers Batch calls into groups; the caller that opens a group commits it.
type batcher struct {
	mu   sync.Mutex
	open *batchGroup // the group new calls join, or nil (guarded by mu)
}

// batchGroup is the calls of one shared transaction. calls is complete once the group is
// closed (no longer batcher.open).
type batchGroup struct {
	calls []batchCall
	full  chan struct{} // closed when the group reached its size and was closed
}

// join adds c to the open group (opening one if there is none) and reports whether c opened
// it. A group that reaches max calls is closed at once.
func (b *batcher) join(c batchCall, max int) (g *batchGroup, leader bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open == nil {
		b.open, leader = &batchGroup{full: make(chan struct{})}, true
	}
	g = b.open
	g.calls = append(g.calls, c)
	if len(g.calls) >= max {
		b.open = nil
		close(g.full)
	}
	return g, leader
}

// wait blocks until g is full or delay has passed, and reports whether g may still be open.
func (g *batchGroup) wait(delay time.Duration) (open bool) {
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-g.full:
		return false
	case <-t.C:
		return true
	}
}

// close stops g taking calls, if it still does.
func (b *batcher) close(g *batchGroup) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open == g {
		b.open = nil
	}
}

// commitBatch runs calls in one transaction and hands each its outcome. A function that fails
// is given errRunAlone and the others are run again without it.
func (db *DB) commitBatch(calls []batchCall) {
	for len(calls) > 0 {
		failed := -1
		err := db.Update(func(tx *bbolt.Tx) error {
			for i, c := range calls {
				if err := callSafely(c.fn, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed < 0 {
			for _, c := range calls {
				c.done <- err
			}
			return
		}
		calls[failed].done <- errRunAlone
		calls = append(calls[:failed:failed], calls[failed+1:]...)
	}
}

// callSafely runs fn, turning a panic into an error so that one caller's function cannot take
// down the goroutine committing everyone's.
func callSafely(fn func(*bbolt.Tx) error, tx *bbolt.Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("storage: batch function panicked: %v", r)
		}
	}()
	return fn(tx)
}
