//go:build linux

package storage

import (
	"os"
	"syscall"
)

// fileID is what names one version of a file without reading it: a copy or a replacement is
// another inode, and every write through the file system sets the change time (which no
// program can set back). A write within the file system's clock tick of the last one may keep
// both times, which is why a seal also holds the bytes' checksum.
type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // nanoseconds since the epoch
}

// identify returns f's fileID; ok is false if the system does not give one.
func identify(f *os.File) (fileID, bool) {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return fileID{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino, size: st.Size,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}, true
}

// lockNow takes an exclusive flock on f (the lock bbolt takes) if it is free at once.
func lockNow(f *os.File) bool {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}

func unlock(f *os.File) { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
