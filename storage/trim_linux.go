//go:build linux

package storage

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"syscall"
)

// dropMapped applies MADV_DONTNEED to n bytes of the shared, read-only file mapping at addr.
// For such a mapping it only unmaps the pages; their content is read back from the page cache
// on the next access.
func dropMapped(addr uintptr, n int64) error {
	if addr == 0 || n <= 0 {
		return nil
	}
	_, _, errno := syscall.Syscall(syscall.SYS_MADVISE, addr, uintptr(n), syscall.MADV_DONTNEED)
	if errno != 0 {
		return errno
	}
	return nil
}

// resident reads the process's resident file-backed and shared memory (the third figure of
// /proc/self/statm), re-reading one open file.
type resident struct {
	f   *os.File
	buf [128]byte
}

func openResident() *resident {
	f, err := os.Open("/proc/self/statm")
	if err != nil {
		return &resident{}
	}
	return &resident{f: f}
}

// read returns the resident shared bytes, or -1 if they cannot be read.
func (r *resident) read() int64 {
	if r.f == nil {
		return -1
	}
	n, err := r.f.ReadAt(r.buf[:], 0)
	if n == 0 || err != nil && err != io.EOF {
		return -1
	}
	fields := bytes.Fields(r.buf[:n])
	if len(fields) < 3 {
		return -1
	}
	pages, err := strconv.ParseInt(string(fields[2]), 10, 64)
	if err != nil {
		return -1
	}
	return pages * int64(os.Getpagesize())
}

func (r *resident) close() {
	if r.f != nil {
		r.f.Close()
	}
}
