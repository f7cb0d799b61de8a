package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
)

// bbolt's page layout (go.etcd.io/bbolt/internal/common), as the walk reads it: a 16-byte
// header (id uint64, flags uint16, count uint16, overflow uint32), then count elements of 16
// bytes. A branch element is (pos, ksize uint32, child pgid uint64), its key pos bytes after
// the element's own start; a leaf element is (flags, pos, ksize, vsize uint32), its key and
// then its value pos bytes after the element's start. A leaf element with flag bucketLeaf is a
// bucket: its value begins with the bucket's root pgid and sequence (uint64 each), and a root
// of 0 means the bucket's page follows inline in the value. A freelist page lists page ids
// (uint64), its count in the first of them when the header's count is 0xFFFF.
const (
	branchPage   = 0x01
	leafPage     = 0x02
	freelistPage = 0x10
	bucketLeaf   = 0x01
	elemSize     = 16
	bucketHeader = 16
	noFreelist   = ^uint64(0)
	maxKeySize   = 32768 // bbolt's MaxKeySize
)

// Bounds of the walk that no store bbolt writes comes near: the depth of one bucket's tree
// (a B+tree of 2^64 pages is shallower) and how deep buckets nest (the crawl's nest two deep).
const (
	maxTreeDepth = 64
	maxNesting   = 32
)

// walkMode says how much the walk reads.
type walkMode int

const (
	// walkOpen checks what bbolt's readers and writers trust without checking: every page id
	// within the file, each page reached once (no cycle), its type, its overflow and its
	// elements within its pages, buckets' values and inline pages whole, the free list within
	// the file and apart from the pages in use. It reads the first page of each page in use
	// and the free list.
	walkOpen walkMode = iota
	// walkCheck also reads every key: keys in order within a page and within the range their
	// parent gives; and counts the pages neither in use nor free.
	walkCheck
	// walkSalvage hands every readable record and bucket to the visitor, passing over what it
	// cannot read.
	walkSalvage
)

// walkVisitor receives what walkSalvage reads. A bucket's path is the names of the buckets
// that hold it, its own last; k and v are the walk's own copies.
type walkVisitor interface {
	bucket(path [][]byte, seq uint64) error
	record(path [][]byte, k, v []byte) error
}

// pageWalk is one walk of a bbolt file's page graph, read with ReadAt (never through a
// mapping, so damage is an error, never a fault). Its work is bounded by the file: each page
// is read at most once, each element of a page once, and inline buckets, which lie within
// their parent's value, are bounded by maxNesting.
type pageWalk struct {
	r     io.ReaderAt
	ps    uint64 // page size
	hwm   uint64 // pages in the file (the meta page's high-water mark)
	mode  walkMode
	stop  int      // stop at this many problems (0: never)
	used  []uint64 // bit set over page ids: in use (reached) or listed free
	visit walkVisitor

	problems []string // the first max
	max      int
	total    int
	err      error  // the visitor's: ends the walk
	format   []byte // the value of crawl/format, if the walk read it

	// ahead holds the pages from aheadID on, read in one go: the walk goes through a tree's
	// pages in increasing id order, which bbolt often writes side by side. aheadN is how many
	// pages the next read takes: doubled (up to readAhead) while the walk reads on past the
	// window, one page after a jump, so that a tree scattered over the file is read a page at
	// a time rather than readAhead pages per page.
	ahead   []byte
	aheadID uint64
	aheadN  uint64
}

// readAhead is how many pages the walk reads at most at once.
const readAhead = 64

// walkItem is a page to read: its id, who pointed to it (for messages), the bucket it belongs
// to, its depth in that bucket's tree, and (walkCheck) the range its keys must lie in.
type walkItem struct {
	id, from uint64
	path     [][]byte
	depth    int
	nest     int
	lo, hi   []byte // hi nil: no upper bound
}

// walkResult is what a walk found.
type walkResult struct {
	problems []string
	total    int
	format   []byte
	found    bool // a valid meta page was found (else the walk did nothing)
}

// walkFile walks the bbolt file at path in mode, keeping the first max problems, stopping
// after stop of them (0: never). A file without a valid meta page is not walked: bbolt's Open
// judges it.
func walkFile(path string, mode walkMode, max, stop int, visit walkVisitor) (walkResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return walkResult{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return walkResult{}, err
	}
	return walkReader(f, uint64(fi.Size()), mode, max, stop, visit)
}

