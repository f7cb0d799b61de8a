package export

import (
	"fmt"
	"net/url"

	"github.com/crawl-project/crawl/internal/cssref"
)

// convertCSS returns the stylesheet b (found at base, written to the file at rel) with each
// url() and @import reference rewritten as rewriteURL says; every other byte is kept. A
// rewritten reference is written as url("…") or "…", escaped for CSS.
func (m *MirrorWriter) convertCSS(b []byte, base *url.URL, rel string) []byte {
	refs := cssref.Refs(b)
	if len(refs) == 0 {
		return b
	}
	out := make([]byte, 0, len(b)+len(b)/8)
	last := 0
	for _, r := range refs {
		nv := m.rewriteURL(r.URL, base, rel)
		if nv == r.URL {
			continue
		}
		out = append(out, b[last:r.Start]...)
		if r.Func {
			out = append(out, "url("...)
		}
		out = appendCSSString(out, nv)
		if r.Func {
			out = append(out, ')')
		}
		last = r.End
	}
	return append(out, b[last:]...)
}

// appendCSSString appends s as a double-quoted CSS string: '"', '\' and control characters
// are written as hex escapes followed by a space.
func appendCSSString(out []byte, s string) []byte {
	out = append(out, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' || c == '\\' || c < 0x20 || c == 0x7f {
			out = fmt.Appendf(out, "\\%x ", c)
			continue
		}
		out = append(out, c)
	}
	return append(out, '"')
}
