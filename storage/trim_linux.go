//go:build linux

package storage

import "syscall"

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
