package render

import "errors"

var (
	// ErrNoBrowser is returned by Start when Options.Browser is empty and no Chromium or Chrome
	// executable is on PATH, or when the one named does not exist.
	ErrNoBrowser = errors.New("no headless browser found (install chromium, or name one with --browser)")

	// ErrCrash is returned by Render when the browser (or the page's renderer) died or stopped
	// answering during the render. The browser has been restarted: the caller may try the page
	// once more.
	ErrCrash = errors.New("the browser crashed or hung during the render (it was restarted)")

	// ErrTimeout is returned by Render when the page could not produce a DOM within
	// Options.Timeout (and a short grace to read it). A page that produced one is returned as
	// a Result with Cut set instead.
	ErrTimeout = errors.New("the page produced no DOM within the render timeout")

	// ErrClosed is returned by Render after Close.
	ErrClosed = errors.New("the browser is closed")
)