// walkReader is walkFile of the size bytes r reads.
func walkReader(r io.ReaderAt, size uint64, mode walkMode, max, stop int, visit walkVisitor) (walkResult, error) {
	m, ok := newestMeta(r)
	if !ok {
		return walkResult{}, nil
	}
	w := &pageWalk{r: r, ps: m.pageSize, hwm: m.pgid, mode: mode, max: max, stop: stop, visit: visit}
	w.run(m, size)
	return walkResult{problems: w.problems, total: w.total, format: w.format, found: true}, w.err
}

// newestMeta returns the meta page bbolt reads: the valid one with the higher transaction id.
func newestMeta(r io.ReaderAt) (boltMeta, bool) {
	best, found := readMeta(r, 0)
	sizes := []uint64{4096, 8192, 16384, 32768, 65536}
	if found {
		sizes = []uint64{best.pageSize}
	}
	for _, ps := range sizes {
		if m, ok := readMeta(r, int64(ps)); ok && (!found || m.txid > best.txid) {
			best, found = m, true
		}
	}
	return best, found
}

func (w *pageWalk) problem(format string, args ...any) {
	if w.total++; len(w.problems) < w.max {
		w.problems = append(w.problems, fmt.Sprintf(format, args...))
	}
}

// elemProblem is problem, for an element of page d: not counted on a lenient page.
func (w *pageWalk) elemProblem(d *pageData, format string, args ...any) {
	if !d.lenient {
		w.problem(format, args...)
	}
}

// done reports whether the walk should end: the visitor failed or enough problems were found.
func (w *pageWalk) done() bool {
	return w.err != nil || (w.stop > 0 && w.total >= w.stop)
}

// mark records page id as reached and reports whether it was not before.
func (w *pageWalk) mark(id uint64) bool {
	if w.used[id/64]&(1<<(id%64)) != 0 {
		return false
	}
	w.used[id/64] |= 1 << (id % 64)
	return true
}

func (w *pageWalk) run(m boltMeta, size uint64) {
	if w.ps < 512 || w.ps > 1<<20 {
		w.problem("meta page: page size %d", w.ps)
		return
	}
	if w.hwm < 2 {
		w.problem("meta page: %d pages", w.hwm)
		return
	}
	if n := size / w.ps; w.hwm > n { // Open refuses it first, unless Options.Damaged
		w.problem("the file holds %d pages but its meta page says %d: was it cut short?", n, w.hwm)
		if w.hwm = n; n < 2 || w.done() {
			return
		}
	}
	w.used = make([]uint64, (w.hwm+63)/64)
	w.mark(0)
	w.mark(1)
	w.tree(m.root, 0)
	if w.done() {
		return
	}
	w.freelist(m.freelist)
	if w.mode == walkCheck && !w.done() {
		first, n := uint64(0), 0
		for id := uint64(2); id < w.hwm; id++ {
			if w.used[id/64]&(1<<(id%64)) == 0 {
				if n++; n == 1 {
					first = id
				}
			}
		}
		if n > 0 {
			w.problem("%d pages neither in use nor free (the first: page %d)", n, first)
		}
	}
}

// pageName names the bucket path for a message, its bytes escaped.
func pageName(path [][]byte) string {
	if len(path) == 0 {
		return "the root bucket"
	}
	return "bucket " + strconv.Quote(string(bytes.Join(path, []byte("/"))))
}

// tree walks the bucket tree whose root page is root (nil path: the root bucket).
func (w *pageWalk) tree(root uint64, from uint64) {
	stack := []walkItem{{id: root, from: from}}
	for len(stack) > 0 && !w.done() {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		stack = w.page(it, stack)
	}
}

// page reads the page of it and returns stack with the pages it points to pushed.
func (w *pageWalk) page(it walkItem, stack []walkItem) []walkItem {
	where := pageName(it.path)
	switch {
	case it.id < 2 || it.id >= w.hwm:
		w.problem("%s: page %d points to page %d, outside the file's %d pages", where, it.from, it.id, w.hwm)
		return stack
	case !w.mark(it.id):
		w.problem("%s: page %d points to page %d, which is reached twice (a loop, or two owners)", where, it.from, it.id)
		return stack
	case it.depth > maxTreeDepth:
		w.problem("%s: page %d is %d levels deep", where, it.id, it.depth)
		return stack
	}
	p, ok := w.readPage(it.id, where)
	if !ok {
		return stack
	}
	if p.flags != branchPage && p.flags != leafPage {
		w.problem("%s: page %d is neither a branch nor a leaf (flags %#x)", where, it.id, p.flags)
		return stack
	}
	if p.flags == branchPage {
		return w.branch(it, p, stack)
	}
	return w.leaf(it, p.data, p.span, stack)
}

