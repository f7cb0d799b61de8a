package storage

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// bbolt's meta page, as far as checkLength reads it: a 16-byte page header, then magic,
// version, page size, flags (uint32 each), the root bucket (root page, sequence), the freelist
// page, the high-water mark (pgid) and the transaction id (uint64 each), and an FNV-64a checksum
// of all that. Integers are in the machine's byte order, as bbolt writes them.
const (
	boltMagic     = 0xED0CDAED
	boltVersion   = 2
	pageHeader    = 16
	metaSumOffset = 56 // bytes of meta covered by the checksum
	metaLen       = metaSumOffset + 8
)

type boltMeta struct {
	pageSize, root, freelist, pgid, txid uint64
}

// readMeta decodes the meta page at off; ok is false if there is none (bad magic, version or
// checksum, or the file ends first).
func readMeta(r io.ReaderAt, off int64) (m boltMeta, ok bool) {
	var b [pageHeader + metaLen]byte
	if _, err := r.ReadAt(b[:], off); err != nil {
		return m, false
	}
	meta := b[pageHeader:]
	le := binary.NativeEndian
	h := fnv.New64a()
	h.Write(meta[:metaSumOffset])
	if le.Uint32(meta[0:]) != boltMagic || le.Uint32(meta[4:]) != boltVersion || le.Uint64(meta[metaSumOffset:]) != h.Sum64() {
		return m, false
	}
	return boltMeta{pageSize: uint64(le.Uint32(meta[8:])), root: le.Uint64(meta[16:]), freelist: le.Uint64(meta[32:]),
		pgid: le.Uint64(meta[40:]), txid: le.Uint64(meta[48:])}, true
}

// checkLength refuses, with ErrDamaged, a bbolt file shorter than its newest valid meta page
// says it is: a copy cut short, a disk that filled up while it was copied. bbolt maps the file
// into memory and would read the missing pages there, which faults and kills the process
// instead of returning an error. A file without a valid meta page is left to bbolt to judge.
func checkLength(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil // bbolt reports it
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	best, found := newestMeta(f)
	if !found || best.pageSize == 0 {
		return nil
	}
	if need := best.pgid * best.pageSize; need > uint64(fi.Size()) {
		return fmt.Errorf("%w (the file has %d bytes but its pages reach byte %d; was it cut short?)", ErrDamaged, fi.Size(), need)
	}
	return nil
}
