package fetch

import (
	"net/http"
	"net/url"
	"time"
)

// Response is the result of one hop. Its fields are plain data, owned by the
// caller once Get returns.
type Response struct {
	URL        *url.URL // the URL requested
	Status     int      // e.g. 200
	StatusLine string   // e.g. "HTTP/1.1 200 OK"
	Proto      string   // e.g. "HTTP/1.1", "HTTP/2.0"
	// Header is the response header exactly as received. When the body was
	// decoded (DecodedFrom != ""), its Content-Encoding and Content-Length
	// describe the bytes on the wire, not Body: exporters adjust them.
	Header http.Header
	// ReqHeader is the request header as sent by Get: User-Agent, Accept,
	// Accept-Encoding, and Host (which net/http sends from the URL).
	ReqHeader http.Header

	Body      []byte // decoded body, at most Config.MaxBody bytes
	Truncated bool   // Body is incomplete: cut at MaxBody, or reading failed (see Get)
	// DecodedFrom is the Content-Encoding that was removed, lowercased
	// ("gzip", "br", "deflate, gzip"), or "" if Body is as received: no
	// encoding, an empty body, or an encoding this package does not know
	// (then Body is the raw bytes and Header still says so).
	DecodedFrom string
	// ContentType is the media type of Content-Type, lowercased, without
	// parameters; sniffed with http.DetectContentType from Body if the
	// header is missing or malformed; "" if both are absent.
	ContentType string

	Started       time.Time     // when Get started
	Wrote         time.Time     // when the request was written to the connection (after any dial and TLS handshake); zero if unknown
	HeaderLatency time.Duration // from Started to the response headers
	Duration      time.Duration // from Started to the end of the body read
	RemoteAddr    string        // "IP:port" of the connection used

	// Location is, for a 3xx response, the Location header resolved against
	// URL and normalized with urlnorm; nil if the header is absent or
	// unusable, in which case LocationErr says why (wrapping a urlnorm
	// sentinel such as urlnorm.ErrScheme).
	Location    *url.URL
	LocationErr error

	// BodyState says whether the body was read (GetOptions.AcceptType).
	BodyState BodyState
}

// BodyState says what became of a response's body.
type BodyState int

const (
	// BodyRead: the body was read into Body (up to Config.MaxBody).
	BodyRead BodyState = iota
	// BodyRefused: the media type was not accepted, so the body was not read.
	BodyRefused
)
