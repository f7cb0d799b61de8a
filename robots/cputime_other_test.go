//go:build !linux

package robots

import "time"

var wallStart = time.Now()

// threadCPU stands in for the thread's CPU time where it cannot be read: the wall clock.
func threadCPU() time.Duration { return time.Since(wallStart) }
