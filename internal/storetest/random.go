package storetest

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
)

// Page is a page in use in a bbolt file: its id, its type (0x01 branch, 0x02 leaf), the
// top-level bucket it belongs to ("" for the root bucket's own pages) and how many pages it
// runs over past itself.
type Page struct {
	ID       uint64
	Flags    uint16
	Bucket   string
	Overflow uint32
}

// File is a bbolt file held in memory, to be damaged and written out. Its page size is 4 KiB.
type File struct {
	Data  []byte
	Root  uint64 // the root bucket's root page
	Pages []Page // the pages in use, by id
}

const pageSize = 4096

// ReadFile decodes the pages in use of the bbolt file data (as DamageLeaves finds them).
func ReadFile(data []byte) (*File, error) {
	f := &File{Data: data}
	m0, m1 := data[16:], data[pageSize+16:]
	meta := m0
	if binary.LittleEndian.Uint64(m1[48:]) > binary.LittleEndian.Uint64(m0[48:]) {
		meta = m1
	}
	f.Root = binary.LittleEndian.Uint64(meta[16:])
	seen := map[uint64]bool{}
	var walk func(id uint64, rootTree bool, bucket string) error
	walk = func(id uint64, rootTree bool, bucket string) error {
		if seen[id] {
			return nil
		}
		seen[id] = true
		if (id+1)*pageSize > uint64(len(data)) {
			return fmt.Errorf("storetest: page %d beyond the file", id)
		}
		h := data[id*pageSize:]
		flags, count := binary.LittleEndian.Uint16(h[8:]), int(binary.LittleEndian.Uint16(h[10:]))
		f.Pages = append(f.Pages, Page{ID: id, Flags: flags, Bucket: bucket, Overflow: binary.LittleEndian.Uint32(h[12:])})
		switch flags {
		case 0x01:
			for e := range count {
				if err := walk(binary.LittleEndian.Uint64(h[16+16*e+8:]), rootTree, bucket); err != nil {
					return err
				}
			}
		case 0x02:
			for e := range count {
				el := h[16+16*e:]
				if binary.LittleEndian.Uint32(el)&0x01 == 0 {
					continue
				}
				pos, ksize := binary.LittleEndian.Uint32(el[4:]), binary.LittleEndian.Uint32(el[8:])
				name := bucket
				if rootTree {
					name = string(el[pos : pos+ksize])
				}
				if root := binary.LittleEndian.Uint64(el[pos+ksize:]); root != 0 {
					if err := walk(root, false, name); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	if err := walk(f.Root, true, ""); err != nil {
		return nil, err
	}
	slices.SortFunc(f.Pages, func(a, b Page) int { return int(a.ID) - int(b.ID) })
	return f, nil
}

// from is where random damage begins: past the two meta pages, which bbolt checksums.
const from = 2 * pageSize

// RandomBytes writes n random bytes at random offsets past the meta pages.
func (f *File) RandomBytes(rng *rand.Rand, n int) {
	for range n {
		f.Data[from+rng.IntN(len(f.Data)-from)] = byte(rng.Uint32())
	}
}

// FlipBit flips one random bit past the meta pages, in a page in use if inUse.
func (f *File) FlipBit(rng *rand.Rand, inUse bool) {
	off := from + rng.IntN(len(f.Data)-from)
	if inUse {
		p := f.Pages[rng.IntN(len(f.Pages))]
		off = int(p.ID)*pageSize + rng.IntN(pageSize)
	}
	f.Data[off] ^= 1 << rng.IntN(8)
}

// Zero zeroes a random range of up to max bytes past the meta pages.
func (f *File) Zero(rng *rand.Rand, max int) {
	off := from + rng.IntN(len(f.Data)-from)
	end := min(len(f.Data), off+1+rng.IntN(max))
	clear(f.Data[off:end])
}

// Truncate cuts the file at a random length past the meta pages.
func (f *File) Truncate(rng *rand.Rand) {
	f.Data = f.Data[:from+rng.IntN(len(f.Data)-from)]
}

// SelfLoop makes a page in use point to itself: a random branch page's random child, or, in a
// file without branch pages, a bucket's root in the root bucket's page. It reports whether it
// found such a page.
func (f *File) SelfLoop(rng *rand.Rand) bool {
	var branches []Page
	for _, p := range f.Pages {
		if p.Flags == 0x01 {
			branches = append(branches, p)
		}
	}
	if len(branches) == 0 {
		return false
	}
	p := branches[rng.IntN(len(branches))]
	h := f.Data[p.ID*pageSize:]
	e := rng.IntN(int(binary.LittleEndian.Uint16(h[10:])))
	binary.LittleEndian.PutUint64(h[16+16*e+8:], p.ID)
	return true
}

// RootByte sets one random zero byte of the root bucket's page (where the small buckets, the
// store's format marker among them, lie inline) to 1, as a failing disk might.
func (f *File) RootByte(rng *rand.Rand) {
	h := f.Data[f.Root*pageSize : (f.Root+1)*pageSize]
	var zeros []int
	for i, b := range h[:usedBytes(h)] {
		if b == 0 {
			zeros = append(zeros, i)
		}
	}
	if len(zeros) > 0 {
		h[zeros[rng.IntN(len(zeros))]] = 1
	}
}

// usedBytes is how far into page h its elements' keys and values reach.
func usedBytes(h []byte) int {
	count := int(binary.LittleEndian.Uint16(h[10:]))
	end := 16 + 16*count
	if binary.LittleEndian.Uint16(h[8:]) != 0x02 {
		return min(end, len(h))
	}
	for e := range count {
		el := h[16+16*e:]
		pos, ks, vs := binary.LittleEndian.Uint32(el[4:]), binary.LittleEndian.Uint32(el[8:]), binary.LittleEndian.Uint32(el[12:])
		end = max(end, 16+16*e+int(pos+ks+vs))
	}
	return min(end, len(h))
}

// Overflow sets the overflow count of a random page in use to v.
func (f *File) Overflow(rng *rand.Rand, v uint32) {
	p := f.Pages[rng.IntN(len(f.Pages))]
	binary.LittleEndian.PutUint32(f.Data[p.ID*pageSize+12:], v)
}
