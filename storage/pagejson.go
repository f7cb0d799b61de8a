package storage

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"unicode/utf8"
)

// marshalPage returns the metadata of p exactly as json.Marshal(p) does, byte for byte, in
// one pass without reflection. A FetchedAt that JSON cannot hold (a year outside 0-9999) or a
// RenderCut without a name is left to json.Marshal, which returns its error.
func marshalPage(p *Page) ([]byte, error) {
	at, err := p.FetchedAt.MarshalJSON()
	if err != nil {
		return json.Marshal(p)
	}
	n := 256 + len(at) + len(p.URL) + len(p.FinalURL) + len(p.StatusLine) + len(p.Proto) + len(p.ReqMethod) + base64.StdEncoding.EncodedLen(len(p.ReqBody)) +
		len(p.Parent) + len(p.ContentType) + len(p.DecodedFrom) + len(p.RemoteAddr) + headerSize(p.Header) +
		headerSize(p.ReqHeader)
	b := make([]byte, 0, n+n/8)
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, p.Seq, 10)
	b = append(b, `,"url":`...)
	b = appendString(b, p.URL)
	b = append(b, `,"final_url":`...)
	b = appendString(b, p.FinalURL)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(p.Status), 10)
	b = append(b, `,"status_line":`...)
	b = appendString(b, p.StatusLine)
	b = append(b, `,"proto":`...)
	b = appendString(b, p.Proto)
	b = append(b, `,"header":`...)
	b = appendHeader(b, p.Header)
	b = append(b, `,"req_header":`...)
	b = appendHeader(b, p.ReqHeader)
	b = append(b, `,"req_method":`...)
	b = appendString(b, p.ReqMethod)
	b = append(b, `,"fetched_at":`...)
	b = append(b, at...)
	b = append(b, `,"duration":`...)
	b = strconv.AppendInt(b, int64(p.Duration), 10)
	b = append(b, `,"depth":`...)
	b = strconv.AppendInt(b, int64(p.Depth), 10)
	b = append(b, `,"parent":`...)
	b = appendString(b, p.Parent)
	b = append(b, `,"content_type":`...)
	b = appendString(b, p.ContentType)
	b = append(b, `,"truncated":`...)
	b = strconv.AppendBool(b, p.Truncated)
	b = append(b, `,"decoded_from":`...)
	b = appendString(b, p.DecodedFrom)
	b = append(b, `,"remote_addr":`...)
	b = appendString(b, p.RemoteAddr)
	b = append(b, `,"noindex":`...)
	b = strconv.AppendBool(b, p.NoIndex)
	if p.RevisitOf != 0 {
		b = append(b, `,"revisit_of":`...)
		b = strconv.AppendUint(b, p.RevisitOf, 10)
	}
	if p.SameAs != 0 {
		b = append(b, `,"same_as":`...)
		b = strconv.AppendUint(b, p.SameAs, 10)
	}
	if p.Subresource {
		b = append(b, `,"subresource":true`...)
	}
	if len(p.ReqBody) > 0 {
		b = append(b, `,"req_body":"`...)
		b = base64.StdEncoding.AppendEncode(b, p.ReqBody)
		b = append(b, '"')
	}
	if r := p.Render; r != nil {
		b = append(b, `,"render":{`...)
		if r.Cut != RenderComplete {
			word, err := r.Cut.MarshalText()
			if err != nil {
				return json.Marshal(p)
			}
			b = append(b, `"cut":`...)
			b = appendString(b, string(word))
			b = append(b, ',')
		}
		b = append(b, `"requests":`...)
		b = strconv.AppendInt(b, int64(r.Requests), 10)
		b = append(b, `,"bytes":`...)
		b = strconv.AppendInt(b, r.Bytes, 10)
		b = append(b, `,"took":`...)
		b = strconv.AppendInt(b, int64(r.Took), 10)
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

func headerSize(h http.Header) int {
	n := 2
	for k, vs := range h {
		n += len(k) + 6
		for _, v := range vs {
			n += len(v) + 3
		}
	}
	return n
}

// appendHeader appends h as json.Marshal writes a map of string slices: null if nil, keys in
// order.
func appendHeader(b []byte, h http.Header) []byte {
	if h == nil {
		return append(b, "null"...)
	}
	var stack [16]string
	keys := stack[:0]
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		vs := h[k]
		if vs == nil {
			b = append(b, "null"...)
			continue
		}
		b = append(b, '[')
		for j, v := range vs {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendString(b, v)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendString appends s quoted as encoding/json does with HTML escaping (its default): '<',
// '>', '&', U+2028 and U+2029 escaped, control characters as \b \f \n \r \t or \u00XX, invalid
// UTF-8 as \ufffd.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= ' ' && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
