package fleet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/crawl-project/crawl/frontier"
)

// item is a queued URL as stored in a host's queue and delayed set (encode), and, prefixed by
// its host, in the partition's in-flight set (inFlightMember).
type item struct {
	URL      string
	Host     string
	Depth    int
	Hops     int
	Parent   string
	Role     frontier.Role
	Attempts int
}

func itemOf(e frontier.Entry, attempts int) item {
	return item{URL: e.URL, Host: e.Host, Depth: e.Depth, Hops: e.Hops, Parent: e.Parent, Role: e.Role, Attempts: attempts}
}

func (it item) entry() frontier.Entry {
	return frontier.Entry{URL: it.URL, Host: it.Host, Depth: it.Depth, Hops: it.Hops, Parent: it.Parent, Role: it.Role}
}

// The item encoding (docs/fleet.md "Queue items"). A header byte, then the fields it flags,
// then the rest of the URL up to the end:
//
//	header  bits 0-1: the URL's form (itemFull, itemHTTPS, itemHTTP); bit 2 depth, bit 3 hops,
//	        bit 5 attempts (each a uvarint that follows, in this order, when set); bit 4 the
//	        role is RoleRequisite; bit 6 a parent follows; bit 7 is 0 (a later encoding sets it).
//	parent  uvarint: bytes shared with the start of the URL; uvarint n; n bytes: the rest.
//	URL     itemFull: the whole URL; itemHTTPS/itemHTTP: what follows "https://"+host or
//	        "http://"+host (the host is the key's).
const (
	itemFull  = 0
	itemHTTPS = 1
	itemHTTP  = 2
	itemForm  = 3 // mask of the form bits

	itemDepth     = 1 << 2
	itemHops      = 1 << 3
	itemRequisite = 1 << 4
	itemAttempts  = 1 << 5
	itemParent    = 1 << 6
	itemLater     = 1 << 7
)

// maxItemInt bounds depth, hops and attempts in a decoded item (hostile or damaged data).
const maxItemInt = 1 << 30

// encode returns it in the item encoding; its Host is left out (the key holding the item
// names it).
func (it item) encode() string {
	b := make([]byte, 1, 8+len(it.URL)+len(it.Parent))
	rest := it.URL
	switch {
	case strings.HasPrefix(rest, "https://") && strings.HasPrefix(rest[len("https://"):], it.Host):
		b[0], rest = itemHTTPS, rest[len("https://")+len(it.Host):]
	case strings.HasPrefix(rest, "http://") && strings.HasPrefix(rest[len("http://"):], it.Host):
		b[0], rest = itemHTTP, rest[len("http://")+len(it.Host):]
	}
	if it.Depth > 0 {
		b[0] |= itemDepth
		b = binary.AppendUvarint(b, uint64(it.Depth))
	}
	if it.Hops > 0 {
		b[0] |= itemHops
		b = binary.AppendUvarint(b, uint64(it.Hops))
	}
	if it.Role == frontier.RoleRequisite {
		b[0] |= itemRequisite
	}
	if it.Attempts > 0 {
		b[0] |= itemAttempts
		b = binary.AppendUvarint(b, uint64(it.Attempts))
	}
	if it.Parent != "" {
		b[0] |= itemParent
		shared := 0
		for shared < len(it.Parent) && shared < len(it.URL) && it.Parent[shared] == it.URL[shared] {
			shared++
		}
		b = binary.AppendUvarint(b, uint64(shared))
		b = binary.AppendUvarint(b, uint64(len(it.Parent)-shared))
		b = append(b, it.Parent[shared:]...)
	}
	return string(append(b, rest...))
}

// errBadItem is wrapped by every decoding error of an item or in-flight member.
var errBadItem = errors.New("fleet: bad queue item")

// decodeItem decodes an item of host's queue or delayed set. Damaged or hostile bytes give an
// error naming what is wrong, never a panic.
func decodeItem(host, s string) (item, error) {
	it := item{Host: host}
	fail := func(what string) (item, error) {
		return item{}, fmt.Errorf("%w of host %q: %s (%d bytes %q)", errBadItem, host, what, len(s), clip(s))
	}
	if s == "" {
		return fail("empty")
	}
	h := s[0]
	if h&itemLater != 0 || h&itemForm == itemForm {
		return fail(fmt.Sprintf("header %#02x is not of this version's encoding", h))
	}
	d := s[1:]
	num := func(flag byte, dst *int) bool {
		if h&flag == 0 {
			return true
		}
		v, n := binary.Uvarint([]byte(d[:min(len(d), binary.MaxVarintLen64)]))
		if n <= 0 || v == 0 || v > maxItemInt {
			return false
		}
		*dst, d = int(v), d[n:]
		return true
	}
	if !num(itemDepth, &it.Depth) {
		return fail("bad depth")
	}
	if !num(itemHops, &it.Hops) {
		return fail("bad hops")
	}
	if h&itemRequisite != 0 {
		it.Role = frontier.RoleRequisite
	}
	if !num(itemAttempts, &it.Attempts) {
		return fail("bad attempts")
	}
	var shared int
	var parentRest string
	if h&itemParent != 0 {
		v, n := binary.Uvarint([]byte(d[:min(len(d), binary.MaxVarintLen64)]))
		if n <= 0 || v > uint64(len(s)+len(host)+len("https://")) {
			return fail("bad parent prefix")
		}
		shared, d = int(v), d[n:]
		v, n = binary.Uvarint([]byte(d[:min(len(d), binary.MaxVarintLen64)]))
		if n <= 0 || v > uint64(len(d)-n) {
			return fail("bad parent length")
		}
		parentRest, d = d[n:n+int(v)], d[n+int(v):]
	}
	switch h & itemForm {
	case itemFull:
		it.URL = d
	case itemHTTPS:
		it.URL = "https://" + host + d
	case itemHTTP:
		it.URL = "http://" + host + d
	}
	if it.URL == "" {
		return fail("no URL")
	}
	if h&itemParent != 0 {
		if shared > len(it.URL) {
			return fail("parent prefix longer than the URL")
		}
		it.Parent = it.URL[:shared] + parentRest
		if it.Parent == "" {
			return fail("empty parent")
		}
	}
	return it, nil
}

// inFlightPrefix is what precedes a host's items in the in-flight set: the host's length
// (uvarint) and the host, which the in-flight set, shared by the partition's hosts, must name.
func inFlightPrefix(host string) string {
	return string(binary.AppendUvarint(nil, uint64(len(host)))) + host
}

// inFlightMember is it as a member of the in-flight set.
func (it item) inFlightMember() string { return inFlightPrefix(it.Host) + it.encode() }

// decodeMember decodes a member of the in-flight set; encoded is its item as queued.
func decodeMember(m string) (it item, encoded string, err error) {
	v, n := binary.Uvarint([]byte(m[:min(len(m), binary.MaxVarintLen64)]))
	if n <= 0 || v == 0 || v > uint64(len(m)-n) {
		return item{}, "", fmt.Errorf("%w: in-flight member without a host (%d bytes %q)", errBadItem, len(m), clip(m))
	}
	host := m[n : n+int(v)]
	encoded = m[n+int(v):]
	it, err = decodeItem(host, encoded)
	return it, encoded, err
}

// clip bounds what an error quotes of a stored value.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// ItemURL returns the URL of item, an element of the queue of host as Redis holds it (the
// list `crawl:NAME:{p}:q:HOST`), for tools and tests that read a crawl's Redis directly.
func ItemURL(host, item string) (string, error) {
	it, err := decodeItem(host, item)
	return it.URL, err
}
