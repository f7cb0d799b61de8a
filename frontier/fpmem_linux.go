package frontier

import (
	"runtime"
	"syscall"
	"unsafe"
)

// reserve returns an empty slice able to hold n elements without growing, and arranges for its
// memory to be given back once owner is unreachable. On Linux the memory is an anonymous
// mapping reserved, not committed (MAP_NORESERVE): pages become resident as the set fills
// them, so the set costs what it holds, it grows in place (no copy, no second array while it
// grows), and it is not Go heap, which the collector lets grow to twice what is live. E must
// hold no pointers. If the mapping cannot be made, it returns nil and the slice grows on the
// heap.
func reserve[E, T any](owner *T, n int) []E {
	var e E
	size := int(unsafe.Sizeof(e))
	if n <= 0 || n > 1<<40/size {
		return nil
	}
	b, err := syscall.Mmap(-1, 0, n*size, syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_NORESERVE)
	if err != nil {
		return nil
	}
	runtime.AddCleanup(owner, func(b []byte) { syscall.Munmap(b) }, b)
	return unsafe.Slice((*E)(unsafe.Pointer(unsafe.SliceData(b))), n)[:0]
}
