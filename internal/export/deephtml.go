package export

import (
	"bytes"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// flattenDepths are the depths parseHTML flattens a page to when the parser refuses it
// (golang.org/x/net/html rejects elements nested deeper than 512), tried in order: the
// parser itself opens elements a page does not write (html, body, tbody, formatting elements
// it reconstructs), so the first may still be refused.
var flattenDepths = [...]int{256, 32}

// flattenDeep returns b (UTF-8 HTML) with every start tag that would open an element deeper
// than limit written elements left out, with its end tag; the text, comments and void or
// self-closing elements inside stay, so the text of a too deeply nested element belongs to its
// ancestor at depth limit. The content of a left-out raw-text element (script, style, title,
// textarea, ...) is left out with it, since outside that element it would read as markup.
// Depth counts the elements the page opens, a matching end tag closing the nearest open one
// of its name (and those opened inside it); past maxTracked open elements, an end tag closes
// the innermost.
func flattenDeep(b []byte, limit int) []byte {
	type open struct {
		name    string
		dropped bool
	}
	var (
		out   bytes.Buffer
		stack []open
		kept  int                // elements on stack that were written
		count = map[string]int{} // elements on stack by name, so that an end tag matching none costs nothing
		skip  string             // a dropped raw-text element whose content is being left out
		// untracked counts the elements open past maxTracked on the stack (all left out); an
		// end tag closes the innermost of them, as it does in a page that nests correctly.
		untracked int
	)
	out.Grow(len(b))
	z := html.NewTokenizer(bytes.NewReader(b))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			return out.Bytes() // io.EOF: a byte slice has no other error
		}
		raw := z.Raw()
		switch tt {
		case html.StartTagToken:
			name, _ := z.TagName()
			a := atom.Lookup(name)
			if skip != "" || voidElements[a] {
				if skip == "" {
					out.Write(raw)
				}
				continue
			}
			dropped := kept >= limit
			if len(stack) >= maxTracked {
				untracked++
				if rawTextElements[a] {
					skip = string(name)
				}
				continue
			}
			stack = append(stack, open{name: string(name), dropped: dropped})
			count[string(name)]++
			if dropped {
				if rawTextElements[a] {
					skip = string(name)
				}
				continue
			}
			kept++
			out.Write(raw)
		case html.EndTagToken:
			name, _ := z.TagName()
			if skip != "" {
				if string(name) != skip {
					continue
				}
				skip = ""
			}
			if untracked > 0 {
				untracked--
				continue
			}
			if count[string(name)] == 0 { // closes nothing the page opened: the parser decides
				out.Write(raw)
				continue
			}
			i := len(stack) - 1
			for stack[i].name != string(name) { // each element is popped once: linear in all
				i--
			}
			dropped := stack[i].dropped
			for _, o := range stack[i:] {
				count[o.name]--
				if !o.dropped {
					kept--
				}
			}
			stack = stack[:i]
			if !dropped {
				out.Write(raw)
			}
		default: // text, comments, doctype, self-closing tags
			if skip == "" {
				out.Write(raw)
			}
		}
	}
}

// maxTracked bounds the open elements flattenDeep keeps on its stack, so that a page of
// millions of nested tags costs a bounded stack.
const maxTracked = 4096

// voidElements never have content: a start tag of one opens nothing.
var voidElements = map[atom.Atom]bool{atom.Area: true, atom.Base: true, atom.Br: true,
	atom.Col: true, atom.Embed: true, atom.Hr: true, atom.Img: true, atom.Input: true,
	atom.Link: true, atom.Meta: true, atom.Param: true, atom.Source: true, atom.Track: true,
	atom.Wbr: true, atom.Keygen: true}

// rawTextElements are those whose content the tokenizer reads as text, not markup.
var rawTextElements = map[atom.Atom]bool{atom.Script: true, atom.Style: true,
	atom.Textarea: true, atom.Title: true, atom.Xmp: true, atom.Iframe: true,
	atom.Noembed: true, atom.Noframes: true, atom.Noscript: true, atom.Plaintext: true}
