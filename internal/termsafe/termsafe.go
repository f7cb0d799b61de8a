package termsafe

import (
	"strconv"
	"unicode/utf8"
)

// Escape returns s with every character unsafe to show escaped (see the package doc). It
// returns s itself when there is nothing to escape.
func Escape(s string) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if unsafe(r, n) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	b := make([]byte, 0, len(s)+16)
	b = append(b, s[:i]...)
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1, r < utf8.RuneSelf && unsafe(r, n):
			b = append(b, `\x`...)
			b = appendHex(b, uint64(s[i]), 2)
		case unsafe(r, n):
			b = append(b, `\u`...)
			b = appendHex(b, uint64(r), 4)
		default:
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return string(b)
}

// unsafe reports whether the rune r, n bytes long in its text, must be escaped.
func unsafe(r rune, n int) bool {
	switch {
	case r == utf8.RuneError && n <= 1: // not UTF-8
		return true
	case r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f: // C0, DEL, C1
		return true
	case r == 0x061c || r == 0x200e || r == 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069: // bidi
		return true
	case r == 0x2028 || r == 0x2029: // line and paragraph separators
		return true
	}
	return false
}

// appendHex appends v in lowercase hex, zero-padded to width digits.
func appendHex(b []byte, v uint64, width int) []byte {
	h := strconv.FormatUint(v, 16)
	for range width - len(h) {
		b = append(b, '0')
	}
	return append(b, h...)
}
