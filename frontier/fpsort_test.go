package frontier

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortByFP: sortByFP orders fingerprints as a comparison sort does, keeping each entry's
// place with its fingerprint, for hashes and for fingerprints that share their top bytes or
// repeat (as a hostile set of URLs might make them).
func TestSortByFP(t *testing.T) {
	seed := uint64(20261203)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	gens := map[string]func(i int) uint64{
		"hashes":         func(int) uint64 { return rng.Uint64() },
		"one top byte":   func(int) uint64 { return 0xab<<56 | rng.Uint64()>>8 },
		"top 7 bytes":    func(int) uint64 { return 0x0123456789abcd00 | rng.Uint64()&0xff },
		"few values":     func(int) uint64 { return uint64(rng.IntN(5)) << 60 },
		"all equal":      func(int) uint64 { return 42 },
		"ascending":      func(i int) uint64 { return uint64(i) << 20 },
		"descending":     func(i int) uint64 { return ^uint64(i) },
		"low bytes only": func(int) uint64 { return uint64(rng.IntN(1 << 16)) },
	}
	for name, gen := range gens {
		for _, n := range []int{0, 1, 2, sortSmall, sortSmall + 1, 1000, 100_000} {
			t.Run(fmt.Sprintf("%s/n=%d", name, n), func(t *testing.T) {
				r := make([]fpLoc, n)
				for i := range r {
					r[i] = fpLoc{gen(i), uint32(i)}
				}
				want := slices.Clone(r)
				slices.SortStableFunc(want, func(a, b fpLoc) int { return cmp.Compare(a.fp, b.fp) })
				sortByFP(r)
				for i := range r {
					if r[i].fp != want[i].fp {
						t.Fatalf("entry %d: fingerprint %x, want %x", i, r[i].fp, want[i].fp)
					}
				}
				// The same entries (fingerprint and place), whatever the order of equal ones.
				byBoth := func(a, b fpLoc) int { return cmp.Or(cmp.Compare(a.fp, b.fp), cmp.Compare(a.loc, b.loc)) }
				slices.SortFunc(r, byBoth)
				slices.SortFunc(want, byBoth)
				if !slices.Equal(r, want) {
					t.Fatal("the entries changed")
				}
			})
		}
	}
}

// BenchmarkSortByFP sorts a million hashed fingerprints, against slices.SortFunc.
func BenchmarkSortByFP(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	in := make([]fpLoc, 1_000_000)
	for i := range in {
		in[i] = fpLoc{rng.Uint64(), uint32(i)}
	}
	r := make([]fpLoc, len(in))
	b.Run("radix", func(b *testing.B) {
		for b.Loop() {
			copy(r, in)
			sortByFP(r)
		}
	})
	b.Run("SortFunc", func(b *testing.B) {
		for b.Loop() {
			copy(r, in)
			slices.SortFunc(r, func(a, b fpLoc) int { return cmp.Compare(a.fp, b.fp) })
		}
	})
}
