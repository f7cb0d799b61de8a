package render

import (
	"os/exec"
	"path/filepath"
	"runtime"
)

// browserNames are the executables FindBrowser looks for on PATH, in order: Chromium's
// headless shell first (the same engine without the browser's user interface, about half the
// CPU and memory a page; docs/render.md, "The browser"), then the full browsers.
var browserNames = []string{"chrome-headless-shell", "chromium-headless-shell",
	"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"}

// wrapped are the executables that wrappers on PATH run without exec (Debian's
// /usr/bin/chromium-headless-shell is a shell script running it as its child), relative to
// the wrapper's directory: FindBrowser returns the executable itself, so the browser is the
// process render starts, signals and watches.
var wrapped = map[string]string{"chromium-headless-shell": "../lib/chromium/chromium-headless-shell"}

// BrowserNames returns the executables FindBrowser looks for on PATH, in order.
func BrowserNames() []string { return append([]string(nil), browserNames...) }

// FindBrowser returns the path of a Chromium headless shell, Chromium or Chrome executable on
// PATH, or "" if there is none.
func FindBrowser() string {
	for _, n := range browserNames {
		p, err := exec.LookPath(n)
		if err != nil {
			continue
		}
		if w, ok := wrapped[n]; ok {
			if b, err := exec.LookPath(filepath.Join(filepath.Dir(p), w)); err == nil {
				return b
			}
		}
		return p
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
