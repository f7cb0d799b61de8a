package storage

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"go.etcd.io/bbolt"
)

// htmlPage returns about size bytes of HTML much like simweb's pages: paragraphs of words drawn
// from a short list, a few links each.
func htmlPage(size int, seed uint64) []byte {
	words := strings.Fields(`the a crawler polite server host request page link token bucket rate limit
retry after seconds window queue worker latency robots path archive index frontier budget fetch
store record header status body text simple steady careful gentle quick slow measured river`)
	rng := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>a page</title>\n</head>\n<body>\n")
	for b.Len() < size {
		b.WriteString("<p>")
		for range 30 + rng.IntN(61) {
			b.WriteString(words[rng.IntN(len(words))])
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, `<a href="../p%d">free1 /p%d</a></p>`+"\n", rng.IntN(4000), rng.IntN(4000))
	}
	b.WriteString("</body>\n</html>\n")
	return []byte(b.String())
}

// BenchmarkPutPage stores 12 KB pages, one per transaction, as the frontier's Complete does
// (without the fsync: NoSync).
func BenchmarkPutPage(b *testing.B) {
	db, err := Open(b.TempDir(), &Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var bodies [][]byte
	for i := range 64 {
		bodies = append(bodies, htmlPage(12<<10, uint64(i)))
	}
	p := testPage(1)
	b.SetBytes(int64(len(bodies[0])))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p.Body = bodies[i%len(bodies)]
		i++
		if err := db.Bolt().Update(func(tx *bbolt.Tx) error { _, err := PutPage(tx, p); return err }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompress compresses 12 KB pages as PutPage does.
func BenchmarkCompress(b *testing.B) {
	var bodies [][]byte
	for i := range 64 {
		bodies = append(bodies, htmlPage(12<<10, uint64(i)))
	}
	b.SetBytes(int64(len(bodies[0])))
	b.ReportAllocs()
	i, in, out := 0, 0, 0
	for b.Loop() {
		body := bodies[i%len(bodies)]
		i++
		in += len(body)
		out += len(compress(body))
	}
	b.ReportMetric(float64(out)/float64(in), "ratio")
}
