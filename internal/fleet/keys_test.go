package fleet

import (
	"errors"
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
	for _, key := range []string{k.owner(5), k.epoch(5), k.inflight(5), k.hosts(5), k.counts(5), k.outbox(5), k.queue(5, "a.example"), k.delayed(5, "a.example"), k.state(5, "a.example"), k.seenLog(5), k.inbox(5)} {
		if !strings.Contains(key, "{5}") || strings.Index(key, "{") != strings.Index(key, "{5}") {
			t.Errorf("%q: first hash tag is not {5}", key)
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
