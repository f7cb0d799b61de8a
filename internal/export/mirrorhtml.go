package export

import (
	"bytes"
	"fmt"
	"html"
	"mime"
	"net/url"
	"path"
	"strings"

	xhtml "golang.org/x/net/html"

	"github.com/crawl-project/crawl/internal/urlnorm"
	"github.com/crawl-project/crawl/storage"
)

// urlAttrs lists, per element, the attributes holding one URL that a mirror rewrites.
var urlAttrs = map[string][]string{
	"a":      {"href"},
	"area":   {"href"},
	"link":   {"href"},
	"img":    {"src"},
	"script": {"src"},
	"iframe": {"src"},
	"frame":  {"src"},
	"embed":  {"src"},
	"source": {"src"},
	"track":  {"src"},
	"audio":  {"src"},
	"video":  {"src", "poster"},
	"input":  {"src"},
	"object": {"data"},
	"form":   {"action"},
	"body":   {"background"},
	"table":  {"background"},
	"td":     {"background"},
}

// srcsetTags are the elements whose srcset lists image candidates.
var srcsetTags = map[string]bool{"img": true, "source": true}

// convertHTML returns p's body with every http(s) URL in a link or requisite attribute, a
// style attribute or a <style> element made a relative path to its mirrored file (for the file
// at rel), or absolute when the URL is not mirrored. Everything else keeps its bytes: the body is split into tokens by
// golang.org/x/net/html's tokenizer and only the value of a rewritten attribute changes, and
// the new values are ASCII, so a page in another charset stays in it. A <base href> is
// honoured while resolving and then pointed at the file itself. When the response header
// named a charset the page does not declare, a <meta charset> is added after <head>, because a
// file read from disk has no header.
func (m *MirrorWriter) convertHTML(p *storage.Page, rel string) []byte {
	base, err := url.Parse(pageURL(p))
	if err != nil {
		return p.Body
	}
	pre := prescanHTML(p.Body)
	if pre.base != "" {
		if b, err := urlnorm.Resolve(base, pre.base); err == nil {
			base = b
		}
	}
	charset := ""
	if _, params, err := mime.ParseMediaType(p.Header.Get("Content-Type")); err == nil && !pre.hasCharset {
		charset = params["charset"]
	}
	out := make([]byte, 0, len(p.Body)+len(p.Body)/8)
	z := xhtml.NewTokenizer(bytes.NewReader(p.Body))
	inStyle := false // in the raw text of a <style> element
	for {
		tt := z.Next()
		raw := z.Raw()
		if tt == xhtml.ErrorToken {
			out = append(out, raw...)
			break
		}
		if tt == xhtml.TextToken && inStyle {
			out = append(out, m.convertCSS(raw, base, rel)...)
			continue
		}
		if tt != xhtml.StartTagToken && tt != xhtml.SelfClosingTagToken {
			inStyle = false
			out = append(out, raw...)
			continue
		}
		name, _ := z.TagName()
		tag := string(name)
		inStyle = tag == "style" && tt == xhtml.StartTagToken
		if charset != "" && tag != "html" && tag != "head" {
			out = fmt.Appendf(out, `<meta charset="%s">`, html.EscapeString(charset))
			charset = ""
		}
		out = m.rewriteTag(out, raw, tag, base, rel)
		if charset != "" && tag == "head" {
			out = fmt.Appendf(out, `<meta charset="%s">`, html.EscapeString(charset))
			charset = ""
		}
	}
	return out
}

// rewriteTag appends the start tag raw (of element tag) to out with its URL attributes
// rewritten.
func (m *MirrorWriter) rewriteTag(out, raw []byte, tag string, base *url.URL, rel string) []byte {
	names := urlAttrs[tag]
	if tag == "base" {
		names = []string{"href"}
	}
	if len(names) == 0 && !srcsetTags[tag] && !bytes.Contains(bytes.ToLower(raw), []byte("style")) {
		return append(out, raw...)
	}
	attrs := scanAttrs(raw)
	last := 0
	seen := map[string]bool{}
	for _, a := range attrs {
		if seen[a.name] || a.valStart < 0 {
			seen[a.name] = true
			continue
		}
		seen[a.name] = true
		val := html.UnescapeString(string(raw[a.valStart:a.valEnd]))
		var nv string
		switch {
		case tag == "base" && a.name == "href":
			nv = url.PathEscape(path.Base(rel))
		case a.name == "srcset" && srcsetTags[tag]:
			nv = rewriteSrcset(val, func(u string) string { return m.rewriteURL(u, base, rel) })
		case contains(names, a.name):
			nv = m.rewriteURL(val, base, rel)
		case a.name == "style":
			nv = string(m.convertCSS([]byte(val), base, rel))
		default:
			continue
		}
		if nv == val {
			continue
		}
		out = append(out, raw[last:a.spanStart]...)
		out = append(out, '"')
		out = append(out, html.EscapeString(nv)...)
		out = append(out, '"')
		last = a.spanEnd
	}
	return append(out, raw[last:]...)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// rewriteURL is the value a mirrored file at rel holds for the link ref found in it: the
// relative path of the mirrored target, the absolute URL when the target is not mirrored, and
// ref unchanged when it is not an http(s) URL or only a fragment. A fragment is kept.
func (m *MirrorWriter) rewriteURL(ref string, base *url.URL, rel string) string {
	ref = strings.TrimSpace(ref)
	if ref == "" || strings.HasPrefix(ref, "#") {
		return ref
	}
	noFrag, frag, hasFrag := strings.Cut(ref, "#")
	u, err := urlnorm.Resolve(base, noFrag)
	if err != nil {
		return ref
	}
	u.User = nil
	out := m.link(rel, u.String())
	if hasFrag {
		out += "#" + frag
	}
	return out
}

// rewriteSrcset rewrites each image candidate URL of a srcset value with fn, keeping the
// descriptors, following the HTML standard's parsing of the list.
func rewriteSrcset(v string, fn func(string) string) string {
	var b strings.Builder
	i := 0
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }
	for i < len(v) {
		j := i
		for j < len(v) && (isSpace(v[j]) || v[j] == ',') {
			j++
		}
		b.WriteString(v[i:j])
		if j == len(v) {
			break
		}
		k := j
		for k < len(v) && !isSpace(v[k]) {
			k++
		}
		u := v[j:k]
		trail := ""
		for strings.HasSuffix(u, ",") {
			u, trail = u[:len(u)-1], trail+","
		}
		b.WriteString(fn(u))
		b.WriteString(trail)
		i = k
		if trail == "" {
			// Descriptors run to the next comma outside parentheses.
			d := k
			depth := 0
			for d < len(v) && (v[d] != ',' || depth > 0) {
				switch v[d] {
				case '(':
					depth++
				case ')':
					depth = max(depth-1, 0)
				}
				d++
			}
			b.WriteString(v[k:d])
			i = d
		}
	}
	return b.String()
}

