package fetch

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
)

// maxCodings bounds how many stacked Content-Encodings are decoded.
const maxCodings = 3

// wireReader records the first error of the underlying body, so a decoder
// failure caused by the connection is classified as the connection's.
type wireReader struct {
	r   io.Reader
	err error
}

func (w *wireReader) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if err != nil && err != io.EOF && w.err == nil {
		w.err = err
	}
	return n, err
}

// decodeBody reads body, undoing the content codings named in the
// Content-Encoding header values, and keeps at most max decoded bytes.
// Decoding stops as soon as max+1 bytes came out, so the memory used is
// about max whatever the compression ratio. It returns the bytes, whether
// they were cut at max, the codings removed ("" if none), and the error
// that ended reading early, if any.
func decodeBody(body io.Reader, ce []string, max int64) (b []byte, truncated bool, decodedFrom string, err error) {
	wire := &wireReader{r: body}
	br := bufio.NewReader(wire)
	codings := parseCodings(ce)
	if codings != nil {
		if _, perr := br.Peek(1); perr != nil {
			// Empty body (204, 304, or a lying header): nothing to decode.
			codings = nil
		}
	}
	var r io.Reader = br
	for i := len(codings) - 1; i >= 0; i-- {
		dr, derr := newDecoder(codings[i], r)
		if derr != nil {
			return nil, false, "", decodeErr(wire, codings[i], derr)
		}
		defer dr.Close()
		r = dr
	}
	var buf bytes.Buffer
	limit := max
	if limit < math.MaxInt64 {
		limit++ // one byte more tells a body of exactly max bytes from a longer one
	}
	_, err = buf.ReadFrom(io.LimitReader(r, limit))
	b = buf.Bytes()
	if int64(len(b)) > max {
		b, truncated = b[:max], true
	}
	if len(codings) > 0 {
		decodedFrom = strings.Join(codings, ", ")
		if err != nil {
			err = decodeErr(wire, decodedFrom, err)
		}
	}
	return b, truncated, decodedFrom, err
}

func decodeErr(wire *wireReader, coding string, err error) error {
	if wire.err != nil {
		return wire.err
	}
	return fmt.Errorf("%w: %s: %v", errDecode, coding, err)
}

// parseCodings returns the codings to undo, in the order they were applied,
// or nil if there are none or any of them is unknown (then the body is kept
// as received).
func parseCodings(values []string) []string {
	var out []string
	for _, v := range values {
		for _, c := range strings.Split(v, ",") {
			c = strings.ToLower(strings.TrimSpace(c))
			switch c {
			case "", "identity":
			case "gzip", "x-gzip", "deflate", "br":
				out = append(out, c)
			default:
				return nil
			}
		}
	}
	if len(out) > maxCodings {
		return nil
	}
	return out
}

func newDecoder(coding string, r io.Reader) (io.ReadCloser, error) {
	switch coding {
	case "gzip", "x-gzip":
		return gzip.NewReader(r)
	case "br":
		return io.NopCloser(brotli.NewReader(r)), nil
	case "deflate":
		// RFC 9110 says zlib; some servers send raw deflate. A zlib stream
		// starts with a header whose 16-bit value is a multiple of 31 and
		// whose method nibble is 8; a raw stream almost never does.
		br := bufio.NewReader(r)
		if h, err := br.Peek(2); err == nil && h[0]&0x0f == 8 && (uint16(h[0])<<8|uint16(h[1]))%31 == 0 {
			return zlib.NewReader(br)
		}
		return flate.NewReader(br), nil
	}
	return nil, errors.New("unknown coding " + coding)
}
