package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// FileName is the name of the store file inside the crawl directory.
const FileName = "crawl.db"

// DefaultTimeout is how long Open waits for the file lock when Options.Timeout is zero.
const DefaultTimeout = 100 * time.Millisecond

// The format marker: bucket formatBucket holds formatKey = formatValue, written when the store
// is created. Any other value means a store this code cannot read.
var (
	formatBucket = []byte("crawl")
	formatKey    = []byte("format")
	formatValue  = []byte("crawl-store/1")
)

// Buckets owned by storage. The frontier creates its own buckets in the same file.
var (
	bucketPages  = []byte("pages")  // seq (8 bytes big-endian) -> page metadata (JSON, zstd-compressed; plain in older stores)
	bucketBodies = []byte("bodies") // seq -> zstd-compressed body
	// seq -> zstd-compressed rendered DOM, for the pages whose metadata has "render"; absent
	// from stores created before pages were rendered, until they are next opened for writing.
	bucketRendered  = []byte("rendered")
	bucketHostState = []byte("hoststate") // host -> opaque bytes (hostlimit's encoding)
	bucketRobots    = []byte("robots")    // host -> RobotsEntry (JSON)
	bucketMeta      = []byte("meta")      // key -> bytes
	// seq (8 bytes big-endian, the bucket's own sequence) -> robots.txt response (JSON, body
	// inline); absent from stores created before it, until they are next opened for writing.
	bucketRobotsFetches = []byte("robotsfetches")
)

var storageBuckets = [][]byte{bucketPages, bucketBodies, bucketHostState, bucketRobots, bucketMeta, bucketRobotsFetches,
	bucketRendered}

// Options configure Open. A nil *Options means the zero value: read-write, synced, 100ms lock
// timeout.
type Options struct {
	// Timeout is how long Open waits for the file lock held by another crawl before it fails
	// with ErrLocked. Zero (or negative) means DefaultTimeout; Open never waits forever.
	Timeout time.Duration

	// ReadOnly opens an existing store with a shared lock (several readers may share it; a
	// writer excludes them). The store is not created if missing.
	ReadOnly bool

	// NoSync skips fsync after each commit. A process crash still loses nothing, a power
	// failure may. For tests and benchmarks only.
	NoSync bool

	// Damaged opens, read-only, a store whose pages Open finds damaged, for Check and Salvage
	// (which read the file without trusting its page graph); every transaction on it (View,
	// Update, Batch and what uses them) then returns ErrDamaged. A store without damage opens
	// as usual, read-only.
	Damaged bool
}

// DB is an open crawl store. It is safe for concurrent use by multiple goroutines.
type DB struct {
	bolt     *bbolt.DB
	path     string
	readOnly bool
	trim     trimmer // gives back mapped pages while the store is open for writing
	broken   error   // Options.Damaged and the walk at Open found damage: every transaction returns it
	format   []byte  // the format marker as the walk at Open read it
	opened   openKind
	batch    batcher // Batch's groups
	// damageMet: a transaction or a reader of the store's records met damage (ErrDamaged), so
	// Close writes no seal.
	damageMet atomic.Bool
	closed    atomic.Bool
}

// openKind is how Open judged the file before bbolt read it.
type openKind int

const (
	openNew    openKind = iota // a new, empty file: nothing to judge
	openWalked                 // the page walk read it (walkOpen)
	openSealed                 // its seal describes it (seal.go): not walked
	openNoMeta                 // no valid meta page: left to bbolt's Open to judge
)

// Open opens the store DIR/crawl.db, creating the directory and the file if missing (unless
// opts.ReadOnly). It returns an error wrapping ErrLocked if another crawl holds the file,
// ErrNotStore if the file is not a crawl store, or an error wrapping fs.ErrNotExist if
// opts.ReadOnly and there is no store.
func Open(dir string, opts *Options) (*DB, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Damaged {
		o.ReadOnly = true
	}
	path := filepath.Join(dir, FileName)
	if o.ReadOnly {
		fi, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("storage: open %s: %w", path, err)
		}
		if fi.Size() == 0 {
			return nil, fmt.Errorf("storage: open %s: %w (empty file)", path, ErrNotStore)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("storage: create %s: %w", dir, err)
	}
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		what := "not a regular file"
		if fi.IsDir() {
			what = "a directory"
		}
		return nil, fmt.Errorf("storage: open %s: %w (%s)", path, ErrNotStore, what)
	}

	if !o.ReadOnly {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			if err := create(path, o); err != nil {
				return nil, fmt.Errorf("storage: create %s: %w", path, err)
			}
		}
	}
	if err := checkLength(path); err != nil && !o.Damaged {
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	db, err := openChecked(dir, path, o)
	if err != nil {
		return nil, err
	}
	if err := db.checkFormat(); err != nil {
		_ = db.bolt.Close()
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	if !o.ReadOnly {
		db.trim.start(db)
		// Best effort: the PID only names the holder in another process's ErrLocked.
		_ = os.WriteFile(filepath.Join(dir, PIDFileName), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
	}
	return db, nil
}

// openChecked opens the bbolt file at path after walking its pages (walkOpen) under a shared
// lock, so that no reader or writer of the store ever meets a page graph that could crash,
// loop or exhaust memory: a store the walk finds damaged is refused with ErrDamaged, unless
// o.Damaged, which opens it read-only with every transaction refused (see Options.Damaged).
// A sealed file (seal.go) is not walked, but for o.Damaged; opening it for writing removes
// its seal.
func openChecked(dir, path string, o Options) (*DB, error) {
	ro := bbolt.Options{Timeout: o.Timeout, ReadOnly: true, FreelistType: bbolt.FreelistMapType}
	rw := bbolt.Options{Timeout: o.Timeout, NoSync: o.NoSync, FreelistType: bbolt.FreelistMapType}
	db := &DB{path: path, readOnly: o.ReadOnly}
	if fi, err := os.Stat(path); err == nil && fi.Size() == 0 {
		// A new file bbolt initializes: nothing to walk.
		b, err := openBolt(path, &rw)
		if err != nil {
			return nil, openError(dir, path, o, err)
		}
		db.bolt = b
		return db, nil
	}
	b, err := openBolt(path, &ro)
	if err != nil {
		return nil, openError(dir, path, o, err)
	}
	if !o.Damaged && sealed(path) {
		db.opened = openSealed
	} else {
		res, err := walkFile(path, walkOpen, 1, 1, nil)
		switch {
		case err != nil:
			_ = b.Close()
			return nil, fmt.Errorf("storage: open %s: %w", path, err)
		case res.total > 0 && !o.Damaged:
			_ = b.Close()
			return nil, fmt.Errorf("storage: open %s: %w (%s)", path, ErrDamaged, res.problems[0])
		case res.total > 0:
			db.broken = damageError(path, res.problems[0])
		}
		db.format, db.opened = res.format, openWalked
		if !res.found {
			db.opened = openNoMeta
		}
	}
	if o.ReadOnly {
		db.bolt = b
		return db, nil
	}
	if err := b.Close(); err != nil {
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	if db.bolt, err = openBolt(path, &rw); err != nil {
		return nil, openError(dir, path, o, err)
	}
	removeSeal(path) // written again by Close
	return db, nil
}

// openError is the error of Open for bbolt's error err opening path.
func openError(dir, path string, o Options, err error) error {
	var pathErr *fs.PathError
	var errno syscall.Errno
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return fmt.Errorf("storage: open %s: %w (%slock not acquired within %v)", path, ErrLocked, holder(dir), o.Timeout)
	case errors.Is(err, ErrNotStore), errors.Is(err, ErrDamaged):
		return fmt.Errorf("storage: open %s: %w", path, err)
	case errors.As(err, &pathErr), errors.As(err, &errno):
		return fmt.Errorf("storage: open %s: %w", path, err) // permissions, I/O, mmap limits
	default:
		// bbolt's own complaints about the content: invalid meta pages, checksum or version
		// mismatch, "file size too small"…
		return fmt.Errorf("storage: open %s: %w (%v)", path, ErrNotStore, err)
	}
}

// openBolt is bbolt.Open turning a panic on a damaged file into ErrDamaged. A fault reading
// the mapped file becomes such a panic too (debug.SetPanicOnFault), rather than killing the
// process.
func openBolt(path string, o *bbolt.Options) (b *bbolt.DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("%w (%v)", ErrDamaged, r)
		}
	}()
	return bbolt.Open(path, 0o644, o)
}

// checkFormat verifies the format marker, writing it (and storage's buckets) into a file that
// has no buckets at all: a new file, or one whose creation was interrupted before the marker
// was committed. A marker that is not this format's nor another version's is damage.
func (db *DB) checkFormat() error {
	if db.broken != nil {
		// Only Check and Salvage will read it: refuse only what is surely another format.
		if db.format != nil && !bytes.Equal(db.format, formatValue) && formatVersion(db.format) {
			return fmt.Errorf("%w (format %q, want %q)", ErrNotStore, db.format, formatValue)
		}
		return nil
	}
	var empty, ok bool
	var found []byte
	if err := db.View(func(tx *bbolt.Tx) error {
		if b := tx.Bucket(formatBucket); b != nil {
			found = bytes.Clone(b.Get(formatKey))
			ok = true
			return nil
		}
		empty = true
		return tx.ForEach(func([]byte, *bbolt.Bucket) error {
			empty = false
			return nil
		})
	}); err != nil {
		return err
	}
	switch {
	case ok && bytes.Equal(found, formatValue):
		if db.readOnly {
			return nil
		}
		return db.Update(createBuckets)
	case ok && formatVersion(found):
		return fmt.Errorf("%w (format %q, want %q)", ErrNotStore, found, formatValue)
	case ok:
		return fmt.Errorf("%w (its format marker reads %q, want %q)", ErrDamaged, found, formatValue)
	case !empty:
		return fmt.Errorf("%w (a bbolt file without the crawl format marker)", ErrNotStore)
	case db.readOnly:
		return fmt.Errorf("%w (no format marker)", ErrNotStore)
	}
	return db.Update(initStore)
}

