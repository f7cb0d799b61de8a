package fetch

import (
	"bytes"

	"golang.org/x/net/html"
)

// tagScanner finds the start tags of an HTML document and the attributes ExtractLinks reads.
// It splits the bytes into tags, comments, doctypes and text exactly as the Tokenizer of
// golang.org/x/net/html does (Copyright 2010 The Go Authors, BSD license), whose rules it
// follows: raw text after script, style, title, textarea, iframe, noembed, noframes, noscript,
// xmp and plaintext start tags, no CDATA sections, a start tag cut off by the end of the input
// dropped. It reads the document in place, skipping text with bytes.IndexByte, and keeps no
// copy of it; the tests hold it to the Tokenizer on generated and fuzzed documents.
type tagScanner struct {
	b    []byte
	pos  int    // where scanning resumes
	raw  string // the element whose raw text comes next ("" for none)
	kind tagKind
	// attrs holds, for the current tag if its kind is not tagOther, the first attribute of
	// each name ExtractLinks reads.
	attrs [numAttrs]tagAttr
}

type tagKind uint8

const (
	tagOther tagKind = iota
	tagA             // a, area
	tagFrame         // frame, iframe
	tagLink
	tagMeta
	tagBase
)

// Attributes read, by index in tagScanner.attrs.
const (
	attrHref = iota
	attrSrc
	attrRel
	attrName
	attrContent
	numAttrs
)

var attrNames = [numAttrs]string{"href", "src", "rel", "name", "content"}

// tagAttr is one attribute's value: b[start:end] as written, between quotes if quote != 0.
type tagAttr struct {
	start, end int
	quote      byte
	ok         bool // the attribute is present
}

// next moves to the next start tag (self-closing or not) and reports whether there is one.
// Its kind and attributes are in s.kind and s.attrs.
func (s *tagScanner) next() bool {
	b := s.b
	for {
		if raw := s.raw; raw != "" {
			s.raw = ""
			switch raw {
			case "plaintext":
				s.pos = len(b)
				return false
			case "script":
				s.pos = skipScript(b, s.pos)
			default:
				s.pos = skipRawText(b, s.pos, raw)
			}
		}
		i := bytes.IndexByte(b[s.pos:], '<')
		if i < 0 || s.pos+i+1 >= len(b) {
			s.pos = len(b)
			return false
		}
		p := s.pos + i // b[p] == '<'
		switch c := b[p+1]; {
		case isASCIILetter(c):
			end, ok := s.readTag(p+1, true)
			if !ok {
				s.pos = len(b)
				return false
			}
			s.pos = end
			return true
		case c == '/':
			switch {
			case p+2 >= len(b):
				s.pos = len(b)
				return false
			case b[p+2] == '>': // "</>" is nothing at all
				s.pos = p + 3
			case isASCIILetter(b[p+2]):
				end, ok := s.readTag(p+2, false)
				if !ok {
					s.pos = len(b)
					return false
				}
				s.pos = end
			default: // a bogus comment
				s.pos = untilCloseAngle(b, p+2)
			}
		case c == '!':
			if p+3 < len(b) && b[p+2] == '-' && b[p+3] == '-' {
				s.pos = skipComment(b, p+4)
			} else { // a doctype or a bogus comment
				s.pos = untilCloseAngle(b, p+2)
			}
		case c == '?': // a bogus comment
			s.pos = untilCloseAngle(b, p+1)
		default: // the '<' is text
			s.pos = p + 1
		}
	}
}

// readTag reads the tag whose name starts at b[i] and returns the index just past its '>', or
// false if the input ends first. A start tag sets s.kind, s.attrs and s.raw.
func (s *tagScanner) readTag(i int, start bool) (int, bool) {
	b := s.b
	nameStart, nameEnd := i, 0
	for i++; ; i++ {
		if i >= len(b) {
			return 0, false
		}
		if c := b[i]; isSpace(c) {
			nameEnd = i
			i++
			break
		} else if c == '/' || c == '>' {
			nameEnd = i
			break
		}
	}
	save := false
	if start {
		name := b[nameStart:nameEnd]
		s.kind, s.raw = classifyTag(name), rawTextElement(name)
		if save = s.kind != tagOther; save {
			s.attrs = [numAttrs]tagAttr{}
		}
	}
	for i = skipSpace(b, i); ; i = skipSpace(b, i) {
		if i >= len(b) {
			return 0, false
		}
		if b[i] == '>' {
			return i + 1, true
		}
		// The attribute's name: '=' may be its first byte; a '/' there ends it empty.
		keyStart := i
		if b[i] != '/' {
			for i++; i < len(b); i++ {
				if c := b[i]; isSpace(c) || c == '/' || c == '>' || c == '=' {
					break
				}
			}
		}
		keyEnd := i
		// Its value, if any.
		val := tagAttr{start: i, end: i}
		if i = skipSpace(b, i); i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case '/':
			i++
		case '=':
			if i = skipSpace(b, i+1); i >= len(b) {
				return 0, false
			}
			switch q := b[i]; q {
			case '>':
			case '"', '\'':
				j := bytes.IndexByte(b[i+1:], q)
				if j < 0 {
					return 0, false
				}
				val = tagAttr{start: i + 1, end: i + 1 + j, quote: q}
				i += j + 2
			default:
				val.start = i
				for i++; ; i++ {
					if i >= len(b) {
						return 0, false
					}
					if c := b[i]; isSpace(c) {
						val.end = i
						i++
						break
					} else if c == '>' {
						val.end = i
						break
					}
				}
			}
		}
		if save {
			s.keep(b[keyStart:keyEnd], val)
		}
	}
}

