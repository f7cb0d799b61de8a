//go:build !unix

package main

import "io"

// termWidth returns 0: the terminal's width is not known on this system, so the live status
// line is not cut to fit.
func termWidth(io.Writer) int { return 0 }
