// Package cssref finds the URL references of a stylesheet: url(…) anywhere, the string of an
// @import, and the strings of image-set(…). It tokenizes by CSS Syntax Level 3 with
// github.com/tdewolff/parse/v2/css, so references inside comments or strings that merely look
// like url( are not taken, and a reference is reported with the exact bytes of the token that
// holds it, for a rewriter to replace.
package cssref

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tdewolff/parse/v2"
	"github.com/tdewolff/parse/v2/css"
)

// Ref is one URL reference of a stylesheet.
type Ref struct {
	URL string // the reference as the stylesheet means it: quotes removed, escapes decoded
	// Start and End delimit the token that holds it in the stylesheet: a whole url(…) when
	// Func is set, else a quoted string.
	Start, End int
	Func       bool
}

// Refs returns the references of stylesheet b in document order. It never fails: what does not
// tokenize as a reference is skipped, as a browser skips it. It does not write to b.
func Refs(b []byte) []Ref {
	var out []Ref
	// The lexer writes a NUL after its input when the slice has room for it: with the capacity
	// cut to the length it copies instead, so b (and whatever shares its array) is never written.
	lx := css.NewLexer(parse.NewInputBytes(b[:len(b):len(b)]))
	pos := 0
	// expect says what a string token means at this point: an @import's target, or a
	// candidate of image-set(); depth counts the open blocks and functions since image-set(.
	importing, imageSet, depth := false, false, 0
	for {
		tt, data := lx.Next()
		if tt == css.ErrorToken {
			return out
		}
		start := pos
		pos += len(data)
		switch tt {
		case css.WhitespaceToken, css.CommentToken:
			continue
		case css.URLToken:
			if u, ok := urlTokenValue(data); ok {
				out = append(out, Ref{URL: u, Start: start, End: pos, Func: true})
			}
		case css.StringToken:
			if importing || imageSet && depth == 1 {
				out = append(out, Ref{URL: unescape(data[1 : len(data)-closing(data)]), Start: start, End: pos})
			}
		case css.AtKeywordToken:
			importing = parse.EqualFold(data, []byte("@import"))
			continue
		case css.FunctionToken:
			switch {
			case imageSet:
				depth++
			case parse.EqualFold(data, []byte("image-set(")) || parse.EqualFold(data, []byte("-webkit-image-set(")):
				imageSet, depth = true, 1
			}
		case css.LeftParenthesisToken, css.LeftBracketToken, css.LeftBraceToken:
			if imageSet {
				depth++
			}
		case css.RightParenthesisToken, css.RightBracketToken, css.RightBraceToken:
			if imageSet {
				if depth--; depth == 0 {
					imageSet = false
				}
			}
		}
		importing = false
	}
}

// closing returns 1 if the quoted string data ends with its closing quote, else 0 (a string
// cut by the end of the input).
func closing(data []byte) int {
	if len(data) >= 2 && data[len(data)-1] == data[0] {
		return 1
	}
	return 0
}

// urlTokenValue returns the URL of a url(…) token: what is between the parentheses, spaces
// trimmed, quotes removed, escapes decoded.
func urlTokenValue(data []byte) (string, bool) {
	i := bytes.IndexByte(data, '(')
	if i < 0 {
		return "", false
	}
	v := bytes.TrimSuffix(data[i+1:], []byte(")"))
	v = bytes.Trim(v, " \t\n\r\f")
	if len(v) > 0 && (v[0] == '"' || v[0] == '\'') {
		v = v[1 : len(v)-closing(v)]
	}
	return unescape(v), true
}

// unescape decodes CSS escapes: a backslash and 1 to 6 hex digits (and one whitespace after
// them) is that code point (U+FFFD for 0, surrogates and beyond U+10FFFF); a backslash before a
// newline is dropped; before any other character, it is that character.
func unescape(b []byte) string {
	if bytes.IndexByte(b, '\\') < 0 {
		return string(b)
	}
	var sb strings.Builder
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c != '\\' {
			sb.WriteByte(c)
			continue
		}
		if i+1 >= len(b) {
			break
		}
		j := i + 1
		for j < len(b) && j < i+7 && isHex(b[j]) {
			j++
		}
		if j > i+1 {
			n, _ := strconv.ParseUint(string(b[i+1:j]), 16, 32)
			r := rune(n)
			if r == 0 || r > utf8.MaxRune || (r >= 0xD800 && r <= 0xDFFF) {
				r = utf8.RuneError
			}
			sb.WriteRune(r)
			if j < len(b) && (b[j] == ' ' || b[j] == '\t' || b[j] == '\n' || b[j] == '\f') {
				j++
			} else if j+1 < len(b) && b[j] == '\r' && b[j+1] == '\n' {
				j += 2
			} else if j < len(b) && b[j] == '\r' {
				j++
			}
			i = j - 1
			continue
		}
		switch b[i+1] {
		case '\n', '\f':
		case '\r':
			if i+2 < len(b) && b[i+2] == '\n' {
				i++
			}
		default:
			sb.WriteByte(b[i+1])
		}
		i++
	}
	return sb.String()
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }
