//go:build !linux

package storage

func dropMapped(addr uintptr, n int64) error { return nil }

// resident is not read outside Linux: trims follow the clock alone.
type resident struct{}

func openResident() *resident   { return &resident{} }
func (r *resident) read() int64 { return -1 }
func (r *resident) close()      {}