// keep records val as the value of attribute key if ExtractLinks reads key and the tag had no
// attribute of that name before (the first of duplicates wins, as in HTML).
func (s *tagScanner) keep(key []byte, val tagAttr) {
	for k, name := range attrNames {
		if !s.attrs[k].ok && asciiLowerEqual(key, name) {
			val.ok = true
			s.attrs[k] = val
			return
		}
	}
}

// attr returns the value of attribute k of the current tag, with character references
// decoded and newlines normalized as the Tokenizer's TagAttr returns it, and whether the
// tag has it. The result may share memory with the document.
func (s *tagScanner) attr(k int) ([]byte, bool) {
	a := s.attrs[k]
	if !a.ok {
		return nil, false
	}
	return attrValue(s.b[a.start:a.end], a.quote), true
}

// classifyTag returns the kind of a tag from its name as written.
func classifyTag(name []byte) tagKind {
	switch len(name) {
	case 1:
		if name[0]|0x20 == 'a' {
			return tagA
		}
	case 4:
		switch {
		case asciiLowerEqual(name, "area"):
			return tagA
		case asciiLowerEqual(name, "link"):
			return tagLink
		case asciiLowerEqual(name, "meta"):
			return tagMeta
		case asciiLowerEqual(name, "base"):
			return tagBase
		}
	case 5:
		if asciiLowerEqual(name, "frame") {
			return tagFrame
		}
	case 6:
		if asciiLowerEqual(name, "iframe") {
			return tagFrame
		}
	}
	return tagOther
}

// rawTextElements are the elements whose content the Tokenizer reads as raw text.
var rawTextElements = []string{"iframe", "noembed", "noframes", "noscript", "plaintext", "script", "style", "textarea", "title", "xmp"}

// rawTextElement returns the lowercased name of a raw-text element, or "".
func rawTextElement(name []byte) string {
	for _, e := range rawTextElements {
		if asciiLowerEqual(name, e) {
			return e
		}
	}
	return ""
}

// skipRawText returns the index of the "</tag" that ends the raw text starting at b[i], or
// len(b).
func skipRawText(b []byte, i int, tag string) int {
	for {
		j := bytes.IndexByte(b[i:], '<')
		if j < 0 {
			return len(b)
		}
		p := i + j
		if p+1 < len(b) && b[p+1] == '/' {
			if end, ok := rawEndTag(b, p+2, tag); ok {
				return p
			} else if end >= len(b) {
				return len(b)
			}
		}
		i = p + 1
	}
}

// rawEndTag reports whether b[i:] goes on with tag (in any ASCII case) and then a space, '/'
// or '>': the rest of an end tag closing raw text, "</" already read. If not, it returns the
// index of the first byte that did not match (len(b) if the input ended).
func rawEndTag(b []byte, i int, tag string) (int, bool) {
	for k := 0; k < len(tag); k++ {
		if i+k >= len(b) {
			return len(b), false
		}
		if c := b[i+k]; c != tag[k] && c != tag[k]-('a'-'A') {
			return i + k, false
		}
	}
	i += len(tag)
	if i >= len(b) {
		return len(b), false
	}
	switch b[i] {
	case ' ', '\n', '\r', '\t', '\f', '/', '>':
		return i, true
	}
	return i, false
}

