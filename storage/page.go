package storage

import (
	"fmt"
	"net/http"
	"time"
)

// Page is one fetch as stored: everything export needs to write WARC, JSON Lines or a mirror
// without fetching again. Body holds the decoded body (Content-Encoding removed, see
// DecodedFrom); it is compressed with zstd on disk and decompressed on read. A page rendered
// in a browser also holds the document as the browser left it (Rendered, stored compressed
// beside Body) and what the render did (Render); each request the browser made for it is a
// page of its own, with Subresource set and Parent naming the rendered page.
type Page struct {
	Seq         uint64        `json:"seq"`          // fetch order, assigned by PutPage
	URL         string        `json:"url"`          // requested (normalized) URL
	FinalURL    string        `json:"final_url"`    // URL of this response (after redirects, if followed)
	Status      int           `json:"status"`       // HTTP status code
	StatusLine  string        `json:"status_line"`  // e.g. "HTTP/1.1 200 OK" as received
	Proto       string        `json:"proto"`        // e.g. "HTTP/1.1"
	Header      http.Header   `json:"header"`       // response headers as received
	ReqHeader   http.Header   `json:"req_header"`   // request headers as sent
	ReqMethod   string        `json:"req_method"`   // "GET"
	FetchedAt   time.Time     `json:"fetched_at"`   // when the request was sent
	Duration    time.Duration `json:"duration"`     // until the body was read
	Depth       int           `json:"depth"`        // link hops from a seed
	Parent      string        `json:"parent"`       // URL of the page that linked here ("" for seeds)
	ContentType string        `json:"content_type"` // media type from Content-Type, lowercased, no params
	Truncated   bool          `json:"truncated"`    // body cut at --max-body (after decoding)
	DecodedFrom string        `json:"decoded_from"` // Content-Encoding that was removed ("" if none)
	RemoteAddr  string        `json:"remote_addr"`  // IP:port dialled, if known
	NoIndex     bool          `json:"noindex"`      // the page asked not to be indexed (meta robots / X-Robots-Tag)
	// RevisitOf is, for a 304 Not Modified answer to a conditional GET, the Seq of the stored
	// 2xx page it confirms unchanged (the page's body is that one's); 0 for any other answer.
	// Such a 304 is stored without a body.
	RevisitOf uint64 `json:"revisit_of,omitempty"`
	// SameAs is, for a 2xx answer to a revisit whose body is byte for byte that of the URL's
	// previous 2xx answer, the Seq of the first of those identical answers; 0 otherwise. The
	// body is not stored again: reading the page reads that one's.
	SameAs uint64 `json:"same_as,omitempty"`
	// Subresource is set on a response fetched for the browser while it rendered the page
	// named in Parent (a script, a style sheet, an image, an API call…): part of that page,
	// not a page of the crawl.
	Subresource bool `json:"subresource,omitempty"`
	// ReqBody is the body the request carried (a sub-request's POST, PUT or PATCH), nil for
	// none; at most fetch.MaxRequestBody bytes.
	ReqBody []byte `json:"req_body,omitempty"`
	// Render is set iff the page was rendered: then Rendered holds the rendered document.
	Render *RenderInfo `json:"render,omitempty"`
	Body   []byte      `json:"-"` // decoded body (not part of the JSON metadata)
	// Rendered is the serialised DOM after rendering (document.documentElement.outerHTML),
	// non-nil iff Render is set (read by Page and Pages; PageMeta and PagesMeta leave it nil).
	// It is stored compressed under the page's own Seq: SameAs never applies to it.
	Rendered []byte `json:"-"`
}

// RenderInfo says what rendering a page did.
type RenderInfo struct {
	Cut      RenderCut     `json:"cut,omitempty"` // why the render stopped, if a cap stopped it
	Requests int           `json:"requests"`      // sub-requests answered
	Bytes    int64         `json:"bytes"`         // bytes of the sub-responses
	Took     time.Duration `json:"took"`          // from the start of the render to the DOM read
}

// RenderCut says whether a render ran until the page settled or a per-page cap stopped it; a
// page cut is kept as rendered at the cut. It is stored as a word ("timeout"…).
type RenderCut int

const (
	RenderComplete    RenderCut = iota // the page loaded and went quiet
	RenderCutTimeout                   // the render's time cap
	RenderCutRequests                  // the cap on sub-requests
	RenderCutBytes                     // the cap on bytes of sub-responses
)

var renderCutWords = [...]string{"complete", "timeout", "requests", "bytes"}

func (c RenderCut) String() string {
	if c < 0 || int(c) >= len(renderCutWords) {
		return fmt.Sprintf("RenderCut(%d)", int(c))
	}
	return renderCutWords[c]
}

// MarshalText writes c as its word; a value without one is an error.
func (c RenderCut) MarshalText() ([]byte, error) {
	if c < 0 || int(c) >= len(renderCutWords) {
		return nil, fmt.Errorf("storage: render cut %d has no name", int(c))
	}
	return []byte(renderCutWords[c]), nil
}

// UnmarshalText reads a word MarshalText writes; any other is an error naming it.
func (c *RenderCut) UnmarshalText(b []byte) error {
	for i, w := range renderCutWords {
		if string(b) == w {
			*c = RenderCut(i)
			return nil
		}
	}
	return fmt.Errorf("storage: unknown render cut %q", b)
}
