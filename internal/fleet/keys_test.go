package fleet

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// Workers on different machines must agree on partitions and fingerprints: the values are
// pinned, so a change of hash (which would split a running crawl) fails here.
func TestPartitionAndFingerprintArePinned(t *testing.T) {
	if got, want := Fingerprint("http://a.example/"), uint64(0x5281f8bb529de3b0); got != want {
		t.Errorf("Fingerprint = %#x, want %#x", got, want)
	}
	for _, tc := range []struct {
		host string
		want int
	}{{"a.example", 73}, {"b.example", 566}, {"c.example:8080", 199}, {"xn--bcher-kva.example", 395}} {
		if got := PartitionOf(tc.host, 1024); got != tc.want {
			t.Errorf("PartitionOf(%q, 1024) = %d, want %d", tc.host, got, tc.want)
		}
	}
}

func TestKeysCarryPartitionTag(t *testing.T) {
	k := keys{crawl: "c1"}
	for _, key := range []string{k.owner(5), k.epoch(5), k.inflight(5), k.hosts(5), k.counts(5), k.outbox(5), k.queue(5, "a.example"), k.delayed(5, "a.example"), k.state(5, "a.example"), k.seen(5)} {
		if !strings.Contains(key, "{5}") || strings.Index(key, "{") != strings.Index(key, "{5}") {
			t.Errorf("%q: first hash tag is not {5}", key)
		}
	}
	// A member is h·10^10 + l: h the top 29 bits, l the 33 below; the largest fits an int64,
	// so Redis keeps members as 8-byte integers.
	for fp, want := range map[uint64]string{0x0102030405060708: "21136324316037570", 0: "0", 3: "0", 1<<64 - 1: "5368709118589934591"} {
		if got := seenMember(fp); got != want {
			t.Errorf("seenMember(%#x) = %q, want %q", fp, got, want)
		}
	}
}

// The buckets a seen block declares cover every bucket a script may touch: each hash's
// bucket under every count it may reach, and both buckets of each split on the way.
func TestSeenBlockBuckets(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, v := range []seenView{{1, 0}, {1, 200}, {2, 129}, {3, 300}, {63, 8000}, {64, 8100}, {100, 12_800}, {1000, 1}} {
		hs := make([]uint64, 200)
		for i := range hs {
			hs[i] = seenHash(rng.Uint64())
		}
		k := seenSplits(v, len(hs), seenSlackMin)
		if k < seenSlackMin {
			t.Errorf("%v: %d splits allowed, want at least %d", v, k, seenSlackMin)
		}
		got := map[int]bool{}
		for _, b := range seenBlockBuckets(v, k, hs) {
			got[b] = true
		}
		if v.n > 1 && !got[v.n-1] {
			t.Errorf("%v: bucket n-1 not declared", v)
		}
		for n := v.n; n <= v.n+k; n++ {
			for _, h := range hs {
				if b := seenBucket(h, n); !got[b] {
					t.Fatalf("%v: hash %d's bucket %d under %d buckets not declared", v, h, b, n)
				}
			}
			if n < v.n+k && (!got[n] || !got[n-seenTop(n)]) {
				t.Fatalf("%v: split at %d buckets (%d into %d) not declared", v, n, n-seenTop(n), n)
			}
		}
	}
}

func TestValidName(t *testing.T) {
	for _, ok := range []string{"default", "news-2026.v1_a"} {
		if err := validName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a{b}", "a:b", "a b", strings.Repeat("x", 65)} {
		if err := validName(bad); !errors.Is(err, ErrCrawlName) {
			t.Errorf("%q: %v, want ErrCrawlName", bad, err)
		}
	}
}
