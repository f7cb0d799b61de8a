//go:build !linux

package frontier

// reserveFPs returns nil: the set grows on the heap.
func reserveFPs[T any](owner *T, n int) []uint64 { return nil }
