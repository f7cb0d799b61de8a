package storage

import (
	"net/http"
	"time"
)

// Page is one fetch as stored: everything export needs to write WARC, JSON Lines or a mirror
// without fetching again. Body holds the decoded body (Content-Encoding removed, see
// DecodedFrom); it is compressed with zstd on disk and decompressed on read.
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
	Body   []byte `json:"-"` // decoded body (not part of the JSON metadata)
}
