package simweb

import (
	"bytes"
	"fmt"
	"html"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// linkForm is how an href to a page on the same host is written.
type linkForm uint8

const (
	formBare     linkForm = iota // "p12", "../p12"
	formDot                      // "./p12", "../p12"
	formRoot                     // "/p12"
	formAbsolute                 // "http://127.0.0.1:PORT/p12" (always used across hosts)
	numForms
)

// extrasPerPrefix is how many pages exist under each Disallow prefix.
const extrasPerPrefix = 3

type link struct {
	host, page int // target
	form       linkForm
	frag       string // "" or "#..."
}

type page struct {
	path  string
	links []link
	text  []string // paragraphs, until rendered; never kept in a lazy web
	body  []byte   // rendered once the base URLs are known; nil in a lazy web

	// textFrom is the generator's state just before text was drawn, and textSize its size, so
	// that a lazy web (Options.VirtualHosts) draws the same text again for each request.
	textFrom rand.PCG
	textSize int
}

// site is the link graph of one host: ordinary pages 0..normal-1 ("/", "/p1", …) followed by
// the pages under Disallow prefixes.
type site struct {
	pages  []page
	byPath map[string]int
	normal int
}

// pagePath returns the path of ordinary page i.
func pagePath(i int) string {
	if i == 0 {
		return "/"
	}
	return "/p" + strconv.Itoa(i)
}

// buildSites draws the link graph and text of every host from seed. A lazy web keeps no text:
// renderPage draws it again from each page's textFrom.
func buildSites(specs []HostSpec, seed int64, lazy bool) []site {
	index := make(map[string]int, len(specs))
	for i, s := range specs {
		index[s.Name] = i
	}
	sites := make([]site, len(specs))
	for hi := range specs {
		sites[hi] = buildSite(specs, hi, index, rand.NewPCG(uint64(seed), uint64(hi)), lazy)
	}
	return sites
}

func buildSite(specs []HostSpec, hi int, index map[string]int, src *rand.PCG, lazy bool) site {
	rng := rand.New(src)
	spec := &specs[hi]
	n := spec.Pages
	st := site{byPath: make(map[string]int), normal: n}
	add := func(p string) {
		st.byPath[p] = len(st.pages)
		st.pages = append(st.pages, page{path: p})
	}
	for i := range n {
		add(pagePath(i))
	}
	var extraStart []int // first extra page of each prefix group
	for _, prefix := range spec.Disallow {
		dir := strings.TrimSuffix(prefix, "/")
		first := -1
		for k := 1; k <= extrasPerPrefix; k++ {
			p := dir + "/x" + strconv.Itoa(k)
			if _, dup := st.byPath[p]; dup {
				continue
			}
			if first < 0 {
				first = len(st.pages)
			}
			add(p)
		}
		if first >= 0 {
			extraStart = append(extraStart, first)
		}
	}

	self := func(p int) link {
		return link{host: hi, page: p, form: linkForm(rng.IntN(int(numForms)))}
	}
	for i := range n {
		var ls []link
		if i > 0 {
			ls = append(ls, link{host: hi, page: 0, form: linkForm(rng.IntN(int(formAbsolute)))})
		}
		for _, c := range []int{2*i + 1, 2*i + 2} {
			if c < n {
				ls = append(ls, self(c))
			}
		}
		if i > 0 {
			ls = append(ls, self((i-1)/2))
		}
		for range 2 {
			ls = append(ls, self(rng.IntN(n)))
		}
		if len(spec.CrossLinks) > 0 {
			if i == 0 {
				for _, name := range spec.CrossLinks {
					ls = append(ls, link{host: index[name], page: 0, form: formAbsolute})
				}
			} else if rng.Float64() < 0.1 {
				t := index[spec.CrossLinks[rng.IntN(len(spec.CrossLinks))]]
				ls = append(ls, link{host: t, page: rng.IntN(specs[t].Pages), form: formAbsolute})
			}
		}
		if i == 0 {
			for _, e := range extraStart {
				ls = append(ls, self(e))
			}
		}
		st.pages[i].links = ls
	}
	// Every page under a Disallow prefix is linked from two random ordinary pages and links on.
	for e := n; e < len(st.pages); e++ {
		for range 2 {
			src := rng.IntN(n)
			st.pages[src].links = append(st.pages[src].links, self(e))
		}
		ls := []link{{host: hi, page: 0, form: formRoot}, self(rng.IntN(n)), self(rng.IntN(n))}
		if e+1 < len(st.pages) {
			ls = append(ls, self(e+1))
		}
		st.pages[e].links = ls
	}
	// Fragments on some links, and one repeated link per page in another form.
	for i := range st.pages {
		ls := st.pages[i].links
		for j := range ls {
			if rng.Float64() < 0.15 {
				ls[j].frag = "#s" + strconv.Itoa(rng.IntN(5))
			}
		}
		if len(ls) > 0 {
			d := ls[rng.IntN(len(ls))]
			if d.host == hi {
				d.form = (d.form + 1 + linkForm(rng.IntN(int(numForms)-1))) % numForms
			}
			ls = append(ls, d)
		}
		rng.Shuffle(len(ls), func(a, b int) { ls[a], ls[b] = ls[b], ls[a] })
		st.pages[i].links = ls
		p := &st.pages[i]
		p.textSize = 1000 + rng.IntN(3000) // drawn even when TextSize is set: later draws follow it
		if spec.TextSize > 0 {
			p.textSize = spec.TextSize
		}
		p.textFrom = *src
		if text := paragraphs(rng, p.textSize); !lazy { // drawn either way: later draws follow it
			p.text = text
		}
	}
	return st
}

var words = strings.Fields(`the a crawler polite server host request page link token bucket rate
limit retry after seconds window queue worker latency robots path archive index frontier budget
fetch store record header status body text simple steady careful gentle quick slow measured
distributed small large open closed river mountain garden library market station harbor
bridge forest meadow village city north south east west morning evening autumn winter`)

// paragraphs returns text of about size bytes, in paragraphs of 30–90 words.
func paragraphs(rng *rand.Rand, size int) []string {
	var out []string
	total := 0
	for total < size {
		var b strings.Builder
		for w := range 30 + rng.IntN(61) {
			if w > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[rng.IntN(len(words))])
		}
		b.WriteByte('.')
		out = append(out, b.String())
		total += b.Len()
	}
	return out
}

