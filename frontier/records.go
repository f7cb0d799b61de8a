package frontier

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/crawl-project/crawl/internal/termsafe"
)

// On-disk layout, all in storage's bbolt file:
//
//	frontier/records  seq(8, BE)                -> fingerprint(URL) (8, BE) and the record with the URL
//	frontier/urls     fingerprint(URL) (8, BE)  -> record with the URL
//	frontier/queues   hostID(4, BE)             -> the host's queue: a bucket of
//	                                               seq(8, BE) -> 0x03 and the fingerprint of the URL's record
//	frontier/delayed  notBefore(8, BE) seq(8)   -> uvarint(len host) host URL   (retries waiting)
//	frontier/hosts    host                      -> hostCounts and the host's ID (0 until it has a format 3 record)
//	frontier/hostids  hostID(4, BE)             -> host (IDs from 1; a format 3 record names its host by ID)
//	frontier/counts   name                      -> int64 (8, BE): totals, "failed\x00reason", "excluded\x00reason"
//
//	frontier/meta     "fingerprint-key"         -> the store's fpKey (16 bytes)
//
// Every URL has one record, in frontier/records or in frontier/urls, and is named by its
// fingerprint wherever it is referred to (queue entries, parents). A new URL's record is
// appended to frontier/records (seq from the bucket's sequence, at most 2^32-1) while the
// in-memory seen-set, which keeps each record's seq, has room for it (seenSet.roomy); past
// that, and in stores written before frontier/records, it is kept in frontier/urls under its
// fingerprint.
//
// A queued URL's record holds the key of its queue or delayed entry, so each entry and each
// queued record point at each other (Check verifies it). The key of an entry in frontier/queues
// is written idQueueKey(hostID, seq) (0x00, which no host starts with, hostID, seq) wherever a
// queue key is kept: in records and leases.
//
// This is format 3 (docs/frontier.md): every record is a version 4 record in frontier/urls.
// Stores of formats 1 and 2 are upgraded to it when opened (upgrade.go, which alone reads them).
var (
	bucketRecords = []byte("frontier/records")
	bucketURLs    = []byte("frontier/urls")
	bucketMeta    = []byte("frontier/meta")
	bucketQueues  = []byte("frontier/queues")
	bucketDelayed = []byte("frontier/delayed")
	bucketHosts   = []byte("frontier/hosts")
	bucketHostIDs = []byte("frontier/hostids")
	bucketCounts  = []byte("frontier/counts")
	allBuckets    = [][]byte{bucketRecords, bucketURLs, bucketMeta, bucketQueues, bucketDelayed, bucketHosts, bucketHostIDs, bucketCounts}
)

// recordKey is the key of the record at place loc of bucketRecords.
func recordKey(loc uint32) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(loc))
}

// recordValue is the value in bucketRecords of the record enc of fingerprint key fp.
func recordValue(fp, enc []byte) []byte {
	return append(append(make([]byte, 0, 8+len(enc)), fp...), enc...)
}

// splitRecordValue returns the fingerprint key and the record of bucketRecords' entry k, v.
func splitRecordValue(k, v []byte) (fp, enc []byte, err error) {
	if len(k) != 8 || binary.BigEndian.Uint64(k) == 0 || binary.BigEndian.Uint64(k) > math.MaxUint32 || len(v) < 8 {
		return nil, nil, fmt.Errorf("an appended record's key %x or value %x is not one", k, v[:min(len(v), 8)])
	}
	return v[:8], v[8:], nil
}

// maxDetail caps the Detail text kept per URL.
const maxDetail = 1024

// keptDetail is a Detail as the store keeps it: server text can be in it, so its control
// characters are escaped (termsafe), and it is cut to maxDetail bytes.
func keptDetail(s string) string { return truncate(termsafe.Escape(s), maxDetail) }

// idQueueKey is the queue key of a URL of host ID id with a format 3 record: entry seq of the
// host's bucket in frontier/queues.
func idQueueKey(id uint32, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(idQueuePrefix(id), seq)
}

