package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/andybalholm/cascadia"
	"golang.org/x/net/html"
)

// Field is one value extracted from each HTML page: the elements a CSS selector matches, read
// as their text or as one attribute. A Field is immutable and safe for concurrent use.
type Field struct {
	Name     string // the key in "fields" (JSON Lines) and the column (CSV)
	Selector string // the CSS selector, as given
	Attr     string // "": the matched element's text; else the value of this attribute
	All      bool   // every match, as an array; else the first match only
	match    cascadia.Matcher
}

// ParseFields parses --field specs, in order: NAME=SELECTOR for the first match, NAME[]=SELECTOR
// for every match, each with an optional @ATTR at the end of SELECTOR to read that attribute
// instead of the text. Errors wrap ErrBadField and name the spec.
func ParseFields(specs []string) ([]Field, error) {
	fields := make([]Field, 0, len(specs))
	seen := make(map[string]bool, len(specs))
	for _, spec := range specs {
		f, err := parseField(spec)
		if err != nil {
			return nil, err
		}
		if seen[f.Name] {
			return nil, fmt.Errorf("%w: %q: the name %q is given twice", ErrBadField, spec, f.Name)
		}
		seen[f.Name] = true
		fields = append(fields, f)
	}
	return fields, nil
}

func parseField(spec string) (Field, error) {
	name, sel, ok := strings.Cut(spec, "=")
	name, sel = strings.TrimSpace(name), strings.TrimSpace(sel)
	if !ok || name == "" || sel == "" {
		return Field{}, fmt.Errorf("%w: %q: want NAME=SELECTOR or NAME[]=SELECTOR (with SELECTOR@ATTR for an attribute)", ErrBadField, spec)
	}
	f := Field{}
	if n, all := strings.CutSuffix(name, "[]"); all {
		name, f.All = strings.TrimSpace(n), true
	}
	if name == "" || strings.ContainsAny(name, "[]") || !isPrintable(name) {
		return Field{}, fmt.Errorf("%w: %q: bad name %q", ErrBadField, spec, name)
	}
	f.Name = name
	if i := strings.LastIndexByte(sel, '@'); i >= 0 && isAttrName(sel[i+1:]) {
		sel, f.Attr = strings.TrimSpace(sel[:i]), strings.ToLower(sel[i+1:])
		if sel == "" {
			return Field{}, fmt.Errorf("%w: %q: no selector before @%s", ErrBadField, spec, f.Attr)
		}
	}
	m, err := cascadia.ParseGroup(sel)
	if err != nil {
		return Field{}, fmt.Errorf("%w: %q: selector %q: %v", ErrBadField, spec, sel, err)
	}
	f.Selector, f.match = sel, m
	return f, nil
}

// isAttrName reports whether s can be an HTML attribute name after "@" (letters, digits, '-',
// '_', ':', '.'; not starting with a digit, '-' or '.'), so that an '@' inside a selector's
// quoted value is not taken for one.
func isAttrName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '_', r == ':':
		case i > 0 && (r >= '0' && r <= '9' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return true
}

func isPrintable(s string) bool {
	for _, r := range s {
		if r < ' ' || r == 0x7f {
			return false
		}
	}
	return true
}

// value returns f's value in the document under root: a []string of every match (never nil)
// if f.All, else a *string of the first match, nil if there is none. Text is every text node
// under the element, ASCII whitespace collapsed; with Attr, only elements that carry the
// attribute count, and its value is taken as written (made valid UTF-8).
func (f *Field) value(root *html.Node) any {
	var m cascadia.Matcher = f.match
	if f.Attr != "" {
		m = withAttr{m, f.Attr}
	}
	read := func(n *html.Node) string {
		if f.Attr != "" {
			v, _ := attr(n, f.Attr)
			return strings.ToValidUTF8(v, "\uFFFD")
		}
		return collapse(nodeText(n))
	}
	if !f.All {
		n := cascadia.Query(root, m)
		if n == nil {
			return (*string)(nil)
		}
		s := read(n)
		return &s
	}
	nodes := cascadia.QueryAll(root, m)
	vals := make([]string, len(nodes))
	for i, n := range nodes {
		vals[i] = read(n)
	}
	return vals
}

// withAttr matches the elements m matches that carry the attribute key.
type withAttr struct {
	m   cascadia.Matcher
	key string
}

func (w withAttr) Match(n *html.Node) bool {
	if !w.m.Match(n) {
		return false
	}
	_, ok := attr(n, w.key)
	return ok
}

func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Namespace == "" && a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

// nodeText is the text of every text node under n, in document order (goquery's Text).
func nodeText(n *html.Node) string {
	var sb strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			sb.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return sb.String()
}

// fieldValues is the "fields" object of a JSON line: the fields' values in the order of the
// fields (a Go map would sort them).
type fieldValues struct {
	fields []Field
	vals   []any
}

// extractFields returns the values of fields in the document under root (nil: the page did
// not parse, so every field is absent: null, or [] for an array).
func extractFields(fields []Field, root *html.Node) fieldValues {
	fv := fieldValues{fields: fields, vals: make([]any, len(fields))}
	for i := range fields {
		switch {
		case root != nil:
			fv.vals[i] = fields[i].value(root)
		case fields[i].All:
			fv.vals[i] = []string{}
		default:
			fv.vals[i] = (*string)(nil)
		}
	}
	return fv
}

func (fv fieldValues) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range fv.fields {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := writeJSON(&b, f.Name); err != nil {
			return nil, err
		}
		b.WriteByte(':')
		if err := writeJSON(&b, fv.vals[i]); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// writeJSON appends v as JSON without escaping <, > and & (as the lines' encoder does).
func writeJSON(b *bytes.Buffer, v any) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // Encode's newline
	return nil
}

// cells returns the values as CSV cells: a single value's text ("" if nothing matched), an
// array as JSON text (["a","b"]), so that a cell always reads back unambiguously.
func (fv fieldValues) cells() ([]string, error) {
	out := make([]string, len(fv.vals))
	for i, v := range fv.vals {
		switch v := v.(type) {
		case *string:
			if v != nil {
				out[i] = *v
			}
		case []string:
			var b bytes.Buffer
			if err := writeJSON(&b, v); err != nil {
				return nil, err
			}
			out[i] = b.String()
		}
	}
	return out, nil
}
