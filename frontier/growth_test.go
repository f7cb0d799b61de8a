//go:build unix

package frontier

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/crawl-project/crawl/storage"
	"go.etcd.io/bbolt"
)

// BenchmarkGrowth measures what a link-rich page costs the frontier as its queue grows: a store
// of two hosts is filled through Add with 10k, 100k, 1M or 10M queued URLs (without fsync), then
// reopened as a crawl opens it (fsync on) and 8 goroutines lease and complete growthPages pages
// of 12 KB, each with 40 links of its own host, 35 of them new and 5 already seen. It reports
// the process's CPU per page (user + system, from rusage), the bytes bbolt wrote per page (the
// pages its commits allocated, plus a meta page each), and per commit the pages written, the
// nodes spilled and the pages completed; and how long Open took to load the store.
//
//	go test -run '^$' -bench 'BenchmarkGrowth/queued=(10k|100k|1M)$' -benchtime 1x -timeout 60m ./frontier
//
// queued=10M takes minutes and about 2 GB of disk in the temporary directory.
func BenchmarkGrowth(b *testing.B) {
	for _, n := range []struct {
		name string
		n    int
	}{{"10k", 10_000}, {"100k", 100_000}, {"1M", 1_000_000}, {"10M", 10_000_000}} {
		b.Run("queued="+n.name, func(b *testing.B) {
			if testing.Short() && n.n > 100_000 {
				b.Skip("a big store")
			}
			for range b.N {
				benchGrowth(b, n.n)
			}
		})
	}
}

const (
	growthPages   = 3000
	growthWorkers = 8
	growthNew     = 35
	growthSeen    = 5
)

var growthHosts = []string{"free1.example", "free2.example"}

func growthURL(n int64) Entry {
	h := growthHosts[n%2]
	return Entry{URL: fmt.Sprintf("http://%s/d/%d/page-%09d.html", h, n%97, n), Host: h, Depth: 3}
}

func benchGrowth(b *testing.B, queued int) {
	dir := b.TempDir()
	db, f := openBench(b, dir, &storage.Options{NoSync: true})
	var next atomic.Int64
	const batch = 100_000
	start := time.Now()
	for done := 0; done < queued; {
		n := min(batch, queued-done)
		es := make([]Entry, n)
		for i := range es {
			es[i] = growthURL(next.Add(1))
		}
		if got, err := f.Add(es); err != nil || got != n {
			b.Fatalf("Add: %d of %d, %v", got, n, err)
		}
		done += n
	}
	b.Logf("queued=%d built in %v", queued, time.Since(start).Round(time.Millisecond))
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}

	start = time.Now()
	db, f = openBench(b, dir, nil)
	defer db.Close()
	openDur := time.Since(start) // of the store (its walk) and of the frontier
	body := []byte(strings.Repeat("<p>Words of a page that compress as text does, more or less. ", 12*1024/62))
	txid := func() int {
		id := 0
		db.Bolt().View(func(tx *bbolt.Tx) error { id = tx.ID(); return nil })
		return id
	}
	before, id0, cpu0 := db.Bolt().Stats().TxStats, txid(), processCPUs(b)
	now := time.Now()
	var pages atomic.Int64
	rngs := workerRNGs(growthWorkers, 7)
	start = time.Now()
	runWorkers(b, growthWorkers, func(w int) (bool, error) {
		p := pages.Add(1)
		if p > growthPages {
			return false, nil
		}
		host := growthHosts[p%2]
		l, ok, err := f.Lease(now, host)
		if err != nil || !ok {
			return false, fmt.Errorf("Lease %s: %v %v", host, ok, err)
		}
		links := make([]Entry, 0, growthNew+growthSeen)
		for range growthNew {
			e := growthURL(2*next.Add(1) + p%2) // of the page's own host
			e.Parent = l.URL
			links = append(links, e)
		}
		for range growthSeen {
			e := growthURL(2*rngs[w].Int64N(int64(queued/2)) + p%2 + 1)
			e.Parent = l.URL
			links = append(links, e)
		}
		page := &storage.Page{URL: l.URL, Status: 200, FetchedAt: now, ContentType: "text/html",
			Body: append([]byte(l.URL), body...)} // no two bodies alike: none is stored as another's copy
		return true, f.Complete(l, Result{Kind: Fetched, Links: links, Page: page})
	})
	wall := time.Since(start)
	cpu1 := processCPUs(b)
	user, sys := cpu1.user-cpu0.user, cpu1.sys-cpu0.sys
	after := db.Bolt().Stats().TxStats
	commits := txid() - id0
	c := f.Counts()
	if c.Fetched != growthPages || c.Queued < queued {
		b.Fatalf("Counts = %+v", c)
	}
	per := func(v int64, n int) float64 { return float64(v) / float64(n) }
	b.ReportMetric(per((user+sys).Microseconds(), growthPages)/1000, "cpu-ms/page")
	b.ReportMetric(per(sys.Microseconds(), growthPages)/1000, "sys-ms/page")
	b.ReportMetric(growthPages/wall.Seconds(), "pages/s")
	b.ReportMetric(per(after.GetPageAlloc()-before.GetPageAlloc()+int64(commits*db.Bolt().Info().PageSize), growthPages)/1024, "KB-written/page")
	b.ReportMetric(per(after.GetWrite()-before.GetWrite(), commits), "pages-written/commit")
	b.ReportMetric(per(after.GetSpill()-before.GetSpill(), commits), "spills/commit")
	b.ReportMetric(float64(growthPages)/float64(commits), "pages/commit")
	b.ReportMetric(openDur.Seconds(), "open-s")
	if fi, err := os.Stat(db.Path()); err == nil {
		b.ReportMetric(float64(fi.Size())/(1<<20), "file-MB")
	}
}

// openBench opens the store in dir with o and its frontier.
func openBench(b *testing.B, dir string, o *storage.Options) (*storage.DB, *Frontier) {
	db, err := storage.Open(dir, o)
	if err != nil {
		b.Fatal(err)
	}
	f, err := Open(db, nil)
	if err != nil {
		b.Fatal(err)
	}
	return db, f
}

// workerRNGs returns n random sources, the wth seeded (w, seed).
func workerRNGs(n int, seed uint64) []*rand.Rand {
	rngs := make([]*rand.Rand, n)
	for w := range rngs {
		rngs[w] = rand.New(rand.NewPCG(uint64(w), seed))
	}
	return rngs
}

// runWorkers calls step(w) in n goroutines, w from 0 to n-1, each until step returns false or
// an error; the first error stops them all and fails b.
func runWorkers(b *testing.B, n int, step func(w int) (bool, error)) {
	var mu sync.Mutex
	var failed error
	stopped := func() bool { mu.Lock(); defer mu.Unlock(); return failed != nil }
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			for !stopped() {
				more, err := step(w)
				if err != nil {
					mu.Lock()
					failed = cmp.Or(failed, err)
					mu.Unlock()
				}
				if !more || err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if failed != nil {
		b.Fatal(failed)
	}
}

type cpuTimes struct{ user, sys time.Duration }

// processCPUs returns the user and the system CPU time the process has used.
func processCPUs(b *testing.B) cpuTimes {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return cpuTimes{time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())}
}
