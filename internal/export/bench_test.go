package export

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/crawl-project/crawl/storage"
)

// The export benchmarks measure one page per op over small synthetic pages made on the fly,
// so that the heap reflects the writer alone, and report pages/s and the peak live heap. For
// the 100k-page figure:
//
//	go test -run '^$' -bench Export -benchtime 100000x ./internal/export/
//
// With EXPORT_BENCH_STORE=DIR they read the pages of a real store instead (each op is then a
// whole export of it, so use -benchtime 1x); that measures storage's decompression too.

func BenchmarkExportJSONL(b *testing.B) {
	benchExport(b, func(dir string, _ Source) (Writer, *os.File) {
		f, err := os.Create(filepath.Join(dir, "out.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		return NewJSONL(f, nil), f
	})
}

func BenchmarkExportWARC(b *testing.B) {
	benchExport(b, func(dir string, _ Source) (Writer, *os.File) {
		w, err := NewWARC(filepath.Join(dir, "bench"), &WARCOptions{Date: baseTime})
		if err != nil {
			b.Fatal(err)
		}
		return w, nil
	})
}

func BenchmarkExportMirror(b *testing.B) {
	benchExport(b, func(dir string, src Source) (Writer, *os.File) {
		w, err := NewMirror(filepath.Join(dir, "mirror"), src, nil)
		if err != nil {
			b.Fatal(err)
		}
		return w, nil
	})
}

// BenchmarkExportJSONLLatest is BenchmarkExportJSONL through Newest (--latest): one more pass
// over the pages and one map entry per URL.
func BenchmarkExportJSONLLatest(b *testing.B) {
	latest := func(src Source) Source {
		return NewNewest(context.Background(), src, src, func(uint64) (*storage.Page, error) { return nil, storage.ErrNotFound }).Pages
	}
	benchExportWith(b, latest, func(dir string, _ Source) (Writer, *os.File) {
		f, err := os.Create(filepath.Join(dir, "out.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		return NewJSONL(f, nil), f
	})
}

func benchExport(b *testing.B, open func(dir string, src Source) (Writer, *os.File)) {
	benchExportWith(b, nil, open)
}

// benchExportWith is benchExport with the pages read through wrap, if not nil.
func benchExportWith(b *testing.B, wrap func(Source) Source, open func(dir string, src Source) (Writer, *os.File)) {
	src, perOp := generatedSource(b.N), false
	if dir := os.Getenv("EXPORT_BENCH_STORE"); dir != "" {
		db, err := storage.Open(dir, &storage.Options{ReadOnly: true, Timeout: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		src, perOp = db.Pages, true
	}
	runs := 1
	if perOp {
		runs = b.N
	}

	var peak uint64
	var ms runtime.MemStats
	sample := func() {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
	}
	runtime.GC()
	sample()
	base := peak
	var pages, bytes int64

	b.ResetTimer()
	start := time.Now()
	for range runs {
		w, f := open(b.TempDir(), src)
		n := 0
		sampled := Source(func(fn func(p *storage.Page) error) error {
			return src(func(p *storage.Page) error {
				if n++; n%1000 == 0 {
					sample()
				}
				return fn(p)
			})
		})
		if wrap != nil {
			sampled = wrap(sampled)
		}
		st, err := Run(context.Background(), sampled, w, nil)
		if err != nil {
			b.Fatal(err)
		}
		if f != nil {
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
		}
		pages += st.Pages
		bytes += st.Bytes
	}
	elapsed := time.Since(start)
	b.StopTimer()
	sample()
	b.ReportMetric(float64(pages)/elapsed.Seconds(), "pages/s")
	b.ReportMetric(float64(peak-min(base, peak))/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(bytes)/float64(max(pages, 1)), "out-B/page")
}
