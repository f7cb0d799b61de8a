package storage

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// randomString draws strings that exercise every escape: control bytes, quotes, HTML
// characters, multi-byte runes, U+2028/2029 and invalid UTF-8.
func randomString(r *rand.Rand) string {
	pieces := []string{"a", "Z", " ", "/", "http://h.example/p?q=1&r=2", "<", ">", "&", `"`, `\`, "\x00", "\x01",
		"\x1f", "\x7f", "\b", "\f", "\n", "\r", "\t", "é", "\u2028", "\u2029", "\U0001F600", "\xff", "\xe2\x80",
		"\xed\xa0\x80", "\xc0\xaf", "\ufffd", "text/html; charset=utf-8"}
	var b strings.Builder
	for range r.IntN(8) {
		if r.IntN(4) == 0 {
			b.WriteByte(byte(r.IntN(256)))
		} else {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
	}
	return b.String()
}

func randomHeader(r *rand.Rand) http.Header {
	switch r.IntN(5) {
	case 0:
		return nil
	case 1:
		return http.Header{}
	}
	h := http.Header{}
	for range 1 + r.IntN(20) {
		var vs []string
		switch r.IntN(4) {
		case 0: // nil
		case 1:
			vs = []string{}
		default:
			for range 1 + r.IntN(3) {
				vs = append(vs, randomString(r))
			}
		}
		h[randomString(r)] = vs
	}
	return h
}

// randomPage fills every field of a Page by its kind, so that a field added to Page and not
// to marshalPage makes the outputs differ.
func randomPage(r *rand.Rand) *Page {
	p := new(Page)
	v := reflect.ValueOf(p).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Interface().(type) {
		case string:
			f.SetString(randomString(r))
		case int:
			f.SetInt(r.Int64N(1<<40) - 1<<39)
		case uint64:
			f.SetUint(r.Uint64())
		case bool:
			f.SetBool(r.IntN(2) == 0)
		case time.Duration:
			f.SetInt(r.Int64() - 1<<62)
		case time.Time:
			zones := []*time.Location{time.UTC, time.FixedZone("", -7*3600-1800), time.FixedZone("X", 5*3600+45*60+17)}
			t := time.Unix(r.Int64N(1<<36)-1<<35, r.Int64N(1e9)).In(zones[r.IntN(len(zones))])
			f.Set(reflect.ValueOf(t))
		case http.Header:
			f.Set(reflect.ValueOf(randomHeader(r)))
		case []byte:
			f.SetBytes([]byte(randomString(r)))
		case *RenderInfo:
			if r.IntN(3) > 0 {
				// Cuts beyond the named ones too: both refuse them alike.
				f.Set(reflect.ValueOf(&RenderInfo{Cut: RenderCut(r.IntN(5)), Requests: r.IntN(1000) - 10,
					Bytes: r.Int64() - 1<<62, Took: time.Duration(r.Int64() - 1<<62)}))
			}
		default:
			panic("randomPage: no rule for field " + v.Type().Field(i).Name)
		}
	}
	return p
}

func TestMarshalPageMatchesEncodingJSON(t *testing.T) {
	const seed = 7
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for i := range n {
		p := randomPage(r)
		if i == 0 {
			p.FetchedAt = time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC) // JSON has no room for it
		}
		got, gerr := marshalPage(p)
		want, werr := json.Marshal(p)
		if !bytes.Equal(got, want) || (gerr == nil) != (werr == nil) {
			t.Fatalf("page %+v:\nmarshalPage %s (%v)\njson.Marshal %s (%v)", p, got, gerr, want, werr)
		}
	}
	p := testPage(1) // as stored by the tests
	got, _ := marshalPage(p)
	want, _ := json.Marshal(p)
	if !bytes.Equal(got, want) {
		t.Errorf("marshalPage %s\njson.Marshal %s", got, want)
	}
}

func FuzzMarshalPage(f *testing.F) {
	f.Add("http://a.example/<p>?x=1&y=2", "Link", "<http://a/>; rel=next", int64(0))
	f.Add("\xff\u2028", "\x00", "\"\\", int64(-62135596800))
	f.Fuzz(func(t *testing.T, s, k, v string, unix int64) {
		p := &Page{URL: s, FinalURL: v, StatusLine: k, Header: http.Header{k: {v, s}}, ReqHeader: http.Header{s: nil},
			FetchedAt: time.Unix(unix, 0).UTC()}
		got, gerr := marshalPage(p)
		want, werr := json.Marshal(p)
		if !bytes.Equal(got, want) || (gerr == nil) != (werr == nil) {
			t.Fatalf("marshalPage %s (%v)\njson.Marshal %s (%v)", got, gerr, want, werr)
		}
	})
}

func BenchmarkMarshalPage(b *testing.B) {
	p := testPage(3)
	p.Header = http.Header{"Content-Type": {"text/html; charset=utf-8"}, "Content-Length": {"12345"},
		"Date": {"Tue, 25 Nov 2026 18:00:00 GMT"}}
	p.ReqHeader = http.Header{"User-Agent": {"crawl/1.0 (+https://example.com/bot)"}, "Accept": {"text/html,*/*;q=0.8"},
		"Accept-Encoding": {"gzip, deflate, br"}, "Host": {"127.0.0.1:40000"}}
	for _, bc := range []struct {
		name string
		f    func(*Page) ([]byte, error)
	}{{"marshalPage", marshalPage}, {"json.Marshal", func(p *Page) ([]byte, error) { return json.Marshal(p) }}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.f(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
