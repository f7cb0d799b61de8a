package export

import (
	"bytes"
	"strings"

	xhtml "golang.org/x/net/html"
)

// offlineDOM returns a rendered DOM (document.documentElement.outerHTML, UTF-8) as a file that
// reads offline without running anything: <script> elements, event handler attributes (on…),
// javascript: URLs and iframe srcdoc are removed, the charset the original declared is
// replaced by <meta charset="utf-8"> (the DOM is UTF-8 whatever the body was) and a doctype
// is put first (outerHTML leaves it out, and without one a browser renders in quirks mode).
// Everything else keeps its bytes, tag names aside (lowercased).
func offlineDOM(dom []byte) []byte {
	out := make([]byte, 0, len(dom)+64)
	if !bytes.HasPrefix(bytes.ToLower(bytes.TrimSpace(dom[:min(len(dom), 64)])), []byte("<!doctype")) {
		out = append(out, "<!DOCTYPE html>\n"...)
	}
	const meta = `<meta charset="utf-8">`
	charset := false // the meta charset is written
	z := xhtml.NewTokenizer(bytes.NewReader(dom))
	inScript := false
	for {
		tt := z.Next()
		raw := z.Raw()
		switch tt {
		case xhtml.ErrorToken:
			if !inScript {
				out = append(out, raw...)
			}
			if !charset { // a DOM without elements: say its charset anyway
				out = append(out, meta...)
			}
			return out
		case xhtml.EndTagToken:
			name, _ := z.TagName()
			if string(name) == "script" {
				inScript = false
				continue
			}
		case xhtml.StartTagToken, xhtml.SelfClosingTagToken:
			name, _ := z.TagName()
			tag := string(name)
			switch {
			case inScript:
				continue
			case tag == "script":
				inScript = tt == xhtml.StartTagToken
				continue
			case tag == "meta" && declaresCharset(raw):
				continue
			}
			if !charset && tag != "html" && tag != "head" {
				out, charset = append(out, meta...), true
			}
			out = appendInert(out, raw)
			if !charset && tag == "head" {
				out, charset = append(out, meta...), true
			}
			continue
		}
		if !inScript {
			out = append(out, raw...)
		}
	}
}

// declaresCharset reports whether the raw <meta> tag declares a charset (charset, or
// http-equiv content-type).
func declaresCharset(raw []byte) bool {
	for _, a := range scanAttrs(raw) {
		if a.name == "charset" {
			return true
		}
		if a.name == "http-equiv" && a.valStart >= 0 && strings.EqualFold(strings.TrimSpace(string(raw[a.valStart:a.valEnd])), "content-type") {
			return true
		}
	}
	return false
}

// appendInert appends the raw start tag to out without the attributes that run script: event
// handlers (on…), iframe srcdoc, and any attribute whose value is a javascript: URL.
func appendInert(out, raw []byte) []byte {
	last := 0
	for _, a := range scanAttrs(raw) {
		drop := strings.HasPrefix(a.name, "on") || a.name == "srcdoc"
		if !drop && a.valStart >= 0 {
			v := strings.ToLower(strings.TrimLeft(xhtml.UnescapeString(string(raw[a.valStart:a.valEnd])), " \t\n\r\f"))
			drop = strings.HasPrefix(v, "javascript:")
		}
		if drop {
			start := a.nameStart
			for start > last && strings.IndexByte(" \t\n\r\f", raw[start-1]) >= 0 {
				start-- // the space before it goes too
			}
			out = append(out, raw[last:start]...)
			last = a.end
		}
	}
	return append(out, raw[last:]...)
}
