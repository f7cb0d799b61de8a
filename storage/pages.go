package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
	"go.etcd.io/bbolt"
)

// trimPages is how many pages Pages reads between two trims of the mapped file (see TrimRSS).
const trimPages = 1024

// maxBodySize bounds what a stored body may decompress to; far above any --max-body.
const maxBodySize = 1 << 30

// codec holds the zstd encoder and decoder shared by all stores; creating them is not cheap,
// so it happens once, on first use. EncodeAll and DecodeAll are safe for concurrent use. The
// encoder works at zstd's fastest level, whose bodies are about 5% larger than the default
// level's for a third to a half less CPU, and has one set of match tables rather than one per
// CPU: PutPage runs inside write transactions, which bbolt runs one at a time, and one set
// stays warm in the cache where several, taken in turn, each go cold. Any level decodes alike.
var codec = sync.OnceValues(func() (*zstd.Encoder, *zstd.Decoder) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithLowerEncoderMem(true),
		zstd.WithEncoderConcurrency(1))
	if err != nil {
		panic("storage: zstd encoder: " + err.Error()) // only on invalid options
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxBodySize), zstd.WithDecoderConcurrency(0))
	if err != nil {
		panic("storage: zstd decoder: " + err.Error())
	}
	return enc, dec
})

// scratch holds buffers that bodies are compressed into before being copied out at their
// size; buffers over maxScratch are dropped rather than kept.
var scratch = sync.Pool{New: func() any { return new([]byte) }}

const maxScratch = 1 << 20

// compress returns body compressed with zstd in a slice of its own.
func compress(body []byte) []byte {
	enc, _ := codec()
	buf := scratch.Get().(*[]byte)
	*buf = enc.EncodeAll(body, (*buf)[:0])
	z := bytes.Clone(*buf)
	if cap(*buf) <= maxScratch {
		scratch.Put(buf)
	}
	return z
}

func seqKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, seq)
}

// appendFill is the fill percent of the pages, bodies and robots.txt fetches buckets: their keys are sequence
// numbers, so every put appends at the end and a page that splits off is never written again;
// bbolt's default (half) would leave each of them half empty for good.
const appendFill = 1.0

// PutPage stores p inside the caller's write transaction tx (so that the frontier can mark the
// URL done in the same commit), assigning p.Seq the next fetch sequence number, which it also
// returns. The metadata (JSON), the body and the rendered DOM are stored compressed with zstd.
// A revisit's page that names the version it confirms is stored without a body (see
// Page.RevisitOf and Page.SameAs; a SameAs naming a page that holds no body of its own is
// stored with its body); a rendered page's DOM is always stored as its own. A page with a
// rendered DOM but no RenderInfo is refused. If tx is rolled back, nothing is stored and the
// sequence number is reused.
func PutPage(tx *bbolt.Tx, p *Page) (seq uint64, err error) {
	pages, bodies := tx.Bucket(bucketPages), tx.Bucket(bucketBodies)
	if pages == nil || bodies == nil {
		return 0, fmt.Errorf("storage: put page: %w (page buckets missing)", ErrNotStore)
	}
	var rendered *bbolt.Bucket
	switch {
	case p.Render != nil:
		if rendered = tx.Bucket(bucketRendered); rendered == nil {
			return 0, fmt.Errorf("storage: put page %s: %w (bucket %s missing)", p.URL, ErrNotStore, bucketRendered)
		}
		rendered.FillPercent = appendFill
	case p.Rendered != nil:
		return 0, fmt.Errorf("storage: put page %s: a rendered DOM without its RenderInfo", p.URL)
	}
	pages.FillPercent, bodies.FillPercent = appendFill, appendFill
	seq, err = pages.NextSequence()
	if err != nil {
		return 0, fmt.Errorf("storage: put page %s: %w", p.URL, err)
	}
	p.Seq = seq
	meta, err := marshalPage(p)
	if err != nil {
		return 0, fmt.Errorf("storage: put page %s: %w", p.URL, err)
	}
	key := seqKey(seq)
	if err := pages.Put(key, compress(meta)); err != nil {
		return 0, fmt.Errorf("storage: put page %s: %w", p.URL, err)
	}
	if rendered != nil {
		if err := rendered.Put(key, compress(p.Rendered)); err != nil {
			return 0, fmt.Errorf("storage: put page %s: rendered DOM: %w", p.URL, err)
		}
	}
	if bodiless(p, bodies) {
		return seq, nil
	}
	if err := bodies.Put(key, compress(p.Body)); err != nil {
		return 0, fmt.Errorf("storage: put page %s: %w", p.URL, err)
	}
	return seq, nil
}