// rawAttr is one attribute of a raw start tag: its lowercased name and, when it has a value,
// the byte span of the value (valStart:valEnd, without quotes) and of the value with its
// quotes (spanStart:spanEnd). valStart is -1 for an attribute without a value.
type rawAttr struct {
	name                                 string
	valStart, valEnd, spanStart, spanEnd int
	nameStart, end                       int // the attribute's span in raw, name to value
}

// scanAttrs splits the raw text of a start tag into attributes by the rules of the HTML
// standard's tokenizer (the states after the tag name), as golang.org/x/net/html does.
func scanAttrs(raw []byte) []rawAttr {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }
	i := 1 // past '<'
	for i < len(raw) && !isSpace(raw[i]) && raw[i] != '/' && raw[i] != '>' {
		i++
	}
	var attrs []rawAttr
	for i < len(raw) {
		for i < len(raw) && (isSpace(raw[i]) || raw[i] == '/') {
			i++
		}
		if i >= len(raw) || raw[i] == '>' {
			break
		}
		ns := i
		i++ // the first character is part of the name, even '='
		for i < len(raw) && !isSpace(raw[i]) && raw[i] != '/' && raw[i] != '>' && raw[i] != '=' {
			i++
		}
		a := rawAttr{name: strings.ToLower(string(raw[ns:i])), valStart: -1, nameStart: ns, end: i}
		j := i
		for j < len(raw) && isSpace(raw[j]) {
			j++
		}
		if j < len(raw) && raw[j] == '=' {
			j++
			for j < len(raw) && isSpace(raw[j]) {
				j++
			}
			a.spanStart = j
			switch {
			case j < len(raw) && (raw[j] == '"' || raw[j] == '\''):
				q := raw[j]
				k := bytes.IndexByte(raw[j+1:], q)
				if k < 0 {
					k = len(raw) - j - 1
					a.valStart, a.valEnd, a.spanEnd = j+1, j+1+k, j+1+k
				} else {
					a.valStart, a.valEnd, a.spanEnd = j+1, j+1+k, j+2+k
				}
			default:
				k := j
				for k < len(raw) && !isSpace(raw[k]) && raw[k] != '>' {
					k++
				}
				a.valStart, a.valEnd, a.spanEnd = j, k, k
			}
			i, a.end = a.spanEnd, a.spanEnd
		}
		attrs = append(attrs, a)
	}
	return attrs
}

// htmlFacts is what convertHTML needs to know before it rewrites: the first <base href> and
// whether the page declares its charset itself.
type htmlFacts struct {
	base       string
	hasCharset bool
}

func prescanHTML(body []byte) htmlFacts {
	var f htmlFacts
	baseSeen := false
	z := xhtml.NewTokenizer(bytes.NewReader(body))
	for {
		tt := z.Next()
		if tt == xhtml.ErrorToken {
			return f
		}
		if tt != xhtml.StartTagToken && tt != xhtml.SelfClosingTagToken {
			continue
		}
		name, hasAttr := z.TagName()
		if !hasAttr {
			continue
		}
		switch string(name) {
		case "base":
			for {
				k, v, more := z.TagAttr()
				if string(k) == "href" && !baseSeen {
					f.base, baseSeen = string(v), true
				}
				if !more {
					break
				}
			}
		case "meta":
			for {
				k, v, more := z.TagAttr()
				if string(k) == "charset" || string(k) == "http-equiv" && strings.EqualFold(string(v), "content-type") {
					f.hasCharset = true
				}
				if !more {
					break
				}
			}
		}
	}
}

// refreshPage is the file a mirror writes for a redirect: it sends a browser to target (a
// relative path in the mirror, or an absolute URL).
func refreshPage(target string) []byte {
	t := html.EscapeString(target)
	return fmt.Appendf(nil, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"+
		"<meta http-equiv=\"refresh\" content=\"0; url=%s\"><title>Redirect</title></head>\n"+
		"<body><a href=\"%s\">%s</a></body></html>\n", t, t, t)
}
