package termsafe

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"plain text, ünïcödé, 日本", "plain text, ünïcödé, 日本"},
		{"HTTP/1.1 500 \x1b]0;PWNED\x07\x1b[2J", `HTTP/1.1 500 \x1b]0;PWNED\x07\x1b[2J`},
		{"a\nb\tc\rd\x7f", `a\x0ab\x09c\x0dd\x7f`},
		{"csi \u009b2J", `csi \u009b2J`},
		{"evil\u202etxt.exe \u2066x\u2069", `evil\u202etxt.exe \u2066x\u2069`},
		{"line\u2028sep", `line\u2028sep`},
		{"bad \xff\xfe utf8", `bad \xff\xfe utf8`},
		{`back\slash`, `back\slash`},
	} {
		if got := Escape(tc.in); got != tc.want {
			t.Errorf("Escape(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzEscape: whatever the input, the output is UTF-8 with no control, bidi or separator
// character, and text with nothing to escape comes back unchanged.
func FuzzEscape(f *testing.F) {
	f.Add("HTTP/1.1 500 \x1b]0;PWNED\x07\x1b[2J")
	f.Add("\xff\u202e\u009b")
	f.Fuzz(func(t *testing.T, s string) {
		out := Escape(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Escape(%q) = %q: not UTF-8", s, out)
		}
		for _, r := range out {
			if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == 0x2028 || r == 0x2029 {
				t.Fatalf("Escape(%q) = %q holds %U", s, out, r)
			}
		}
		if !strings.Contains(out, `\`) && out != s {
			t.Fatalf("Escape(%q) = %q changed text with nothing to escape", s, out)
		}
	})
}