// href writes the reference from page path from to target path on base.
func href(from, target, base string, form linkForm) string {
	switch form {
	case formRoot:
		return target
	case formAbsolute:
		return base + target
	}
	depth := strings.Count(from, "/") - 1 // directories below "/"
	rel := strings.TrimPrefix(target, "/")
	if depth > 0 {
		return strings.Repeat("../", depth) + rel
	}
	if form == formDot || rel == "" {
		return "./" + rel
	}
	return rel
}

// render writes the HTML of every page; bases[h] is host h's "http://ip:port".
func render(sites []site, specs []HostSpec, bases []string) {
	for hi := range sites {
		for pi := range sites[hi].pages {
			p := &sites[hi].pages[pi]
			p.body = renderPage(sites, specs, bases, hi, pi)
			p.text = nil
		}
	}
}

// renderPage returns the HTML of page pi of host hi, drawing its text again if it is not kept.
func renderPage(sites []site, specs []HostSpec, bases []string, hi, pi int) []byte {
	p := &sites[hi].pages[pi]
	src := p.textFrom
	rng := rand.New(&src)
	text := p.text
	if text == nil || specs[hi].Links > 0 { // drawn even when kept: the extra links follow it
		text = paragraphs(rng, p.textSize)
	}
	title := fmt.Sprintf("%s: page %d", specs[hi].Name, pi)
	if pi >= sites[hi].normal {
		title = fmt.Sprintf("%s: %s", specs[hi].Name, p.path)
	}
	var b bytes.Buffer
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>")
	b.WriteString(html.EscapeString(title))
	b.WriteString("</title>\n")
	if specs[hi].Assets {
		writeAssetHead(&b)
	}
	b.WriteString("</head>\n<body>\n<h1>")
	b.WriteString(html.EscapeString(title))
	b.WriteString("</h1>\n")
	if specs[hi].Assets {
		writeAssetBody(&b)
	}
	// Links are spread over the paragraphs, a few per paragraph, rest in a list at the end.
	ls := p.links
	if want := specs[hi].Links; want > len(ls) && pi < sites[hi].normal {
		ls = append(slices.Clip(ls), extraLinks(rng, hi, sites[hi].normal, want-len(ls))...)
	}
	for _, para := range text {
		b.WriteString("<p>")
		b.WriteString(html.EscapeString(para))
		for k := 0; k < 2 && len(ls) > 0; k++ {
			writeLink(&b, sites, specs, bases, hi, p.path, ls[0])
			ls = ls[1:]
		}
		b.WriteString("</p>\n")
	}
	if len(ls) > 0 {
		b.WriteString("<ul>\n")
		for _, l := range ls {
			b.WriteString("<li>")
			writeLink(&b, sites, specs, bases, hi, p.path, l)
			b.WriteString("</li>\n")
		}
		b.WriteString("</ul>\n")
	}
	b.WriteString("</body>\n</html>\n")
	return b.Bytes()
}