// StorePage stores p (as PutPage does) in a commit of its own, coalesced with concurrent ones
// into one fsync (bbolt's DB.Batch), for a page whose URL's state is recorded elsewhere (a
// crawl shared through Redis): stored first, a crash before the state is recorded fetches it
// again, never marks done a page that is not stored.
func (db *DB) StorePage(p *Page) (seq uint64, err error) {
	err = db.Batch(func(tx *bbolt.Tx) error {
		seq, err = PutPage(tx, p)
		return err
	})
	return seq, err
}

// bodiless reports whether p is stored without a body: a 304 confirming page RevisitOf (it
// has none), or an answer whose body is that of page SameAs, when that page holds it.
func bodiless(p *Page, bodies *bbolt.Bucket) bool {
	switch {
	case p.RevisitOf != 0:
		return len(p.Body) == 0
	case p.SameAs != 0:
		return bodies.Get(seqKey(p.SameAs)) != nil
	}
	return false
}

// HasPage reports whether tx holds the page with sequence number seq.
func HasPage(tx *bbolt.Tx, seq uint64) bool {
	pages := tx.Bucket(bucketPages)
	return pages != nil && pages.Get(seqKey(seq)) != nil
}

// Page returns the page with sequence number seq, body and rendered DOM included, or an error
// wrapping ErrNotFound. The body of a page stored without one (see PutPage) is that of the
// page its SameAs names, or none for a 304 naming the page it confirms (RevisitOf).
func (db *DB) Page(seq uint64) (*Page, error) { return db.page(seq, true) }

// PageMeta is Page without the body and the rendered DOM (Page.Body and Page.Rendered are nil).
func (db *DB) PageMeta(seq uint64) (*Page, error) { return db.page(seq, false) }

func (db *DB) page(seq uint64, body bool) (*Page, error) {
	var p *Page
	err := db.View(func(tx *bbolt.Tx) error {
		pages := tx.Bucket(bucketPages)
		if pages == nil {
			return ErrNotFound
		}
		v := pages.Get(seqKey(seq))
		if v == nil {
			return ErrNotFound
		}
		var err error
		p, err = decodePage(seq, v, contentsOf(tx), body)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("storage: page %d in %s: %w", seq, db.path, err)
	}
	return p, nil
}

// Pages calls fn for every stored page in fetch (Seq) order, bodies and rendered DOMs
// decompressed (as Page reads them), stopping at
// the first error fn returns (which Pages returns). All pages come from one read transaction, a
// consistent snapshot; it is held open while Pages runs, which keeps a concurrent writer from
// growing the file in place, so fn should not take long per page when a crawl is running in the
// same process. fn must not write to the store.
func (db *DB) Pages(fn func(p *Page) error) error {
	return db.pages(true, fn)
}

// PagesMeta is Pages without the bodies and rendered DOMs (Page.Body and Page.Rendered are
// nil): it reads only the metadata.
func (db *DB) PagesMeta(fn func(p *Page) error) error {
	return db.pages(false, fn)
}

// errStop marks an error returned by the caller's fn, so that it is returned unwrapped.
type errStop struct{ err error }

func (e errStop) Error() string { return e.err.Error() }

func (db *DB) pages(body bool, fn func(p *Page) error) error {
	err := db.View(func(tx *bbolt.Tx) error {
		pages := tx.Bucket(bucketPages)
		if pages == nil {
			return nil
		}
		in := contentsOf(tx)
		c := pages.Cursor()
		n := 0
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if n++; n%trimPages == 0 {
				_ = trimTx(tx) // keep a full scan from making the whole file resident
			}
			if len(k) != 8 {
				return fmt.Errorf("%w: a page key of %d bytes (%x)", ErrDamaged, len(k), k)
			}
			p, err := decodePage(binary.BigEndian.Uint64(k), v, in, body)
			if err != nil {
				return err
			}
			if err := fn(p); err != nil {
				return errStop{err}
			}
		}
		return nil
	})
	var stop errStop
	if errors.As(err, &stop) {
		return stop.err
	}
	if err != nil {
		return fmt.Errorf("storage: pages in %s: %w", db.path, err)
	}
	return nil
}

