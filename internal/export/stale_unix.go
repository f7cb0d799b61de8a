//go:build unix

package export

import (
	"errors"
	"syscall"
)

// processGone reports whether no process has the ID pid (signal 0 checks without sending).
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
