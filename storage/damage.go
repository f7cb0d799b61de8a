package storage

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"go.etcd.io/bbolt"
)

// View is bbolt's DB.View on the store, with a page bbolt cannot read returned as ErrDamaged
// rather than a panic. The frontier runs its transactions through it too.
func (db *DB) View(fn func(*bbolt.Tx) error) (err error) {
	defer db.damaged(&err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	return db.bolt.View(fn)
}

// Update is bbolt's DB.Update on the store, with damage returned as ErrDamaged (see View).
func (db *DB) Update(fn func(*bbolt.Tx) error) (err error) {
	defer db.damaged(&err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	return db.bolt.Update(fn)
}

// damaged turns a panic raised inside bbolt into ErrDamaged in *err; any other panic goes on.
// It must be deferred directly. A fault reading the mapped file is such a panic too: each
// transaction sets debug.SetPanicOnFault for its goroutine.
func (db *DB) damaged(err *error) {
	r := recover()
	if r == nil {
		return
	}
	if !fromBolt() {
		panic(r)
	}
	*err = db.damage(r)
}

func (db *DB) damage(r any) error {
	return damageError(db.path, r)
}

// damageError is ErrDamaged for the store file path, with what bbolt said.
func damageError(path string, r any) error {
	return fmt.Errorf("storage: %s: %w (%v)", path, ErrDamaged, r)
}

// fromBolt reports whether the panic being recovered was raised in bbolt's code (an assertion
// on a page, an index out of range, a fault in the mapped file). It is called from the
// deferred function that recovered it, while the panicking frames are still on the stack.
func fromBolt() bool {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	panicking := false
	for {
		f, more := frames.Next()
		switch {
		case f.Function == "runtime.gopanic":
			panicking = true
		case panicking && !strings.HasPrefix(f.Function, "runtime."):
			return strings.HasPrefix(f.Function, "go.etcd.io/bbolt")
		}
		if !more {
			return false
		}
	}
}
