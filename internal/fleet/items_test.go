package fleet

import (
	"errors"
	"strings"
	"testing"

	"github.com/crawl-project/crawl/frontier"
)

func TestItemRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		it   item
		size int // encoded bytes, at most
	}{
		{"seed", item{URL: "https://a.example/", Host: "a.example"}, 2},
		{"https path, parent on the host", item{URL: "https://a.example/b/c.html", Host: "a.example", Depth: 3, Parent: "https://a.example/b/"}, 1 + 1 + 2 + len("c.html") + len("/b/c.html")},
		{"http", item{URL: "http://a.example:8080/x?y=1", Host: "a.example:8080", Hops: 2, Attempts: 4}, 3 + len("/x?y=1")},
		{"parent elsewhere", item{URL: "https://a.example/p", Host: "a.example", Depth: 1, Parent: "https://other.example/list"}, 4 + len("https://other.example/list") + 2},
		{"parent longer than the URL", item{URL: "https://a.example/", Host: "a.example", Parent: "https://a.example/index.html?x"}, 40},
		{"requisite", item{URL: "https://cdn.example/s.css", Host: "cdn.example", Role: frontier.RoleRequisite, Depth: 200, Parent: "https://a.example/"}, 40},
		{"URL not on its host key (key by domain)", item{URL: "https://www.a.example/", Host: "a.example", Depth: 1}, 2 + len("https://www.a.example/")},
		{"other scheme", item{URL: "ftp://a.example/f", Host: "a.example"}, 1 + len("ftp://a.example/f")},
		{"host prefix only", item{URL: "https://a.example.evil/", Host: "a.example"}, 1 + len(".evil/")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc := tc.it.encode()
			if len(enc) > tc.size {
				t.Errorf("%d bytes %q, want at most %d", len(enc), enc, tc.size)
			}
			got, err := decodeItem(tc.it.Host, enc)
			if err != nil || got != tc.it {
				t.Fatalf("decode(encode(%+v)) = %+v, %v", tc.it, got, err)
			}
			m := tc.it.inFlightMember()
			got, queued, err := decodeMember(m)
			if err != nil || got != tc.it || queued != enc {
				t.Fatalf("decodeMember(inFlightMember(%+v)) = %+v, %q, %v", tc.it, got, queued, err)
			}
		})
	}
}

// Damaged or hostile items are refused with an error saying what is wrong.
func TestItemDecodeRefusesDamage(t *testing.T) {
	for _, tc := range []struct {
		name, enc, want string
	}{
		{"empty", "", "empty"},
		{"JSON of an earlier version", `{"u":"https://a.example/","o":"a.example"}`, "not of this version"},
		{"later version", "\x80/x", "not of this version"},
		{"truncated depth", "\x04\x80", "bad depth"},
		{"zero depth", "\x04\x00/x", "bad depth"},
		{"huge attempts", "\x20\xff\xff\xff\xff\xff\xff\xff\xff\x01/x", "bad attempts"},
		{"parent past the end", "\x41\x00\x09abc", "bad parent length"},
		{"parent prefix past the URL", "\x41\x15\x00/x", "parent prefix longer than the URL"},
		{"no URL", "\x00", "no URL"},
		{"empty parent", "\x41\x00\x00/x", "empty parent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeItem("a.example", tc.enc)
			if !errors.Is(err, errBadItem) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("decodeItem(%q) = %v, want an error with %q", tc.enc, err, tc.want)
			}
		})
	}
	for _, m := range []string{"", "\x00", "\x09a.example", "\xff"} {
		if _, _, err := decodeMember(m); !errors.Is(err, errBadItem) {
			t.Errorf("decodeMember(%q) = %v, want errBadItem", m, err)
		}
	}
}

func FuzzDecodeItem(f *testing.F) {
	f.Add("a.example", item{URL: "https://a.example/b", Host: "a.example", Depth: 2, Parent: "https://a.example/"}.encode())
	f.Add("a.example", item{URL: "ftp://x/", Host: "a.example", Hops: 1, Attempts: 3, Role: frontier.RoleRequisite}.encode())
	f.Add("a.example", "\x41\x05\x02ab/x")
	f.Fuzz(func(t *testing.T, host, enc string) {
		it, err := decodeItem(host, enc)
		if err != nil {
			return
		}
		if again, err := decodeItem(host, it.encode()); err != nil || again != it {
			t.Fatalf("%q decodes to %+v, which encodes to one that decodes to %+v, %v", enc, it, again, err)
		}
		decodeMember(host + enc) // must not panic
	})
}
