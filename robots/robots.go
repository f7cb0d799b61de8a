package robots

import (
	"bytes"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MaxSize is how many bytes of a robots.txt body Parse reads (RFC 9309 §2.5 asks for at least
// 500 KiB). Bytes beyond it are ignored, and so is a line cut by the limit. A fetcher that wants
// Parse to see whether the last line was cut should read at least MaxSize+1 bytes.
const MaxSize = 500 << 10

// Robots is a parsed robots.txt, or one of the verdicts that stand in for it (AllowAll,
// DisallowAll). It is immutable once built and safe for concurrent use by multiple goroutines.
// The zero value allows everything, like AllowAll.
type Robots struct {
	groups      []group
	byAgent     map[string][]int // lower-case product token → indexes into groups
	star        []int            // groups naming "*"
	sitemaps    []string
	unreachable bool

	// The Group of a verdict that names several groups, by the product token that selected
	// them ("" for the "*" groups): a file may make that list as long as itself, so it is
	// built once per agent, not once per URL. At most maxMerged entries.
	mergedMu sync.Mutex
	merged   map[string]string
}

// maxMerged bounds Robots.merged, so that a caller asking about every agent a file names keeps
// at most this many merged names; the others are built when asked.
const maxMerged = 16

// group is one group of the file: its user-agent lines and its members.
type group struct {
	name     string  // user-agent lines as written, joined with ", "
	rules    []*rule // best first: longest, then allow before disallow, then earliest line
	delay    time.Duration
	hasDelay bool
}

// Verdict is the answer to Test for one URL.
type Verdict struct {
	// Allowed says whether the crawler may fetch the URL.
	Allowed bool
	// Rule is the deciding rule as "Allow: VALUE" or "Disallow: VALUE", VALUE as written in the
	// file (comment and surrounding whitespace removed); "" when no rule matched. Allowed is
	// false with Rule == "" only for a Robots that is Unreachable.
	Rule string
	// Line is the 1-based line of Rule in the file (CR, LF and CRLF each end one line); 0 if
	// no rule matched.
	Line int
	// Group is the user-agent line(s) of the group the rule came from, e.g.
	// "User-agent: barbot, User-agent: bazbot". When no rule matched but groups applied, it
	// lists the user-agent lines of all of them; "" when no group applied.
	Group string
}

// AllowAll returns a Robots that allows every URL, the verdict for a missing robots.txt.
func AllowAll() *Robots { return &Robots{} }

// DisallowAll returns a Robots that disallows every URL except /robots.txt and reports
// Unreachable, the verdict for a robots.txt that could not be fetched (429, 5xx, network error).
func DisallowAll() *Robots { return &Robots{unreachable: true} }

// Unreachable reports whether r stands for a robots.txt that could not be fetched, which
// disallows everything (RFC 9309 §2.3.1.4). See Effective for what to do after 30 days.
func (r *Robots) Unreachable() bool { return r.unreachable }

// FromResponse turns the final HTTP status and body of a robots.txt fetch into a Robots:
//   - 2xx: Parse(body);
//   - 3xx (redirects not followed or more than five of them), and 4xx except 429: AllowAll,
//     the file is "unavailable" (RFC 9309 §2.3.1.2, §2.3.1.3);
//   - anything else, including 429, 5xx, 1xx and 0 (which callers pass for a network error or
//     timeout): DisallowAll, the file is "unreachable" (§2.3.1.4).
func FromResponse(status int, body []byte) *Robots {
	switch statusClass(status) {
	case classOK:
		return Parse(body)
	case classUnavailable:
		return AllowAll()
	default:
		return DisallowAll()
	}
}

type class int

const (
	classOK class = iota
	classUnavailable
	classUnreachable
)

func statusClass(status int) class {
	switch {
	case status >= 200 && status <= 299:
		return classOK
	case status == 429:
		return classUnreachable
	case status >= 300 && status <= 499:
		return classUnavailable
	default:
		return classUnreachable
	}
}

// Test says whether agent may fetch pathAndQuery. agent is the crawler's product token
// ("crawl"); a full User-Agent string is reduced with ProductToken first. pathAndQuery is the
// request target as sent on the wire ("/a/b?x=1", percent-encoded as in the URL; raw UTF-8 is
// accepted too); "" means "/", a missing leading "/" is added, and a "#fragment" is dropped.
// Test never fails and never panics. It costs O(len(rule) + len(path)) per rule of the groups
// that apply, fewer when a group's best rule matches early (see the package doc, "Cost").
func (r *Robots) Test(agent string, pathAndQuery string) Verdict {
	p := canonPath(pathAndQuery)
	if p == "/robots.txt" {
		return Verdict{Allowed: true}
	}
	if r.unreachable {
		return Verdict{Allowed: false}
	}
	tok, gs := r.selectGroups(agent)
	if len(gs) == 0 {
		return Verdict{Allowed: true}
	}
	var best *rule
	bestGroup := -1
	for _, gi := range gs {
		for _, ru := range r.groups[gi].rules {
			if ru.match(p) {
				if best == nil || ru.beats(best) {
					best, bestGroup = ru, gi
				}
				break // rules are sorted best first: the first match is this group's winner
			}
		}
	}
	if best == nil {
		return Verdict{Allowed: true, Group: r.groupNames(tok, gs)}
	}
	return Verdict{Allowed: best.allow, Rule: best.text, Line: best.line, Group: r.groups[bestGroup].name}
}

// TestURL is Test(agent, u.RequestURI()): the form the crawler and `crawl robots` use, so both
// derive the path the same way. u's scheme and host are not checked; the caller picks the
// Robots of u's host.
func (r *Robots) TestURL(agent string, u *url.URL) Verdict {
	return r.Test(agent, u.RequestURI())
}

// CrawlDelay returns the Crawl-delay that applies to agent (chosen among groups as Test does)
// and whether there was one. Crawl-delay is not part of RFC 9309; values are seconds (a decimal
// fraction is allowed), invalid values are ignored, and when several apply the largest wins.
// The value is not capped here (beyond what time.Duration can hold): the caller decides what
// delay it is willing to honour.
func (r *Robots) CrawlDelay(agent string) (time.Duration, bool) {
	var d time.Duration
	found := false
	_, gs := r.selectGroups(agent)
	for _, gi := range gs {
		g := &r.groups[gi]
		if g.hasDelay && (!found || g.delay > d) {
			d, found = g.delay, true
		}
	}
	return d, found
}

// Sitemaps returns the Sitemap URLs listed anywhere in the file, in order, without duplicates.
// The caller owns the returned slice.
func (r *Robots) Sitemaps() []string { return slices.Clone(r.sitemaps) }

// ProductToken returns the product token at the start of a User-Agent string: its leading run
// of the characters RFC 9309 allows in a product token, [A-Za-z_-], after leading whitespace.
// "crawl/0.1 (+https://example.com/bot)" → "crawl"; "*" or "" → "".
func ProductToken(userAgent string) string {
	s := strings.TrimLeft(userAgent, " \t")
	i := 0
	for i < len(s) && isTokenChar(s[i]) {
		i++
	}
	return s[:i]
}

// AgentToken returns the product token a crawler sending userAgent obeys in robots.txt: the
// product named in a "compatible;" comment ("Mozilla/5.0 (compatible; MyBot/1.0; +URL)" →
// "MyBot"); else the first product outside comments that is not "Mozilla"
// ("Mozilla/5.0 (X11) MyBot/2.0" → "MyBot"); else ProductToken(userAgent). A bare token is
// itself: AgentToken("MyBot") is "MyBot".
func AgentToken(userAgent string) string {
	if i := strings.Index(strings.ToLower(userAgent), "compatible;"); i >= 0 {
		if tok := ProductToken(userAgent[i+len("compatible;"):]); tok != "" {
			return tok
		}
	}
	depth := 0
	for i := 0; i < len(userAgent); i++ {
		switch c := userAgent[i]; {
		case c == '(':
			depth++
		case c == ')':
			depth = max(depth-1, 0)
		case depth == 0 && isTokenChar(c) && (i == 0 || userAgent[i-1] == ' ' || userAgent[i-1] == '\t' || userAgent[i-1] == ')'):
			if tok := ProductToken(userAgent[i:]); !strings.EqualFold(tok, "Mozilla") {
				return tok
			}
		}
	}
	return ProductToken(userAgent)
}

func isTokenChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '-'
}

// selectGroups returns the groups that apply to agent (RFC 9309 §2.2.1) and the lower-case
// product token that selected them, "" for the "*" groups.
func (r *Robots) selectGroups(agent string) (string, []int) {
	if r.unreachable {
		return "", nil
	}
	if tok := strings.ToLower(ProductToken(agent)); tok != "" {
		if gs := r.byAgent[tok]; len(gs) > 0 {
			return tok, gs
		}
	}
	return "", r.star
}

// groupNames returns the user-agent lines of groups gs, selected by tok, each once, in order.
// It costs O(1) once built for tok, and building costs time linear in the names' length.
func (r *Robots) groupNames(tok string, gs []int) string {
	if len(gs) == 1 {
		return r.groups[gs[0]].name
	}
	r.mergedMu.Lock()
	name, ok := r.merged[tok]
	r.mergedMu.Unlock()
	if ok {
		return name
	}
	var names []string
	seen := make(map[string]bool)
	for _, gi := range gs {
		for n := range strings.SplitSeq(r.groups[gi].name, ", ") {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	name = strings.Join(names, ", ")
	r.mergedMu.Lock()
	if r.merged == nil {
		r.merged = make(map[string]string)
	}
	if len(r.merged) < maxMerged {
		r.merged[tok] = name
	}
	r.mergedMu.Unlock()
	return name
}

// Parse parses a robots.txt body. It never fails: lines it cannot use are skipped (RFC 9309
// §2.3.1.5), and an empty or unusable body allows everything. Only the first MaxSize bytes are
// read. The result does not retain body. Parse costs time and memory linear in the bytes read
// (sorting each group's rules adds a log factor), whatever the lines say.
func Parse(body []byte) *Robots {
	truncated := false
	if len(body) > MaxSize {
		body, truncated = body[:MaxSize], true
	}
	// A UTF-8 BOM, or the start of one that an editor or a transcoder cut short.
	for _, bom := range []string{"\xEF\xBB\xBF", "\xEF\xBB", "\xEF"} {
		if bytes.HasPrefix(body, []byte(bom)) {
			body = body[len(bom):]
			break
		}
	}

	var p parser
	for n := 1; len(body) > 0; n++ {
		i := bytes.IndexAny(body, "\r\n")
		if i < 0 {
			if !truncated { // a last line without an end-of-line is fine unless the limit cut it
				p.line(n, string(body))
			}
			break
		}
		p.line(n, string(body[:i]))
		if body[i] == '\r' && i+1 < len(body) && body[i+1] == '\n' {
			i++
		}
		body = body[i+1:]
	}
	return p.finish()
}

// parser holds the state of Parse between lines. Each line costs time linear in its length
// (amortized), whatever came before it: nothing is searched or rebuilt per line.
type parser struct {
	groups   []group
	names    [][]string     // per group: its user-agent lines, joined into group.name by finish
	agents   [][]string     // per group: lower-case product tokens ("*" for the wildcard), each once
	named    map[string]int // product token → 1 + the last group that named it
	inAgents bool           // the last group still takes user-agent lines (no member seen yet)
	sitemaps []string
	listed   map[string]bool // the values of sitemaps
	ruled    map[ruleKey]bool
}

// ruleKey identifies a rule within a group: a second rule with the same key never decides
// (the earlier line wins the tie), so it is not kept, and repeating a line costs no more at
// Test than writing it once.
type ruleKey struct {
	group           int
	allow, anchored bool
	pattern         string
}

const wsChars = " \t\v\f"

func (p *parser) line(n int, s string) {
	if i := strings.IndexByte(s, '#'); i >= 0 {
		s = s[:i]
	}
	s = strings.Trim(s, wsChars)
	if s == "" {
		return
	}
	key, value, ok := strings.Cut(s, ":")
	if !ok {
		// Lenient: "Disallow /x" (exactly two fields) is read as "Disallow: /x".
		f := strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(wsChars, r) })
		if len(f) != 2 {
			return
		}
		key, value = f[0], f[1]
	}
	key = strings.ToLower(strings.Trim(key, wsChars))
	value = strings.Trim(value, wsChars)

	switch key {
	case "user-agent", "useragent", "user agent":
		if len(p.groups) == 0 || !p.inAgents {
			p.groups = append(p.groups, group{})
			p.names = append(p.names, nil)
			p.agents = append(p.agents, nil)
			p.inAgents = true
		}
		gi := len(p.groups) - 1
		p.names[gi] = append(p.names[gi], "User-agent: "+value)
		tok := "*"
		if first, _, _ := strings.Cut(strings.ReplaceAll(value, "\t", " "), " "); first != "*" {
			tok = strings.ToLower(ProductToken(value))
		}
		if tok != "" && p.named[tok] != gi+1 {
			if p.named == nil {
				p.named = make(map[string]int)
			}
			p.named[tok] = gi + 1
			p.agents[gi] = append(p.agents[gi], tok)
		}
	case "allow", "disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw":
		if len(p.groups) == 0 {
			return // RFC 9309 §2.2.2: rules outside any group are ignored
		}
		p.inAgents = false
		if value == "" {
			return // an empty rule matches nothing
		}
		allow := key == "allow"
		text := "Disallow: " + value
		if allow {
			text = "Allow: " + value
		}
		gi := len(p.groups) - 1
		ru := newRule(allow, value, text, n)
		k := ruleKey{gi, ru.allow, ru.anchored, ru.pattern}
		if p.ruled[k] {
			return
		}
		if p.ruled == nil {
			p.ruled = make(map[ruleKey]bool)
		}
		p.ruled[k] = true
		p.groups[gi].rules = append(p.groups[gi].rules, ru)
	case "crawl-delay", "crawldelay":
		if len(p.groups) == 0 {
			return
		}
		p.inAgents = false
		d, ok := parseDelay(value)
		if !ok {
			return
		}
		g := &p.groups[len(p.groups)-1]
		if !g.hasDelay || d > g.delay {
			g.delay, g.hasDelay = d, true
		}
	case "sitemap", "site-map":
		if value != "" && !p.listed[value] {
			if p.listed == nil {
				p.listed = make(map[string]bool)
			}
			p.listed[value] = true
			p.sitemaps = append(p.sitemaps, value)
		}
	}
}

// parseDelay reads a Crawl-delay value in seconds.
func parseDelay(v string) (time.Duration, bool) {
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil || secs < 0 || math.IsNaN(secs) || math.IsInf(secs, 0) {
		return 0, false
	}
	ns := secs * float64(time.Second)
	if ns >= math.MaxInt64 {
		return time.Duration(math.MaxInt64), true
	}
	return time.Duration(ns), true
}

func (p *parser) finish() *Robots {
	r := &Robots{groups: p.groups, sitemaps: p.sitemaps}
	for gi := range r.groups {
		r.groups[gi].name = strings.Join(p.names[gi], ", ")
		slices.SortStableFunc(r.groups[gi].rules, func(a, b *rule) int {
			switch {
			case a.beats(b):
				return -1
			case b.beats(a):
				return 1
			}
			return 0
		})
		for _, tok := range p.agents[gi] {
			if tok == "*" {
				r.star = append(r.star, gi)
				continue
			}
			if r.byAgent == nil {
				r.byAgent = make(map[string][]int)
			}
			r.byAgent[tok] = append(r.byAgent[tok], gi)
		}
	}
	return r
}
