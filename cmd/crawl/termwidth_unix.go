//go:build unix

package main

import (
	"io"

	"golang.org/x/sys/unix"
)

// termWidth returns the width in columns of the terminal w writes to, or 0 if w is not a
// terminal or its size is unknown.
func termWidth(w io.Writer) int {
	f := underlyingFile(w)
	if f == nil {
		return 0
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}
