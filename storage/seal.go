package storage

import (
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
)

// SealFileName is the file beside the store in which a crawl that closed the store cleanly
// describes the file as it left it: its identity (device, inode, size, modification and change
// times) and a CRC-32C of all its bytes. Open skips the page walk when the store file is still
// that file with those bytes; a store opened for writing loses its seal until it is closed
// again, so after a crash the next Open walks the file.
const SealFileName = "crawl.seal"

// sealVersion begins every seal; a seal of another version is no seal.
const sealVersion = "crawl-seal/1"

// maxSealSize bounds what Open reads of a seal file.
const maxSealSize = 512

// seal is what a seal file says about the store file.
type seal struct {
	id  fileID
	sum uint32 // CRC-32C (Castagnoli) of every byte of the file
}

func (s seal) String() string {
	return fmt.Sprintf("%s dev=%d ino=%d size=%d mtime=%d ctime=%d crc32c=%08x\n", sealVersion,
		s.id.dev, s.id.ino, s.id.size, s.id.mtime, s.id.ctime, s.sum)
}

// parseSeal parses what seal.String wrote; ok is false for anything else.
func parseSeal(b []byte) (s seal, ok bool) {
	var v string
	n, err := fmt.Sscanf(string(b), "%s dev=%d ino=%d size=%d mtime=%d ctime=%d crc32c=%x\n", &v,
		&s.id.dev, &s.id.ino, &s.id.size, &s.id.mtime, &s.id.ctime, &s.sum)
	if err != nil || n != 7 || v != sealVersion || s.String() != string(b) {
		return seal{}, false
	}
	return s, true
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// fileSum returns the CRC-32C of the file f, read from its start, and how many bytes it read.
func fileSum(f *os.File) (uint32, int64, error) {
	buf := make([]byte, 256<<10)
	var sum uint32
	var n int64
	for {
		k, err := f.ReadAt(buf, n)
		sum = crc32.Update(sum, castagnoli, buf[:k])
		n += int64(k)
		if err == io.EOF {
			return sum, n, nil
		}
		if err != nil {
			return 0, n, err
		}
	}
}

// sealed reports whether the seal beside the store file path describes it: the same file
// (fileID) holding the same bytes. The caller holds the file's lock, so that no writer changes
// it meanwhile. Any doubt (no seal, one that does not parse, an error) is false.
func sealed(path string) bool {
	sf, err := os.Open(filepath.Join(filepath.Dir(path), SealFileName))
	if err != nil {
		return false
	}
	b, err := io.ReadAll(io.LimitReader(sf, maxSealSize+1))
	sf.Close()
	if err != nil || len(b) > maxSealSize {
		return false
	}
	s, ok := parseSeal(b)
	if !ok {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if id, ok := identify(f); !ok || id != s.id {
		return false
	}
	sum, n, err := fileSum(f)
	if err != nil || n != s.id.size || sum != s.sum {
		return false
	}
	id, ok := identify(f) // unchanged while it was read
	return ok && id == s.id
}

// writeSeal writes the seal of the store file path, which the caller has closed after its
// last write, if it can take the file's lock at once (else another process has the store
// now, and there is nothing to seal). Best effort: a seal not written costs the next Open a
// walk, nothing else.
func writeSeal(path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	if !lockNow(f) {
		return
	}
	defer unlock(f)
	before, ok := identify(f)
	if !ok {
		return
	}
	sum, n, err := fileSum(f)
	if err != nil || n != before.size {
		return
	}
	if after, ok := identify(f); !ok || after != before {
		return
	}
	// A fixed temporary name: only the holder of the lock writes it.
	tmp := filepath.Join(filepath.Dir(path), ".crawl.seal.new")
	if os.WriteFile(tmp, []byte(seal{id: before, sum: sum}.String()), 0o644) != nil ||
		os.Rename(tmp, filepath.Join(filepath.Dir(path), SealFileName)) != nil {
		os.Remove(tmp)
	}
}

// removeSeal removes the seal beside the store file path, before the store is written.
func removeSeal(path string) {
	_ = os.Remove(filepath.Join(filepath.Dir(path), SealFileName))
}
