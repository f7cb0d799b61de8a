package render

import (
	"os/exec"
	"runtime"
)

// browserNames are the executables FindBrowser looks for on PATH, in order.
var browserNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"}

// FindBrowser returns the path of a Chromium or Chrome executable on PATH, or "" if there is
// none.
func FindBrowser() string {
	for _, n := range browserNames {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

// DefaultTabs is the number of pages rendered at once when Options.Tabs is 0: three per core
// (a page spends most of its time waiting for its requests and its quiet time, not on a
// core), at most one per 512 MiB of available memory, between 1 and 16.
func DefaultTabs() int {
	n := 3 * runtime.NumCPU()
	if m := availableMemory(); m > 0 && int(m/(512<<20)) < n {
		n = int(m / (512 << 20))
	}
	return max(1, min(n, 16))
}
