package urlnorm

import "errors"

// Sentinel errors. Functions wrap them with details (the scheme, the part
// that failed); test with errors.Is.
var (
	// ErrScheme is returned for a URL whose scheme is not http or https
	// (mailto:, javascript:, data:, tel:, ftp:, ...) or that has no scheme at
	// all where an absolute URL is required (Parse of a relative reference).
	// The wrapped message names the scheme.
	ErrScheme = errors.New("unsupported scheme")

	// ErrNoHost is returned for an http(s) URL with an empty host, such as
	// "http:///path", "http:foo" or "https://:443/".
	ErrNoHost = errors.New("missing host")

	// ErrTooLong is returned when the normalized URL is longer than
	// MaxLength bytes, or the input is so long (more than 8*MaxLength bytes
	// after trimming) that it is refused without normalizing it.
	ErrTooLong = errors.New("URL too long")

	// ErrParse is returned for anything else that cannot be a valid http(s)
	// URL: a host with characters no DNS name or IP literal has, an invalid
	// IPv6 literal, a port that is not a number in 1..65535, a host that
	// fails IDNA conversion, a nil base with a relative reference.
	ErrParse = errors.New("invalid URL")
)