// pageData is a page (or an inline bucket's page) being read: its first bytes in buf, the
// rest of its span read on demand.
type pageData struct {
	r     io.ReaderAt
	off   uint64 // of the page in the file (unused when all of it is in buf)
	span  uint64 // bytes the page covers, overflow included
	buf   []byte // its first bytes
	flags uint16
	count int
	// lenient: the page's header is wrong (Salvage reads it anyway): its elements' problems
	// are not counted apart.
	lenient bool
}

// at returns the n bytes at offset off of the page; the caller has checked that they lie
// within its span.
func (d *pageData) at(off, n uint64) ([]byte, error) {
	if off+n <= uint64(len(d.buf)) {
		return d.buf[off : off+n], nil
	}
	b := make([]byte, n)
	if _, err := d.r.ReadAt(b, int64(d.off+off)); err != nil {
		return nil, err
	}
	return b, nil
}

type page struct {
	data  *pageData
	span  uint64
	flags uint16
}

// readPage reads page id's header, checks it and marks its overflow pages, and reads its
// element array.
func (w *pageWalk) readPage(id uint64, where string) (page, bool) {
	off := id * w.ps
	buf, err := w.first(id)
	if err != nil {
		w.problem("%s: page %d: %v", where, id, err)
		return page{}, false
	}
	le := binary.LittleEndian
	lenient := false
	if got := le.Uint64(buf); got != id {
		w.problem("%s: page %d says it is page %d", where, id, got)
		if w.mode != walkSalvage {
			return page{}, false
		}
		// Salvage reads on: the rest of the page may be whole, and every bound is checked;
		// what is not is passed over without a problem of its own.
		lenient = true
	}
	flags, count, overflow := le.Uint16(buf[8:]), int(le.Uint16(buf[10:])), uint64(le.Uint32(buf[12:]))
	if id+overflow >= w.hwm {
		w.problem("%s: page %d runs %d pages past itself, beyond the file's %d pages", where, id, overflow, w.hwm)
		return page{}, false
	}
	for o := id + 1; o <= id+overflow; o++ {
		if !w.mark(o) {
			w.problem("%s: page %d runs over page %d, which is reached twice", where, id, o)
			return page{}, false
		}
	}
	span := (overflow + 1) * w.ps
	d := &pageData{r: w.r, off: off, span: span, buf: buf, flags: flags, count: count, lenient: lenient}
	if flags == branchPage || flags == leafPage {
		need := uint64(pageHeader + elemSize*count)
		if need > span {
			w.problem("%s: page %d holds %d elements, more than fit in its %d bytes", where, id, count, span)
			return page{}, false
		}
		if need > uint64(len(buf)) {
			full := make([]byte, need)
			if _, err := w.r.ReadAt(full, int64(off)); err != nil {
				w.problem("%s: page %d: %v", where, id, err)
				return page{}, false
			}
			d.buf = full
		}
	}
	return page{data: d, span: span, flags: flags}, true
}

// first returns the first page size bytes of page id, valid until the next call.
func (w *pageWalk) first(id uint64) ([]byte, error) {
	if id < w.aheadID || (id-w.aheadID+1)*w.ps > uint64(len(w.ahead)) {
		if end := w.aheadID + uint64(len(w.ahead))/w.ps; id >= end && id-end < max(w.aheadN, 1) {
			w.aheadN = min(2*w.aheadN, readAhead)
		} else {
			w.aheadN = 1
		}
		n := min(w.aheadN, w.hwm-id)
		if cap(w.ahead) < int(n*w.ps) {
			w.ahead = make([]byte, readAhead*w.ps)
		}
		w.ahead, w.aheadID = w.ahead[:n*w.ps], id
		if k, err := w.r.ReadAt(w.ahead, int64(id*w.ps)); err != nil {
			if w.ahead = w.ahead[:k-k%int(w.ps)]; k < int(w.ps) {
				return nil, err
			}
		}
	}
	i := (id - w.aheadID) * w.ps
	return w.ahead[i : i+w.ps], nil
}

