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
	f, err := ReadFile(data)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	var leaves []int
	for _, pg := range f.Pages {
		if pg.Flags == 0x02 && pg.Bucket != "" && (only == "" || pg.Bucket == only) {
			leaves = append(leaves, int(pg.ID))
		}
	}
	slices.Sort(leaves)
	n := 0
	for j, i := range leaves {
		if pick(j, len(leaves)) {
			binary.LittleEndian.PutUint64(data[i*pageSize:], uint64(i)+1_000_000)
			n++
		}
	}
	return n, os.WriteFile(path, data, 0o644)
}
