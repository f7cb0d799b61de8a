package crawler

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
)

// ScopeMode says which hosts a crawl stays on (--scope). The zero value is ScopeHost. Its text
// form is the flag's: "host" or "domain".
type ScopeMode int

const (
	ScopeHost   ScopeMode = iota // the seeds' hosts
	ScopeDomain                  // the seeds' registrable domains (example.com and its subdomains)
)

func (m ScopeMode) String() string {
	switch m {
	case ScopeHost:
		return "host"
	case ScopeDomain:
		return "domain"
	}
	return fmt.Sprintf("ScopeMode(%d)", int(m))
}

func (m ScopeMode) valid() bool { return m == ScopeHost || m == ScopeDomain }

func (m ScopeMode) MarshalText() ([]byte, error) {
	if !m.valid() {
		return nil, fmt.Errorf("--scope must be host or domain, not %v", m)
	}
	return []byte(m.String()), nil
}

func (m *ScopeMode) UnmarshalText(b []byte) error {
	switch string(b) {
	case "host":
		*m = ScopeHost
	case "domain":
		*m = ScopeDomain
	default:
		return fmt.Errorf("--scope must be host or domain, not %q", b)
	}
	return nil
}

// RequisitesScope says on which hosts requisites are fetched (--requisites-scope). The zero
// value is RequisitesScopeAny. Its text form is the flag's: "any" or "host".
type RequisitesScope int

const (
	RequisitesScopeAny  RequisitesScope = iota // requisites on any host
	RequisitesScopeHost                        // only on the hosts (or domains) of the crawl's scope
)

func (r RequisitesScope) String() string {
	switch r {
	case RequisitesScopeAny:
		return "any"
	case RequisitesScopeHost:
		return "host"
	}
	return fmt.Sprintf("RequisitesScope(%d)", int(r))
}

func (r RequisitesScope) valid() bool { return r == RequisitesScopeAny || r == RequisitesScopeHost }

func (r RequisitesScope) MarshalText() ([]byte, error) {
	if !r.valid() {
		return nil, fmt.Errorf("--requisites-scope must be any or host, not %v", r)
	}
	return []byte(r.String()), nil
}

func (r *RequisitesScope) UnmarshalText(b []byte) error {
	switch string(b) {
	case "any", "": // "": a store from before it was kept, where the default applied
		*r = RequisitesScopeAny
	case "host":
		*r = RequisitesScopeHost
	default:
		return fmt.Errorf("--requisites-scope must be any or host, not %q", b)
	}
	return nil
}

// Depth caps the link hops from a seed (--max-depth). The zero value is no cap; SeedsOnly
// follows no link; a positive depth is that many hops. Its text and JSON form is the flag's:
// -1 for no cap, 0 for the seeds only, else the hops.
type Depth int

// SeedsOnly is the Depth that crawls the seeds and follows none of their links.
const SeedsOnly Depth = -1

// Hops returns the most link hops d allows, and false when it sets no cap.
func (d Depth) Hops() (int, bool) {
	switch {
	case d == 0:
		return 0, false
	case d == SeedsOnly:
		return 0, true
	}
	return int(d), true
}

func (d Depth) valid() bool { return d >= SeedsOnly }

// flagValue is d as --max-depth gives it.
func (d Depth) flagValue() int {
	if hops, ok := d.Hops(); ok {
		return hops
	}
	return -1
}

func (d Depth) String() string {
	if !d.valid() {
		return fmt.Sprintf("Depth(%d)", int(d))
	}
	return strconv.Itoa(d.flagValue())
}

func (d Depth) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

func (d *Depth) UnmarshalText(b []byte) error {
	n, err := strconv.Atoi(string(b))
	if err != nil {
		return fmt.Errorf("--max-depth must be a whole number, -1 (unlimited) or more, not %q", b)
	}
	return d.setFlagValue(n)
}

func (d *Depth) setFlagValue(n int) error {
	switch {
	case n < -1:
		return fmt.Errorf("--max-depth must be -1 (unlimited) or more, not %d", n)
	case n == -1:
		*d = 0
	case n == 0:
		*d = SeedsOnly
	default:
		*d = Depth(n)
	}
	return nil
}

func (d Depth) MarshalJSON() ([]byte, error) {
	if !d.valid() {
		return nil, fmt.Errorf("--max-depth must be -1 (unlimited) or more, not %v", d)
	}
	return []byte(strconv.Itoa(d.flagValue())), nil
}

func (d *Depth) UnmarshalJSON(b []byte) error {
	var n int
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("max_depth: %w", err)
	}
	return d.setFlagValue(n)
}

// Patterns are regular expressions matched against URLs (--include, --exclude). Their JSON
// form is their sources, a list of strings.
type Patterns []*regexp.Regexp

// Strings returns the patterns' sources.
func (p Patterns) Strings() []string {
	var out []string
	for _, re := range p {
		out = append(out, re.String())
	}
	return out
}

func (p Patterns) MarshalJSON() ([]byte, error) { return json.Marshal(p.Strings()) }

func (p *Patterns) UnmarshalJSON(b []byte) error {
	var src []string
	if err := json.Unmarshal(b, &src); err != nil {
		return err
	}
	out := make(Patterns, 0, len(src))
	for _, s := range src {
		re, err := regexp.Compile(s)
		if err != nil {
			return fmt.Errorf("pattern %q: %w", s, err)
		}
		out = append(out, re)
	}
	*p = out
	return nil
}