func idQueuePrefix(id uint32) []byte {
	return binary.BigEndian.AppendUint32(append(make([]byte, 0, 13), 0), id)
}

// splitIDQueueKey returns the host ID bucket name and the seq key of an idQueueKey, and whether
// k is one.
func splitIDQueueKey(k []byte) (name, seq []byte, ok bool) {
	if len(k) != 13 || k[0] != 0 {
		return nil, nil, false
	}
	return k[1:5], k[5:], true
}

// hostIDKey is the key of host ID id in bucketHostIDs (and its queue's name in bucketQueues).
func hostIDKey(id uint32) []byte { return binary.BigEndian.AppendUint32(nil, id) }

// timeKey encodes t as unsigned nanoseconds since 1970, clamped to what fits.
func timeKey(t time.Time) uint64 {
	switch {
	case t.IsZero() || t.Before(time.Unix(0, 0)):
		return 0
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return uint64(t.UnixNano())
}

func keyTime(n uint64) time.Time { return time.Unix(0, int64(n)).UTC() }

func delayedKey(notBefore time.Time, seq uint64) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 16), timeKey(notBefore))
	return binary.BigEndian.AppendUint64(k, seq)
}

func delayedValue(host, url string) []byte {
	v := binary.AppendUvarint(nil, uint64(len(host)))
	v = append(v, host...)
	return append(v, url...)
}

func parseDelayed(k, v []byte) (notBefore uint64, host, url string, err error) {
	if len(k) != 16 {
		return 0, "", "", errors.New("bad delayed key")
	}
	n, w := binary.Uvarint(v)
	if w <= 0 || n > uint64(len(v)-w) {
		return 0, "", "", errors.New("bad delayed value")
	}
	v = v[w:]
	return binary.BigEndian.Uint64(k), string(v[:n]), string(v[n:]), nil
}

// URL states as stored.
const (
	stQueued byte = 1 + iota
	stFetched
	stFailed
	stExcluded
)

var stateNames = [...]string{stQueued: "queued", stFetched: "fetched", stFailed: "failed", stExcluded: "excluded"}

// record is the seen-set value of one URL.
type record struct {
	state    byte
	depth    int
	hops     int // redirect hops that led here
	attempts int
	status   int
	pageSeq  uint64 // storage sequence number of the page (fetched)
	qkey     []byte // key of the queue or delayed entry (queued)
	host     string
	hostID   uint32 // host's ID, in a version 4 record only (0: host is "")
	url      string // the URL (a legacy record, upgrade.go, was keyed by it instead)
	parent   string
	// parentRef, in a version 4 record, is the key in bucketURLs of the parent's record, which
	// holds the parent's URL: written instead of the parent when it has one (and parent then
	// holds that URL once the record is read by txn.record).
	parentRef []byte
	reason    string
	detail    string
	role      Role
}

// recordVersion4 is the first byte of a record (see encode4); versions 1 to 3 were those of
// formats 1 and 2 (upgrade.go).
const recordVersion4 = 4

// Kinds of queue key in a record.
const (
	qkeyNone     = 0 // not queued
	qkeyQueue    = 1 // idQueueKey(hostID, seq): the uvarint seq follows
	qkeyVerbatim = 2 // any other key (a delayed entry's): uvarint length and the key follow
)

// Forms of a URL written relative to a host key (hostRelative).
const (
	relWhole = 0 // the whole URL follows
	relHTTP  = 1 // "http://" + host is left out
	relHTTPS = 2 // "https://" + host is left out
)

// appendHostRelative appends uvarint(len) and the form of url relative to host: a byte saying
// which prefix is left out, and the rest. "" is written as a zero length.
func appendHostRelative(b []byte, host, url string) []byte {
	if url == "" {
		return append(b, 0)
	}
	form, rest := hostRelative(host, url)
	b = binary.AppendUvarint(b, uint64(1+len(rest)))
	b = append(b, form)
	return append(b, rest...)
}