// contents are the buckets that hold what a page's metadata points to; either may be nil (a
// store opened read-only that was written before it had them).
type contents struct {
	bodies, rendered *bbolt.Bucket
}

func contentsOf(tx *bbolt.Tx) contents {
	return contents{bodies: tx.Bucket(bucketBodies), rendered: tx.Bucket(bucketRendered)}
}

// decodePage decodes the metadata v of page seq and, if body, its body and rendered DOM from
// in. It copies everything out of bbolt's memory. A body or rendered DOM the metadata calls
// for and the store does not hold, or that does not decode, is ErrDamaged.
func decodePage(seq uint64, v []byte, in contents, body bool) (*Page, error) {
	_, dec := codec()
	if len(v) > 0 && v[0] != '{' { // compressed; a store written before keeps plain JSON
		var err error
		if v, err = dec.DecodeAll(v, nil); err != nil {
			return nil, fmt.Errorf("%w: page %d: metadata: %v", ErrDamaged, seq, err)
		}
	}
	p := new(Page)
	if err := json.Unmarshal(v, p); err != nil {
		return nil, fmt.Errorf("%w: page %d: metadata: %v", ErrDamaged, seq, err)
	}
	p.Seq = seq
	if !body {
		return p, nil
	}
	if p.Render != nil {
		var z []byte
		if in.rendered != nil {
			z = in.rendered.Get(seqKey(seq))
		}
		if z == nil {
			return nil, fmt.Errorf("%w: page %d: rendered DOM missing", ErrDamaged, seq)
		}
		dom, err := dec.DecodeAll(z, nil)
		if err != nil {
			return nil, fmt.Errorf("%w: page %d: rendered DOM: %v", ErrDamaged, seq, err)
		}
		if dom == nil {
			dom = []byte{}
		}
		p.Rendered = dom
	}
	var z []byte
	if in.bodies != nil {
		z = in.bodies.Get(seqKey(seq))
		if z == nil && p.SameAs != 0 {
			z = in.bodies.Get(seqKey(p.SameAs))
		}
	}
	switch {
	case z == nil && p.RevisitOf != 0:
		return p, nil // a 304 stored bodiless
	case z == nil:
		return nil, fmt.Errorf("%w: page %d: body missing", ErrDamaged, seq)
	}
	b, err := dec.DecodeAll(z, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: page %d: body: %v", ErrDamaged, seq, err)
	}
	if len(b) > 0 {
		p.Body = b
	}
	return p, nil
}

// StoredBodies returns how many page bodies the store holds and their size as stored
// (compressed). A page stored without a body of its own (see PutPage) counts in neither.
func (db *DB) StoredBodies() (n int, size int64, err error) {
	err = db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketBodies)
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, v []byte) error {
			n++
			size += int64(len(v))
			return nil
		})
	})
	if err != nil {
		return 0, 0, fmt.Errorf("storage: bodies in %s: %w", db.path, err)
	}
	return n, size, nil
}