// extraLinks draws n random links to the ordinary pages 0..normal-1 of host hi (HostSpec.Links).
func extraLinks(rng *rand.Rand, hi, normal, n int) []link {
	ls := make([]link, n)
	for i := range ls {
		ls[i] = link{host: hi, page: rng.IntN(normal), form: linkForm(rng.IntN(int(numForms)))}
	}
	return ls
}

func writeLink(b *bytes.Buffer, sites []site, specs []HostSpec, bases []string, hi int, from string, l link) {
	target := sites[l.host].pages[l.page].path
	form := l.form
	if l.host != hi {
		form = formAbsolute
	}
	text := specs[l.host].Name + " " + target
	fmt.Fprintf(b, ` <a href="%s">%s</a>`,
		html.EscapeString(href(from, target, bases[l.host], form)+l.frag), html.EscapeString(text))
}

// allowed reports whether the robots rules of spec let a crawler fetch path p.
func allowed(spec *HostSpec, p string) bool {
	st := spec.robotsStatus()
	if st >= 500 {
		return false
	}
	if st >= 400 {
		return true
	}
	for _, d := range spec.Disallow {
		if strings.HasPrefix(p, d) {
			return false
		}
	}
	return true
}

// expected walks the link graph from every host's root, never through a disallowed page, and
// returns per host the sorted URLs it reaches.
func expected(sites []site, specs []HostSpec, bases []string) map[string][]string {
	type node struct{ host, page int }
	seen := make(map[node]bool)
	var queue []node
	visit := func(n node) {
		if seen[n] || !allowed(&specs[n.host], sites[n.host].pages[n.page].path) {
			return
		}
		seen[n] = true
		queue = append(queue, n)
	}
	for hi := range sites {
		visit(node{hi, 0})
	}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, l := range sites[n.host].pages[n.page].links {
			visit(node{l.host, l.page})
		}
	}
	out := make(map[string][]string, len(specs))
	for hi := range specs {
		out[specs[hi].Name] = []string{}
	}
	for n := range seen {
		name := specs[n.host].Name
		out[name] = append(out[name], bases[n.host]+sites[n.host].pages[n.page].path)
	}
	for _, urls := range out {
		sort.Strings(urls)
	}
	return out
}

// robotsTxt returns the robots.txt body for spec.
func robotsTxt(spec *HostSpec) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# robots.txt for simulated host %s\n\n", spec.Name)
	b.WriteString("User-agent: simweb-blocked-bot\nDisallow: /\n\n")
	b.WriteString("User-agent: *\n")
	if len(spec.Disallow) == 0 {
		b.WriteString("Disallow:\n")
	}
	for _, d := range spec.Disallow {
		b.WriteString("Disallow: " + d + "\n")
	}
	return []byte(b.String())
}