// branch checks a branch page's elements and pushes its children.
func (w *pageWalk) branch(it walkItem, p page, stack []walkItem) []walkItem {
	where := pageName(it.path)
	d := p.data
	if d.count == 0 {
		w.problem("%s: branch page %d is empty", where, it.id)
		return stack
	}
	le := binary.LittleEndian
	var prev []byte
	first := len(stack)
	for i := range d.count {
		e := uint64(pageHeader + elemSize*i)
		pos, ksize, child := uint64(le.Uint32(d.buf[e:])), uint64(le.Uint32(d.buf[e+4:])), le.Uint64(d.buf[e+8:])
		if ksize == 0 || ksize > maxKeySize || e+pos+ksize > p.span {
			w.elemProblem(d, "%s: branch page %d: element %d has a key of %d bytes at %d, outside the page", where, it.id, i, ksize, e+pos)
			continue
		}
		next := walkItem{id: child, from: it.id, path: it.path, depth: it.depth + 1, nest: it.nest}
		if w.mode != walkSalvage {
			k, err := d.at(e+pos, ksize)
			if err != nil {
				w.problem("%s: page %d: %v", where, it.id, err)
				return stack
			}
			if !w.inOrder(where, it, i, prev, k) {
				return stack
			}
			prev = bytes.Clone(k)
			next.lo = prev
			if n := len(stack); n > first {
				stack[n-1].hi = prev // the previous child's keys lie below this key
			}
			next.hi = it.hi
		}
		stack = append(stack, next)
	}
	slices.Reverse(stack[first:]) // the first child on top: ids mostly increase
	return stack
}

// inOrder checks (walkCheck) that key k, element i of page it, follows prev and lies within
// the page's range.
func (w *pageWalk) inOrder(where string, it walkItem, i int, prev, k []byte) bool {
	switch {
	case prev != nil && bytes.Compare(k, prev) <= 0:
		w.problem("%s: page %d: key %d (%x) does not follow key %d (%x)", where, it.id, i, k, i-1, prev)
	case it.lo != nil && bytes.Compare(k, it.lo) < 0:
		w.problem("%s: page %d: key %d (%x) precedes the key its parent gives (%x)", where, it.id, i, k, it.lo)
	case it.hi != nil && bytes.Compare(k, it.hi) >= 0:
		w.problem("%s: page %d: key %d (%x) reaches the next key of its parent (%x)", where, it.id, i, k, it.hi)
	default:
		return true
	}
	return false
}

// leaf checks a leaf page's elements (d: a page, or an inline bucket's page), hands records to
// the visitor and pushes the root pages of the buckets it holds.
func (w *pageWalk) leaf(it walkItem, d *pageData, span uint64, stack []walkItem) []walkItem {
	where := pageName(it.path)
	le := binary.LittleEndian
	var prev []byte
	for i := range d.count {
		if w.done() {
			return stack
		}
		e := uint64(pageHeader + elemSize*i)
		flags := le.Uint32(d.buf[e:])
		pos, ksize, vsize := uint64(le.Uint32(d.buf[e+4:])), uint64(le.Uint32(d.buf[e+8:])), uint64(le.Uint32(d.buf[e+12:]))
		if ksize == 0 || ksize > maxKeySize || e+pos+ksize+vsize > span {
			w.elemProblem(d, "%s: page %d: element %d has a key of %d bytes and a value of %d at %d, outside the page", where, it.id, i, ksize, vsize, e+pos)
			continue
		}
		bucket := flags&bucketLeaf != 0
		if !bucket && len(it.path) == 0 {
			w.elemProblem(d, "%s: page %d: element %d is a record, not a bucket", where, it.id, i)
			continue
		}
		// k lies in d's buffer (valid while this page is read) or a read of its own.
		k, err := d.at(e+pos, ksize)
		if err != nil {
			w.problem("%s: page %d: %v", where, it.id, err)
			return stack
		}
		if w.mode != walkSalvage {
			if !w.inOrder(where, it, i, prev, k) {
				continue
			}
			prev = k
		}
		voff := e + pos + ksize
		if !bucket {
			if w.mode == walkSalvage || (len(it.path) == 1 && bytes.Equal(it.path[0], formatBucket) && bytes.Equal(k, formatKey) && vsize <= 256) {
				v, err := d.at(voff, vsize)
				if err != nil {
					w.problem("%s: page %d: %v", where, it.id, err)
					return stack
				}
				v = bytes.Clone(v)
				if len(it.path) == 1 && bytes.Equal(it.path[0], formatBucket) && bytes.Equal(k, formatKey) {
					w.format = v
				}
				if w.mode == walkSalvage {
					w.err = w.visit.record(it.path, bytes.Clone(k), v)
				}
			}
			continue
		}
		path := append(append([][]byte(nil), it.path...), bytes.Clone(k))
		if it.nest+1 > maxNesting {
			w.problem("%s: buckets nest more than %d deep", pageName(path), maxNesting)
			continue
		}
		if vsize < bucketHeader {
			w.problem("%s: page %d: element %d is a bucket of %d bytes", where, it.id, i, vsize)
			continue
		}
		hdr, err := d.at(voff, bucketHeader)
		if err != nil {
			w.problem("%s: page %d: %v", where, it.id, err)
			return stack
		}
		root, seq := le.Uint64(hdr), le.Uint64(hdr[8:])
		if root != 0 && (root < 2 || root >= w.hwm) {
			w.problem("%s: page %d points to page %d, outside the file's %d pages", pageName(path), it.id, root, w.hwm)
			continue // not a bucket Salvage makes: a record's flag may have changed
		}
		if w.mode == walkSalvage {
			if w.err = w.visit.bucket(path, seq); w.err != nil {
				return stack
			}
		}
		if root != 0 {
			stack = append(stack, walkItem{id: root, from: it.id, path: path, nest: it.nest + 1})
			continue
		}
		stack = w.inline(it, path, d, voff, vsize, stack)
	}
	return stack
}