// hostRelative returns url's form relative to host and what remains of it.
func hostRelative(host, url string) (byte, string) {
	if host != "" {
		for _, f := range []struct {
			form   byte
			scheme string
		}{{relHTTP, "http://"}, {relHTTPS, "https://"}} {
			if len(url) > len(f.scheme)+len(host) && url[:len(f.scheme)] == f.scheme && url[len(f.scheme):len(f.scheme)+len(host)] == host {
				if c := url[len(f.scheme)+len(host)]; c == '/' || c == '?' || c == '#' {
					return f.form, url[len(f.scheme)+len(host):]
				}
			}
		}
	}
	return relWhole, url
}

// fromHostRelative rebuilds a URL from its form relative to host.
func fromHostRelative(host string, form byte, rest []byte) (string, error) {
	switch form {
	case relWhole:
		return string(rest), nil
	case relHTTP:
		return "http://" + host + string(rest), nil
	case relHTTPS:
		return "https://" + host + string(rest), nil
	}
	return "", errBadRecord
}

// queueFP is the form byte of a queue value that holds a fingerprint: the key of its record in
// bucketURLs.
const queueFP = 3

// fpQueueValue is the queue value of the record under fingerprint fp.
func fpQueueValue(fp uint64) []byte {
	return binary.BigEndian.AppendUint64(append(make([]byte, 0, 9), queueFP), fp)
}

// queueRef returns the fingerprint a queue value holds, and whether it holds one.
func queueRef(v []byte) ([]byte, bool) {
	if len(v) == 9 && v[0] == queueFP {
		return v[1:], true
	}
	return nil, false
}

var errBadRecord = errors.New("bad URL record")

// Bits of a version 4 record's second byte: the state (1 to 4), the role, the kind of queue key.
const (
	v4StateMask = 0x07
	v4Requisite = 0x08
	v4QkeyShift = 4    // qkeyNone, qkeyQueue or qkeyVerbatim
	v4ParentRef = 0x40 // the parent is a parentRef: 8 bytes follow instead of the URL
)

// Bits of a version 4 record's third byte: which of the fields that are mostly zero follow.
const (
	v4Depth = 1 << iota
	v4Attempts
	v4Status
	v4PageSeq
	v4Hops
	v4Parent
	v4Reason
	v4Detail
)

// encode4 returns r as a version 4 record, which holds r.url and names its host by r.hostID:
// version, state byte (state, role, kind of queue key), presence byte, then the present numbers
// (uvarint: depth, attempts, status, pageSeq, hops), the queue key (as in version 2, a queue
// key being idQueueKey(hostID, seq)), uvarint hostID, the URL and the present parent relative to
// the host (appendHostRelative) or its parentRef, and the present reason and detail. A field is present if it is
// not zero, so the encoding of a record is unique.
func (r *record) encode4() []byte {
	b := make([]byte, 3, 24+len(r.url)+len(r.parent)+len(r.reason)+len(r.detail))
	b[0] = recordVersion4
	p := idQueuePrefix(r.hostID)
	kind := byte(qkeyNone)
	switch {
	case r.qkey == nil:
	case len(r.qkey) == len(p)+8 && bytes.HasPrefix(r.qkey, p):
		kind = qkeyQueue
	default:
		kind = qkeyVerbatim
	}
	b[1] = r.state | kind<<v4QkeyShift
	if r.role == RoleRequisite {
		b[1] |= v4Requisite
	}
	var flags byte
	for i, n := range []uint64{uint64(r.depth), uint64(r.attempts), uint64(r.status), r.pageSeq, uint64(r.hops)} {
		if n != 0 {
			flags |= 1 << i
			b = binary.AppendUvarint(b, n)
		}
	}
	switch kind {
	case qkeyQueue:
		b = binary.AppendUvarint(b, binary.BigEndian.Uint64(r.qkey[len(p):]))
	case qkeyVerbatim:
		b = binary.AppendUvarint(b, uint64(len(r.qkey)))
		b = append(b, r.qkey...)
	}
	b = binary.AppendUvarint(b, uint64(r.hostID))
	b = appendHostRelative(b, r.host, r.url)
	switch {
	case len(r.parentRef) == 8:
		flags |= v4Parent
		b[1] |= v4ParentRef
		b = append(b, r.parentRef...)
	case r.parent != "":
		flags |= v4Parent
		b = appendHostRelative(b, r.host, r.parent)
	}
	for i, s := range []string{r.reason, r.detail} {
		if s != "" {
			flags |= v4Reason << i
			b = binary.AppendUvarint(b, uint64(len(s)))
			b = append(b, s...)
		}
	}
	b[2] = flags
	return b
}