// skipScript returns the index of the "</script" that ends the script data starting at b[i],
// or len(b), by the script data states (escaped and double escaped) of the HTML tokenizer.
func skipScript(b []byte, i int) int {
	const (
		data = iota
		lessThan
		endTagOpen
		escapeStart
		escapeStartDash
		escaped
		escapedDash
		escapedDashDash
		escapedLessThan
		escapedEndTagOpen
		doubleEscapeStart
		doubleEscaped
		doubleEscapedDash
		doubleEscapedDashDash
		doubleEscapedLessThan
		doubleEscapeEnd
	)
	n := len(b)
	for state := data; ; {
		switch state {
		case data:
			j := bytes.IndexByte(b[i:], '<')
			if j < 0 {
				return n
			}
			i += j + 1
			state = lessThan
			continue
		case endTagOpen, escapedEndTagOpen, doubleEscapeEnd:
			end, ok := rawEndTag(b, i, "script")
			switch {
			case ok && state == doubleEscapeEnd:
				i = end + 1
				state = escaped
			case ok:
				return i - 2
			case end >= n:
				return n
			default: // back to the byte that did not match
				i = end
				switch state {
				case endTagOpen:
					state = data
				case escapedEndTagOpen:
					state = escaped
				default:
					state = doubleEscaped
				}
			}
			continue
		case doubleEscapeStart:
			i-- // back to the letter
			matched := true
			for k := 0; k < len("script"); k++ {
				if i >= n {
					return n
				}
				c := b[i]
				i++
				if c != "script"[k] && c != "SCRIPT"[k] {
					i--
					matched = false
					break
				}
			}
			if !matched {
				state = escaped
				continue
			}
			if i >= n {
				return n
			}
			switch b[i] {
			case ' ', '\n', '\r', '\t', '\f', '/', '>':
				i++
				state = doubleEscaped
			default:
				state = escaped
			}
			continue
		}
		if i >= n {
			return n
		}
		c := b[i]
		i++
		switch state {
		case lessThan:
			switch c {
			case '/':
				state = endTagOpen
			case '!':
				state = escapeStart
			default:
				i--
				state = data
			}
		case escapeStart, escapeStartDash:
			switch {
			case c == '-' && state == escapeStart:
				state = escapeStartDash
			case c == '-':
				state = escapedDashDash
			default:
				i--
				state = data
			}
		case escaped, escapedDash, escapedDashDash:
			switch {
			case c == '-' && state == escaped:
				state = escapedDash
			case c == '-':
				state = escapedDashDash
			case c == '<':
				state = escapedLessThan
			case c == '>' && state == escapedDashDash:
				state = data
			default:
				state = escaped
			}
		case escapedLessThan:
			switch {
			case c == '/':
				state = escapedEndTagOpen
			case isASCIILetter(c):
				state = doubleEscapeStart
			default:
				i--
				state = data
			}
		case doubleEscaped, doubleEscapedDash, doubleEscapedDashDash:
			switch {
			case c == '-' && state == doubleEscaped:
				state = doubleEscapedDash
			case c == '-':
				state = doubleEscapedDashDash
			case c == '<':
				state = doubleEscapedLessThan
			case c == '>' && state == doubleEscapedDashDash:
				state = data
			default:
				state = doubleEscaped
			}
		case doubleEscapedLessThan:
			if c == '/' {
				state = doubleEscapeEnd
			} else {
				i--
				state = doubleEscaped
			}
		}
	}
}

// skipComment returns the index just past the end of the comment whose text starts at b[i]
// ("<!--" read): "-->" or "--!>", or a '>' right after "<!--" and any dashes; len(b) if none.
func skipComment(b []byte, start int) int {
	for i := start; ; {
		j := bytes.IndexByte(b[i:], '>')
		if j < 0 {
			return len(b)
		}
		p := i + j
		if text := b[start:p]; len(bytes.TrimLeft(text, "-")) == 0 || bytes.HasSuffix(text, []byte("--")) ||
			bytes.HasSuffix(text, []byte("--!")) {
			return p + 1
		}
		i = p + 1
	}
}

// untilCloseAngle returns the index just past the first '>' at or after b[i], or len(b).
func untilCloseAngle(b []byte, i int) int {
	if j := bytes.IndexByte(b[i:], '>'); j >= 0 {
		return i + j + 1
	}
	return len(b)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// isSpace reports whether c is HTML's white space (U+000D included, as the Tokenizer reads it).
func isSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f'
}

func isASCIILetter(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// asciiLowerEqual reports whether b, its ASCII letters lowercased, equals the lowercase s.
func asciiLowerEqual(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// attrValue returns an attribute's value as written (between quote, if not 0) as the
// Tokenizer's TagAttr returns it: NUL bytes replaced, "\r\n" and "\r" read as "\n", character
// references decoded by the rules for attributes. Values without '&', '\r' or NUL are returned
// as they are, "&amp;" is decoded here; the Tokenizer itself decodes any other value, from a
// tag holding just that attribute.
func attrValue(v []byte, quote byte) []byte {
	amps := bytes.Count(v, []byte("&"))
	switch {
	case bytes.IndexByte(v, '\r') >= 0 || bytes.IndexByte(v, 0) >= 0:
	case amps == 0:
		return v
	case amps == bytes.Count(v, []byte("&amp;")):
		return bytes.ReplaceAll(v, []byte("&amp;"), []byte("&"))
	}
	tag := make([]byte, 0, len(v)+8)
	tag = append(tag, "<a v="...)
	if quote != 0 {
		tag = append(tag, quote)
	}
	tag = append(tag, v...)
	if quote != 0 {
		tag = append(tag, quote)
	}
	tag = append(tag, '>')
	z := html.NewTokenizer(bytes.NewReader(tag))
	z.Next()
	_, val, _ := z.TagAttr()
	return val
}
