// Package storetest damages bbolt store files the way a failing disk would, for the tests of
// what reads them (storage, cmd/crawl).
package storetest

import (
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"testing"
)

// MustDamageLeaves is DamageLeaves, failing t on an error.
func MustDamageLeaves(t testing.TB, path string, pick func(i, n int) bool) int {
	t.Helper()
	n, err := DamageLeaves(path, pick)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// DamageLeaves changes the page id in the header of the leaf pages of the bbolt file at path
// that pick chooses (by index among them, and their count), as bytes flipped on disk would;
// bbolt asserts on such a page when it reads it. Only pages in use are counted: those reached
// from the meta page through the root bucket's tree and the trees of the buckets it holds,
// nested ones included (free pages and those of older versions keep a leaf's header, and
// damaging one changes nothing a reader sees). The meta pages and the root bucket's pages are
// left alone, so the store still opens. It returns how many pages it damaged.
func DamageLeaves(path string, pick func(i, n int) bool) (int, error) {
	return damageLeaves(path, "", pick)
}

// MustDamageLeavesOf is DamageLeavesOf, failing t on an error.
func MustDamageLeavesOf(t testing.TB, path, bucket string, pick func(i, n int) bool) int {
	t.Helper()
	n, err := DamageLeavesOf(path, bucket, pick)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// DamageLeavesOf is DamageLeaves choosing among the leaf pages of the top-level bucket named
// bucket (those of the buckets nested in it included) only.
func DamageLeavesOf(path, bucket string, pick func(i, n int) bool) (int, error) {
	return damageLeaves(path, bucket, pick)
}

// damageLeaves is DamageLeaves among the leaves of top-level bucket only, or all if it is "".
func damageLeaves(path, only string, pick func(i, n int) bool) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	const ps = 4096
	m0, m1 := data[16:], data[ps+16:]
	meta := m0
	if binary.LittleEndian.Uint64(m1[48:]) > binary.LittleEndian.Uint64(m0[48:]) { // txid
		meta = m1
	}
	// A page: a 16-byte header (id, flags, count, overflow), then count elements. A branch's
	// are 16 bytes (pos, ksize, child pgid); a leaf's are 16 bytes (flags, pos, ksize, vsize),
	// and a bucket's value (element flag 0x01) begins with its tree's root pgid (0: inline).
	var leaves []int
	seen := map[uint64]bool{}
	var walk func(id uint64, rootTree bool, bucket string) error
	walk = func(id uint64, rootTree bool, bucket string) error {
		if seen[id] {
			return nil
		}
		seen[id] = true
		if (id+1)*ps > uint64(len(data)) {
			return fmt.Errorf("storetest: %s: page %d beyond the file", path, id)
		}
		h := data[id*ps:]
		count := int(binary.LittleEndian.Uint16(h[10:]))
		switch binary.LittleEndian.Uint16(h[8:]) {
		case 0x01: // branch
			for e := range count {
				if err := walk(binary.LittleEndian.Uint64(h[16+16*e+8:]), rootTree, bucket); err != nil {
					return err
				}
			}
		case 0x02: // leaf
			if !rootTree && (only == "" || bucket == only) {
				leaves = append(leaves, int(id))
			}
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
	if err := walk(binary.LittleEndian.Uint64(meta[16:]), true, ""); err != nil {
		return 0, err
	}
	slices.Sort(leaves)
	n := 0
	for j, i := range leaves {
		if pick(j, len(leaves)) {
			binary.LittleEndian.PutUint64(data[i*ps:], uint64(i)+1_000_000)
			n++
		}
	}
	return n, os.WriteFile(path, data, 0o644)
}