// decodeRecord4 parses a version 4 record, taking the name of its host ID from hostName.
func decodeRecord4(b []byte, hostName func(uint32) (string, error)) (record, error) {
	var r record
	if len(b) < 3 {
		return r, errBadRecord
	}
	d := decoder{b: b[3:]}
	r.state = b[1] & v4StateMask
	flags := b[2]
	kind := b[1] >> v4QkeyShift & 3
	if r.state < stQueued || r.state > stExcluded || kind > qkeyVerbatim {
		return record{}, errBadRecord
	}
	if b[1]&v4Requisite != 0 {
		r.role = RoleRequisite
	}
	var nums [5]uint64
	for i := range nums {
		if flags&(1<<i) != 0 {
			if nums[i] = d.uvarint(); nums[i] == 0 {
				d.bad = true
			}
		}
	}
	for _, i := range []int{0, 1, 2, 4} {
		if nums[i] > math.MaxInt32 {
			d.bad = true
		}
	}
	r.depth, r.attempts, r.status, r.pageSeq, r.hops = int(nums[0]), int(nums[1]), int(nums[2]), nums[3], int(nums[4])
	var qseq uint64
	var qkey []byte
	switch kind {
	case qkeyQueue:
		qseq = d.uvarint()
	case qkeyVerbatim:
		if qkey = d.bytes(); len(qkey) == 0 {
			d.bad = true
		}
	}
	id := d.uvarint()
	if id > math.MaxUint32 {
		d.bad = true
	}
	url := d.bytes()
	var strs [3][]byte
	for i := range strs {
		switch {
		case flags&(v4Parent<<i) == 0:
		case i == 0 && b[1]&v4ParentRef != 0:
			if len(d.b) < 8 {
				d.bad = true
				break
			}
			r.parentRef = bytes.Clone(d.b[:8])
			d.b = d.b[8:]
		default:
			if strs[i] = d.bytes(); len(strs[i]) == 0 {
				d.bad = true
			}
		}
	}
	if b[1]&v4ParentRef != 0 && r.parentRef == nil || b[1]&0x80 != 0 {
		d.bad = true
	}
	if d.bad || len(d.b) != 0 || len(url) == 0 {
		return record{}, errBadRecord
	}
	r.hostID, r.reason, r.detail = uint32(id), string(strs[1]), string(strs[2])
	var err error
	if r.hostID != 0 {
		if r.host, err = hostName(r.hostID); err != nil {
			return record{}, err
		}
	}
	switch kind {
	case qkeyQueue:
		r.qkey = idQueueKey(r.hostID, qseq)
	case qkeyVerbatim:
		r.qkey = bytes.Clone(qkey)
	}
	if r.url, err = fromHostRelative(r.host, url[0], url[1:]); err != nil || r.url == "" {
		return record{}, errBadRecord
	}
	if strs[0] != nil {
		if r.parent, err = fromHostRelative(r.host, strs[0][0], strs[0][1:]); err != nil {
			return record{}, err
		}
	}
	return r, nil
}

