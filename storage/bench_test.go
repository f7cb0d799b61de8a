package storage

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
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

// BenchmarkOpenWalk opens (read-only) stores of about 25,000 and 100,000 pages of 4 KiB
// without their seal: most of the time is the walk at Open (walkOpen), which reads the first
// page of every page in use. BenchmarkOpenSealed opens the same stores sealed: Open reads the
// file once to check the seal's checksum, and does not walk. BenchmarkCheckWalk is Check's walk
// of the larger store, every key read.
func BenchmarkOpenWalk(b *testing.B) {
	for _, pages := range []int{25_000, 100_000} {
		b.Run(fmt.Sprintf("pages=%dk", pages/1000), func(b *testing.B) {
			dir := bigStore(b, pages)
			for b.Loop() {
				b.StopTimer()
				os.Remove(filepath.Join(dir, SealFileName))
				b.StartTimer()
				db, err := Open(dir, &Options{ReadOnly: true})
				if err != nil {
					b.Fatal(err)
				}
				if db.opened != openWalked {
					b.Fatalf("opened %d, want a walk", db.opened)
				}
				db.Close()
			}
		})
	}
}

func BenchmarkOpenSealed(b *testing.B) {
	for _, pages := range []int{25_000, 100_000} {
		b.Run(fmt.Sprintf("pages=%dk", pages/1000), func(b *testing.B) {
			dir := bigStore(b, pages)
			for b.Loop() {
				db, err := Open(dir, &Options{ReadOnly: true})
				if err != nil {
					b.Fatal(err)
				}
				if db.opened != openSealed {
					b.Fatalf("opened %d, want sealed", db.opened)
				}
				db.Close()
			}
		})
	}
}

func BenchmarkCheckWalk(b *testing.B) {
	dir := bigStore(b, 100_000)
	db, err := Open(dir, &Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	b.ResetTimer()
	for range b.N {
		if _, total, err := db.Check(1); err != nil || total != 0 {
			b.Fatal(err, total)
		}
	}
}

// bigStore builds a store of about pages pages of 4 KiB (100,000: 400 MB) in b's temporary
// directory, closed cleanly (so sealed): records of 1 to 3 KiB (incompressible) in a few
// buckets, as many small bodies would make.
func bigStore(b *testing.B, pages int) string {
	dir := b.TempDir()
	db, err := Open(dir, &Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	v := make([]byte, 3072)
	for i := 0; ; i++ {
		if err := db.Update(func(tx *bbolt.Tx) error {
			bk, err := tx.CreateBucketIfNotExists([]byte(fmt.Sprintf("b%d", i%4)))
			if err != nil {
				return err
			}
			for j := range 1000 {
				for k := range v {
					v[k] = byte(rng.Uint32())
				}
				if err := bk.Put([]byte(fmt.Sprintf("%08d-%04d", i, j)), v[:1024+rng.IntN(2048)]); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		if fi, _ := os.Stat(filepath.Join(dir, FileName)); fi.Size() >= int64(pages)*4096 {
			break
		}
	}
	db.Close()
	return dir
}

// BenchmarkOpenBoltOnly is bbolt's own read-only open of the same store, for comparison: what
// Open costs beyond it is the walk.
func BenchmarkOpenBoltOnly(b *testing.B) {
	dir := bigStore(b, 100_000)
	b.ResetTimer()
	for range b.N {
		bdb, err := bbolt.Open(filepath.Join(dir, FileName), 0o644, &bbolt.Options{ReadOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		bdb.Close()
	}
}
