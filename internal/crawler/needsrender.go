package crawler

import (
	"bytes"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
)

// shellText is the most visible text, in letters and digits, an HTML page with scripts may
// hold and still be taken for an application shell under --render auto: a title and a
// "Loading…" or "enable JavaScript" line, not a paragraph of content.
const shellText = 200

// needsRender reports whether body, an HTML document, is an application shell that builds its
// content in the browser: it has a script (external or inline) and, outside scripts, styles,
// templates and noscript, fewer than shellText letters and digits of text. It is pure and
// reads body once; the decision is per page (--render auto).
func needsRender(body []byte) bool {
	z := html.NewTokenizer(bytes.NewReader(body))
	scripts, text := 0, 0
	skip := 0 // depth inside elements whose text is not shown
	for {
		switch z.Next() {
		case html.ErrorToken:
			return scripts > 0 && text < shellText
		case html.StartTagToken:
			name, _ := z.TagName()
			switch string(name) {
			case "script":
				scripts++
				skip++
			case "style", "template", "noscript", "title":
				skip++
			}
		case html.SelfClosingTagToken: // "<script src=a.js/>": a script, whose element the browser leaves open
			if name, _ := z.TagName(); string(name) == "script" {
				scripts++
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			switch string(name) {
			case "script", "style", "template", "noscript", "title":
				skip = max(skip-1, 0)
			}
		case html.TextToken:
			if skip == 0 {
				text += countWordRunes(z.Text())
				if text >= shellText {
					return false
				}
			}
		}
	}
}

// countWordRunes counts the letters and digits in b.
func countWordRunes(b []byte) int {
	n := 0
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			n++
		}
		b = b[size:]
	}
	return n
}
