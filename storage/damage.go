package storage

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"go.etcd.io/bbolt"
)

// View is bbolt's DB.View on the store, with a page bbolt cannot read returned as ErrDamaged
// rather than a panic. The frontier runs its transactions through it too.
func (db *DB) View(fn func(*bbolt.Tx) error) (err error) {
	if db.broken != nil {
		return db.broken
	}
	defer db.noteDamage(&err)
	defer db.damaged(&err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	return db.bolt.View(fn)
}

// Update is bbolt's DB.Update on the store, with damage returned as ErrDamaged (see View).
func (db *DB) Update(fn func(*bbolt.Tx) error) (err error) {
	if db.broken != nil {
		return db.broken
	}
	defer db.noteDamage(&err)
	defer db.damaged(&err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	return db.bolt.Update(fn)
}

// damaged turns a panic that damage explains into ErrDamaged in *err; any other panic goes
// on. It must be deferred directly. Damage explains a fault reading the mapped file (each
// transaction sets debug.SetPanicOnFault for its goroutine, so a fault is a panic), a panic
// raised in bbolt's code (an assertion on a page), and an index or slice out of range in the
// transaction's own code (a decoder trusting a length the file gave); the message names where.
func (db *DB) damaged(err *error) {
	r := recover()
	if r == nil {
		return
	}
	site := panicSite()
	if !fault(r) && !strings.HasPrefix(site, "go.etcd.io/bbolt") && !outOfRange(r) {
		panic(r)
	}
	*err = db.damage(fmt.Sprintf("%v, in %s", r, site))
}

// noteDamage records that *err is damage (ErrDamaged, whoever found it), so that Close does
// not seal the store.
func (db *DB) noteDamage(err *error) {
	if errors.Is(*err, ErrDamaged) {
		db.damageMet.Store(true)
	}
}

// outOfRange reports whether r is the runtime's panic for an index or slice out of range.
func outOfRange(r any) bool {
	e, ok := r.(runtime.Error)
	return ok && strings.Contains(e.Error(), "out of range")
}

// Damage returns ErrDamaged for the store, naming its file, with what was found: for a reader
// of the store's records (the frontier) that finds one it cannot decode. A store that met
// damage is not sealed when it is closed.
func (db *DB) Damage(what string) error {
	return db.damage(what)
}

// damage is ErrDamaged naming the store's file, with r; the store is not sealed at Close.
func (db *DB) damage(r any) error {
	db.damageMet.Store(true)
	return damageError(db.path, r)
}

// damageError is ErrDamaged for the store file path, with what bbolt said.
func damageError(path string, r any) error {
	return fmt.Errorf("storage: %s: %w (%v)", path, ErrDamaged, r)
}

// fault reports whether r is the panic of a memory fault at an address (what
// debug.SetPanicOnFault makes of a read of the mapped file past its end, or of a page the
// disk cannot give): only pointer arithmetic can make one, and only bbolt's reaches the file.
func fault(r any) bool {
	_, ok := r.(interface{ Addr() uintptr })
	return ok
}

// panicSite names the function that raised the panic being recovered: its first frame outside
// the runtime and the standard library (bytes.Compare, sort.Search… inlined into bbolt's
// cursor count as bbolt's). It is called from the deferred function that recovered it (one
// call deeper), while the panicking frames are still on the stack.
func panicSite() string {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	panicking := false
	for {
		f, more := frames.Next()
		switch {
		case f.Function == "runtime.gopanic":
			panicking = true
		case panicking && !stdlib(f.Function):
			return f.Function
		}
		if !more {
			return "?"
		}
	}
}

// stdlib reports whether the function named fn (package path, dot, name) is in the standard
// library, whose package paths have no dot in their first element.
func stdlib(fn string) bool {
	if first, _, ok := strings.Cut(fn, "/"); ok {
		return !strings.Contains(first, ".")
	}
	pkg, _, _ := strings.Cut(fn, ".")
	return pkg != "main"
}