// inline checks the inline page of bucket path, held in the value at voff (vsize bytes) of a
// leaf element of d.
func (w *pageWalk) inline(it walkItem, path [][]byte, d *pageData, voff, vsize uint64, stack []walkItem) []walkItem {
	name := pageName(path)
	if vsize < bucketHeader+pageHeader || vsize > w.ps {
		w.problem("%s: its inline page in page %d has %d bytes", name, it.id, vsize-bucketHeader)
		return stack
	}
	v, err := d.at(voff, vsize)
	if err != nil {
		w.problem("%s: page %d: %v", name, it.id, err)
		return stack
	}
	b := bytes.Clone(v[bucketHeader:])
	le := binary.LittleEndian
	in := &pageData{r: w.r, span: uint64(len(b)), buf: b, flags: le.Uint16(b[8:]), count: int(le.Uint16(b[10:]))}
	switch {
	case in.flags != leafPage:
		w.problem("%s: its inline page in page %d is not a leaf (flags %#x)", name, it.id, in.flags)
		return stack
	case uint64(pageHeader+elemSize*in.count) > in.span:
		w.problem("%s: its inline page in page %d holds %d elements, more than fit in %d bytes", name, it.id, in.count, in.span)
		return stack
	}
	return w.leaf(walkItem{id: it.id, from: it.id, path: path, nest: it.nest + 1}, in, in.span, stack)
}

// freelist checks the free list page: within the file, every id in it a page of the file, none
// in use, none twice.
func (w *pageWalk) freelist(id uint64) {
	if id == noFreelist {
		return
	}
	const where = "the free list"
	switch {
	case id < 2 || id >= w.hwm:
		w.problem("%s: the meta page points to page %d, outside the file's %d pages", where, id, w.hwm)
		return
	case !w.mark(id):
		w.problem("%s: its page %d is in use too", where, id)
		return
	}
	p, ok := w.readPage(id, where)
	if !ok {
		return
	}
	if p.flags != freelistPage {
		w.problem("%s: page %d is not a free list page (flags %#x)", where, id, p.flags)
		return
	}
	le := binary.LittleEndian
	d := p.data
	start, n := uint64(pageHeader), uint64(d.count)
	if d.count == 0xFFFF {
		n = le.Uint64(d.buf[pageHeader:])
		start += 8
	}
	if n > (p.span-start)/8 {
		w.problem("%s: page %d lists %d pages, more than fit in its %d bytes", where, id, n, p.span)
		return
	}
	ids, err := d.at(start, n*8)
	if err != nil {
		w.problem("%s: page %d: %v", where, id, err)
		return
	}
	for i := range n {
		free := le.Uint64(ids[8*i:])
		switch {
		case free < 2 || free >= w.hwm:
			w.problem("%s: it lists page %d, outside the file's %d pages", where, free, w.hwm)
		case !w.mark(free):
			w.problem("%s: it lists page %d, which is in use (or listed twice)", where, free)
		}
		if w.done() {
			return
		}
	}
}
