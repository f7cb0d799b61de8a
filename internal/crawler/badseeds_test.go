package crawler

import (
	"errors"
	"math/rand"
	"slices"
	"strings"
	"testing"
)

// TestParseSeedsBadInput: seed files as people and programs really write them.
func TestParseSeedsBadInput(t *testing.T) {
	random := make([]byte, 64<<10)
	rand.New(rand.NewSource(1)).Read(random)
	manyBad := strings.Repeat("not a url\n", 5000) + "http://ok.example/\n"
	tests := []struct {
		name     string
		in       string
		seeds    []string
		badLines []int
		err      error
	}{
		{"byte order mark and CRLF", "\ufeffhttp://a.example/\r\nhttp://b.example/x\r\n", []string{"http://a.example/", "http://b.example/x"}, nil, nil},
		{"duplicates in several spellings", "http://A.example\nhttp://a.example:80/\nHTTP://a.example/#top\nhttp://a.example/./\n",
			[]string{"http://a.example/"}, nil, nil},
		{"IDN hosts become punycode", "http://bücher.example/\nhttp://xn--bcher-kva.example/\nhttps://例え.テスト/パス\n",
			[]string{"http://xn--bcher-kva.example/", "https://xn--r8jz45g.xn--zckzah/%E3%83%91%E3%82%B9"}, nil, nil},
		{"bad hosts", "http://bü cher.example/\nhttp://a..b/\nhttp://ok.example/\n", []string{"http://ok.example/"}, []int{1, 2}, nil},
		{"line over 64 KiB", "http://a.example/\n" + strings.Repeat("x", 100<<10) + "\nhttp://b.example/\n",
			[]string{"http://a.example/", "http://b.example/"}, []int{2}, nil},
		{"URL over 2048 bytes", "http://a.example/" + strings.Repeat("p", 3000) + "\n", nil, []int{1}, nil},
		{"a URL followed by more text", "http://a.example/ trailing words\nhttp://b.example/x\tnote\nhttp://c.example/\nd.example/ more\n",
			[]string{"http://c.example/"}, []int{1, 2, 4}, nil},
		{"no final newline", "# c\nhttp://a.example/", []string{"http://a.example/"}, nil, nil},
		{"only comments and blanks", "# nothing\n\n   \n\t# more\n", nil, nil, nil},
		{"empty", "", nil, nil, nil},
		{"a few control bytes are bad lines", "http://a.example/\n\x00bin\x01\nhttp://b.example/\n",
			[]string{"http://a.example/", "http://b.example/"}, []int{2}, nil},
		{"invalid UTF-8 line", "http://a.example/\xff\xfe\n", nil, []int{1}, nil},
		{"binary file", string(random), nil, nil, ErrBinarySeeds},
		{"all zeros", string(make([]byte, 100)), nil, nil, ErrBinarySeeds},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seeds, bad, err := ParseSeeds(strings.NewReader(tt.in), "seeds.txt")
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			var lines []int
			for _, b := range bad {
				lines = append(lines, b.Line)
			}
			if !slices.Equal(seeds, tt.seeds) || !slices.Equal(lines, tt.badLines) {
				t.Errorf("seeds %q, bad %v; want %q, bad lines %v", seeds, bad, tt.seeds, tt.badLines)
			}
		})
	}

	t.Run("the text after a URL is named", func(t *testing.T) {
		_, bad, _ := ParseSeeds(strings.NewReader("http://a.example/ trailing words\n"), "seeds.txt")
		if len(bad) != 1 || !strings.Contains(bad[0].Error(), "seeds.txt:1:") || !strings.Contains(bad[0].Error(), `"trailing words"`) {
			t.Errorf("bad = %v; want seeds.txt:1 naming the text after the URL", bad)
		}
	})

	t.Run("bad lines are listed up to a bound", func(t *testing.T) {
		seeds, bad, err := ParseSeeds(strings.NewReader(manyBad), "log.txt")
		if err != nil || !slices.Equal(seeds, []string{"http://ok.example/"}) {
			t.Fatalf("seeds %q, err %v", seeds, err)
		}
		last := bad[len(bad)-1]
		if len(bad) != maxBadSeeds+1 || last.Line != 5000 || !strings.Contains(last.Error(), "4900 more bad lines") {
			t.Errorf("%d bad lines returned, last %v; want %d and a summary of 4900 more on line 5000", len(bad), last, maxBadSeeds+1)
		}
	})
}

// TestBadSeedPasswordHidden: a seed that does not parse is reported without its password,
// in the seed's text and in the error's.
func TestBadSeedPasswordHidden(t *testing.T) {
	for _, s := range []string{"http://bob:s3cr3tpw@exa mple.com/", "https://bob:s3cr3tpw@example.com:99999/", "http://bob:s3cr3tpw@[::1/"} {
		_, notes := ParseSeedArgs([]string{s})
		if len(notes) != 1 {
			t.Fatalf("%q: notes %v, want one", s, notes)
		}
		if msg := notes[0].Error(); strings.Contains(msg, "s3cr3tpw") || !strings.Contains(msg, "bob:…@") {
			t.Errorf("%q: reported as %q; want the password hidden as bob:…@", s, msg)
		}
	}
}
