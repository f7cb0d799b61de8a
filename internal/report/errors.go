package report

import "errors"

var (
	// ErrRunning is returned by Load when a crawl process holds the store: the samples cannot
	// be read until it ends.
	ErrRunning = errors.New("a crawl is running in this directory; make the report when it has finished (crawl status works meanwhile)")

	// ErrNoBrowser is returned by Screenshot when no Chromium or Chrome executable is found.
	ErrNoBrowser = errors.New("no headless browser found (install chromium, or name one with --browser)")
)
