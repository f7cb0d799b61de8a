// Package storetest damages bbolt store files the way a failing disk would, for the tests of
// what reads them (storage, cmd/crawl).
package storetest

import (
	"encoding/binary"
	"os"
)

// DamageLeaves changes the page id in the header of the leaf pages of the bbolt file at path
// that pick chooses (by index among them, and their count), as bytes flipped on disk would;
// bbolt asserts on such a page when it reads it. The meta pages and the root bucket's pages
// are left alone, so the store still opens. It returns how many pages it damaged.
func DamageLeaves(path string, pick func(i, n int) bool) (int, error) {
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
	// The root bucket's tree: its branch pages list their children as 16-byte elements (pos,
	// ksize, pgid) after the 16-byte page header.
	rootTree := map[uint64]bool{}
	var walk func(id uint64)
	walk = func(id uint64) {
		rootTree[id] = true
		h := data[id*ps:]
		if binary.LittleEndian.Uint16(h[8:]) != 0x01 {
			return
		}
		for e := range int(binary.LittleEndian.Uint16(h[10:])) {
			walk(binary.LittleEndian.Uint64(h[16+16*e+8:]))
		}
	}
	walk(binary.LittleEndian.Uint64(meta[16:]))
	var leaves []int
	for i := 2; (i+1)*ps <= len(data); i++ {
		h := data[i*ps:]
		if binary.LittleEndian.Uint64(h) == uint64(i) && binary.LittleEndian.Uint16(h[8:]) == 0x02 && !rootTree[uint64(i)] {
			leaves = append(leaves, i)
		}
	}
	n := 0
	for j, i := range leaves {
		if pick(j, len(leaves)) {
			binary.LittleEndian.PutUint64(data[i*ps:], uint64(i)+1_000_000)
			n++
		}
	}
	return n, os.WriteFile(path, data, 0o644)
}
