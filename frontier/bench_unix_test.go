//go:build unix

package frontier

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/crawl-project/crawl/storage"
)

// BenchmarkCompleteNewHosts completes one page whose links name n hosts the store has never
// seen, one URL each (the first page of a broad crawl), and reports the process's CPU time per
// link (user and system, so a loaded machine's waits are left out): flat in n when a
// transaction's cost is linear in the hosts it names.
//
//	go test -run '^$' -bench BenchmarkCompleteNewHosts -benchtime 3x ./frontier
func BenchmarkCompleteNewHosts(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			links := make([]Entry, n)
			for i := range links {
				host := fmt.Sprintf("h%d.example", i)
				links[i] = Entry{URL: "http://" + host + "/", Host: host, Depth: 1}
			}
			var cpu time.Duration
			for range b.N {
				b.StopTimer()
				db, err := storage.Open(b.TempDir(), &storage.Options{NoSync: true})
				if err != nil {
					b.Fatal(err)
				}
				f, err := Open(db, nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.Add([]Entry{{URL: "http://seed.example/", Host: "seed.example"}}); err != nil {
					b.Fatal(err)
				}
				l, ok, err := f.Lease(time.Unix(1, 0), "seed.example")
				if !ok || err != nil {
					b.Fatal(ok, err)
				}
				runtime.GC()
				b.StartTimer()
				before := processCPU(b)
				if err := f.Complete(l, Result{Kind: Fetched, Links: links}); err != nil {
					b.Fatal(err)
				}
				cpu += processCPU(b) - before
				b.StopTimer()
				db.Close()
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*n), "cpu-ns/link")
		})
	}
}

// processCPU returns the user and system CPU time the process has used.
func processCPU(b *testing.B) time.Duration {
	c := processCPUs(b)
	return c.user + c.sys
}