// decoder reads the fields of a version 2 record; bad is set by the first malformed one.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) uvarint() uint64 {
	n, w := binary.Uvarint(d.b)
	if w <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[w:]
	return n
}

// small reads a uvarint that must fit an int32.
func (d *decoder) small() int {
	n := d.uvarint()
	if n > math.MaxInt32 {
		d.bad = true
	}
	return int(n)
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.bad = true
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.bad = true
		return nil
	}
	s := d.b[:n]
	d.b = d.b[n:]
	return s
}

// hostBucketKey is the key of host in the hosts bucket: bbolt keys cannot be empty, so the
// host "" (of excluded URLs without one) is stored as "\x00", which no host contains.
func hostBucketKey(host string) []byte {
	if host == "" {
		return []byte{0}
	}
	return []byte(host)
}

func hostFromBucketKey(k []byte) string {
	if len(k) == 1 && k[0] == 0 {
		return ""
	}
	return string(k)
}

// hostCounts are the per-host counters, on disk and in memory. Queued includes Delayed.
type hostCounts struct {
	Queued, Delayed, Fetched, Failed, Excluded int
	LastError                                  string
}

// Versions of a host's value in bucketHosts: 1 holds the counters, 2 also the host's ID.
const (
	hostCountsVersion1 = 1
	hostCountsVersion  = 2
)

// encode returns c and the host's id as a version 2 value.
func (c *hostCounts) encode(id uint32) []byte {
	b := []byte{hostCountsVersion}
	b = binary.AppendUvarint(b, uint64(id))
	for _, n := range []int{c.Queued, c.Delayed, c.Fetched, c.Failed, c.Excluded} {
		b = binary.AppendVarint(b, int64(n))
	}
	b = binary.AppendUvarint(b, uint64(len(c.LastError)))
	return append(b, c.LastError...)
}

var errBadHost = errors.New("bad host counters")

func decodeHostCounts(b []byte) (hostCounts, error) {
	c, _, err := decodeHost(b)
	return c, err
}

// decodeHost parses a host's value: its counters and its ID (0 if it has none yet).
func decodeHost(b []byte) (hostCounts, uint32, error) {
	var c hostCounts
	var id uint32
	if b == nil {
		return c, 0, nil
	}
	if len(b) < 1 || b[0] != hostCountsVersion1 && b[0] != hostCountsVersion {
		return c, 0, errBadHost
	}
	version := b[0]
	b = b[1:]
	if version == hostCountsVersion {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > math.MaxUint32 {
			return c, 0, errBadHost
		}
		id, b = uint32(n), b[w:]
	}
	for _, p := range []*int{&c.Queued, &c.Delayed, &c.Fetched, &c.Failed, &c.Excluded} {
		n, w := binary.Varint(b)
		if w <= 0 || n < math.MinInt32 || n > math.MaxInt32 {
			return c, 0, errBadHost
		}
		*p, b = int(n), b[w:]
	}
	n, w := binary.Uvarint(b)
	if w <= 0 || n != uint64(len(b)-w) {
		return c, 0, errBadHost
	}
	c.LastError = string(b[w:])
	return c, id, nil
}

func (c *hostCounts) add(d *hostCounts) {
	c.Queued += d.Queued
	c.Delayed += d.Delayed
	c.Fetched += d.Fetched
	c.Failed += d.Failed
	c.Excluded += d.Excluded
	if d.LastError != "" {
		c.LastError = d.LastError
	}
}

// Names in the counts bucket.
const (
	countQueued   = "queued"
	countDelayed  = "delayed"
	countFetched  = "fetched"
	countFailed   = "failed"
	countExcluded = "excluded"
	countDropped  = "dropped"
	prefixFailed  = "failed\x00"
	prefixExclude = "excluded\x00"
)

func counterValue(b []byte) (int, error) {
	if len(b) != 8 {
		return 0, errors.New("bad counter")
	}
	return int(int64(binary.BigEndian.Uint64(b))), nil
}

func counterBytes(n int) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(int64(n)))
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i]
}
