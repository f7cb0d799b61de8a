package fetch

import (
	"bufio"
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
// about max whatever the compression ratio. size is the body's length on the
// wire if known (Content-Length), else -1: an unencoded body of that length is
// read into one buffer of its size. It returns the bytes, whether they were
// cut at max, the codings removed ("" if none), and the error that ended
// reading early, if any.
func decodeBody(body io.Reader, ce []string, max, size int64) (b []byte, truncated bool, decodedFrom string, err error) {
	wire := &wireReader{r: body}
	var r io.Reader = wire
	codings := parseCodings(ce)
	if codings != nil {
		br := bufio.NewReader(wire)
		if _, perr := br.Peek(1); perr != nil {
			// Empty body (204, 304, or a lying header): nothing to decode.
			codings = nil
		}
		r = br
		size = -1 // the decoded length is not known
	}
	for i := len(codings) - 1; i >= 0; i-- {
		dr, derr := newDecoder(codings[i], r)
		if derr != nil {
			return nil, false, "", decodeErr(wire, codings[i], derr)
		}
		defer dr.Close()
		r = dr
	}
	limit := max
	if limit < math.MaxInt64 {
		limit++ // one byte more tells a body of exactly max bytes from a longer one
	}
	b, err = readAll(io.LimitReader(r, limit), size)
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

// maxPresize bounds the buffer readAll allocates ahead on a body's word.
const maxPresize = 1 << 20

// readAll is io.ReadAll starting with room for size bytes (and the read that
// finds the end), up to maxPresize, when size >= 0: a body whose length is
// known is read into one allocation of its size instead of a series of
// doubling ones.
func readAll(r io.Reader, size int64) ([]byte, error) {
	n := 512
	if size >= 0 {
		n = int(min(size, maxPresize)) + 1
	}
	b := make([]byte, 0, n)
	for {
		m, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // let append grow the buffer
		}
	}
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