// formatVersion reports whether v is a format marker of this family, of any version:
// "crawl-store/" and a number.
func formatVersion(v []byte) bool {
	n, ok := bytes.CutPrefix(v, []byte("crawl-store/"))
	if !ok || len(n) == 0 || len(n) > 9 {
		return false
	}
	for _, c := range n {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// initStore writes the format marker and creates every bucket of a new store.
func initStore(tx *bbolt.Tx) error {
	b, err := tx.CreateBucketIfNotExists(formatBucket)
	if err != nil {
		return err
	}
	if err := b.Put(formatKey, formatValue); err != nil {
		return err
	}
	return createBuckets(tx)
}

// tempPrefix names stores being created; create leaves none behind unless killed.
const tempPrefix = ".crawl.db.new-"

// create builds a new store under a temporary name and links it into place, so that path
// either does not exist or holds a complete store, whenever the process dies. Linking fails if
// path exists, so two crawls creating the same store at once cannot replace each other's file.
func create(path string, o Options) error {
	dir := filepath.Dir(path)
	removeStaleTemps(dir)
	f, err := os.CreateTemp(dir, tempPrefix+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	f.Close()
	defer os.Remove(tmp)
	b, err := bbolt.Open(tmp, 0o644, &bbolt.Options{Timeout: o.Timeout, NoSync: o.NoSync, FreelistType: bbolt.FreelistMapType})
	if err != nil {
		return err
	}
	err = b.Update(initStore)
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if !o.NoSync {
		if d, err := os.Open(dir); err == nil {
			_ = d.Sync() // make the new name durable
			d.Close()
		}
	}
	return nil
}

// removeStaleTemps deletes what a create killed midway left behind (older than a minute, so a
// create running right now in another process keeps its file).
func removeStaleTemps(dir string) {
	names, _ := filepath.Glob(filepath.Join(dir, tempPrefix+"*"))
	for _, n := range names {
		if fi, err := os.Stat(n); err == nil && time.Since(fi.ModTime()) > time.Minute {
			os.Remove(n)
		}
	}
}

func createBuckets(tx *bbolt.Tx) error {
	for _, name := range storageBuckets {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	return nil
}

// PIDFileName is the file beside the store in which the process that opened it for writing
// last wrote its PID, so that ErrLocked can name the process holding the store.
const PIDFileName = "crawl.pid"

// HolderPID returns the PID of the process that last opened the store in dir for writing, as
// it wrote it in PIDFileName, or 0 if there is none. While Open fails with ErrLocked, that is
// the process holding the store (unless a reader holds it).
func HolderPID(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, PIDFileName))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// holder is "held by process PID; " when HolderPID knows it, or "".
func holder(dir string) string {
	if pid := HolderPID(dir); pid > 0 {
		return fmt.Sprintf("held by process %d; ", pid)
	}
	return ""
}

// Close closes the store. Closing twice is harmless. A store open for writing that met no
// damage is sealed (SealFileName) once bbolt has closed it, so that the next Open need not
// walk it.
func (db *DB) Close() error {
	db.trim.stop()
	if pidFile := filepath.Join(filepath.Dir(db.path), PIDFileName); !db.readOnly && HolderPID(filepath.Dir(db.path)) == os.Getpid() {
		_ = os.Remove(pidFile)
	}
	if err := db.bolt.Close(); err != nil {
		return fmt.Errorf("storage: close %s: %w", db.path, err)
	}
	if !db.readOnly && db.broken == nil && !db.damageMet.Load() && !db.closed.Swap(true) {
		writeSeal(db.path)
	}
	return nil
}

// Path returns the path of the store file.
func (db *DB) Path() string { return db.path }

// ReadOnly reports whether the store was opened read-only.
func (db *DB) ReadOnly() bool { return db.readOnly }

// Bolt returns the underlying bbolt database, for the frontier, which keeps its own buckets in
// the same file so that one transaction can store a page and complete its URL. Other callers
// should not need it.
func (db *DB) Bolt() *bbolt.DB { return db.bolt }
