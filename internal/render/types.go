package render

import (
	"context"
	"net/http"
	"time"
)

// Kind is what a request is for, from the browser's own resource type.
type Kind int

const (
	KindOther Kind = iota
	KindDocument
	KindScript
	KindStylesheet
	KindImage
	KindFont
	KindXHR // XMLHttpRequest and fetch()
	KindFrame
	KindMedia
)

var kindNames = [...]string{"other", "document", "script", "stylesheet", "image", "font", "xhr", "frame", "media"}

func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return "other"
	}
	return kindNames[k]
}

// Cut says which cap ended a render before the page settled.
type Cut int

const (
	CutNone     Cut = iota // the page loaded and went quiet
	CutTimeout             // Options.Timeout passed first
	CutRequests            // the page asked for more than Options.MaxRequests sub-requests
	CutBytes               // the sub-responses passed Options.MaxBytes
	CutDOM                 // the serialised DOM passed Options.MaxDOM and was truncated
)

var cutNames = [...]string{"none", "timeout", "requests", "bytes", "dom"}

func (c Cut) String() string {
	if c < 0 || int(c) >= len(cutNames) {
		return "unknown"
	}
	return cutNames[c]
}

// Request is one request the page made, paused in the browser.
type Request struct {
	URL        string
	Method     string
	Header     http.Header
	Body       []byte // POST body, if any (at most maxRequestBody bytes)
	Kind       Kind
	Navigation bool // the main document of this render (answered from Render's doc, never Answerer)
}

// Response is the crawl's answer; the browser sees exactly this. Body is the decoded body:
// Content-Encoding, Content-Length and Transfer-Encoding headers are dropped before the
// browser sees the response.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Answerer answers every sub-request of a page. An error fails the request in the browser
// (the page sees a network error); it is never retried by render. Answer is called from
// several goroutines at once (one per request in flight); ctx ends when the render does.
type Answerer interface {
	Answer(ctx context.Context, r *Request) (*Response, error)
}

// EarlyReader is an Answerer that also reads a page's DOM before the page ends. Early is called
// with the serialised DOM (at most Options.MaxDOM bytes, possibly cut) once the document is
// parsed and nothing the DOM's content depends on is in flight (only images, fonts and media
// pending) for earlyHold, again only after more of that content came, at most maxEarlyReads
// times a page, one call at a time, and never after Render returns. It is a preview: the
// page's DOM is still the one Result holds.
type EarlyReader interface {
	Answerer
	Early(dom []byte)
}

// AnswererFunc adapts a function to Answerer.
type AnswererFunc func(ctx context.Context, r *Request) (*Response, error)

// Answer calls f.
func (f AnswererFunc) Answer(ctx context.Context, r *Request) (*Response, error) { return f(ctx, r) }

// Options configures Start. The zero value is valid: every zero field means its default.
type Options struct {
	Browser     string        // executable; "" means FindBrowser()
	Tabs        int           // pages rendered at once; 0 means DefaultTabs()
	Timeout     time.Duration // per page; 0 means 30s
	Quiet       time.Duration // no sub-request in flight for this long after load = done; 0 means 500ms
	MaxRequests int           // sub-requests per page; 0 means 500
	MaxBytes    int64         // bytes of sub-responses per page; 0 means 32 MiB
	MaxDOM      int64         // serialised DOM cap in bytes; 0 means 16 MiB
	UserAgent   string        // the page's navigator.userAgent and User-Agent header; "" means the browser's own
	TabPages    int           // pages one tab renders before it is closed and a new one opened; 0 means 100
}

// Defaults of Options.
const (
	DefaultTimeout     = 30 * time.Second
	DefaultQuiet       = 500 * time.Millisecond
	DefaultMaxRequests = 500
	DefaultMaxBytes    = 32 << 20
	DefaultMaxDOM      = 16 << 20
	DefaultTabPages    = 100
)

// Bounds on what a page can make render hold that Options does not set.
const (
	maxRequestBody   = 1 << 20  // a request body the page sends; larger fails the request
	maxRequestHeader = 64 << 10 // bytes of names and values of one request's headers
	maxHeaderCount   = 200      // headers of one request
	maxURL           = 64 << 10 // bytes of a request's URL
)

func (o Options) withDefaults() Options {
	if o.Tabs <= 0 {
		o.Tabs = DefaultTabs()
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Quiet <= 0 {
		o.Quiet = DefaultQuiet
	}
	if o.MaxRequests <= 0 {
		o.MaxRequests = DefaultMaxRequests
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxDOM <= 0 {
		o.MaxDOM = DefaultMaxDOM
	}
	if o.TabPages <= 0 {
		o.TabPages = DefaultTabPages
	}
	return o
}

// Result is a rendered page.
type Result struct {
	DOM      []byte // document.documentElement.outerHTML after the page settled (at most MaxDOM bytes)
	Cut      Cut    // the cap that ended the render, CutNone when the page settled
	Requests int    // sub-requests answered (by the Answerer, fulfilled or failed)
	Bytes    int64  // bytes of sub-response bodies given to the browser
	Took     time.Duration
}
