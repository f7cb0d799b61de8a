package frontier

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crawl-project/crawl/storage"
	"go.etcd.io/bbolt"
)

// BenchmarkQueue1M enqueues 1,000,000 URLs over 1,000 hosts in Adds of 10,000 (or 2,000), then
// leases and completes 5,000 of them (each with two already-seen links), and reports memory:
// peak RSS (VmHWM, reset at the start), the peaks of anonymous and file-backed RSS (bbolt's mmap
// counts as file) sampled every 2ms, both at the end, peak Go heap, and the throughput of Add and
// Complete, the frontier buckets' bytes per URL, and the time Open takes to load the in-memory
// seen-set. Run it alone:
//
//	go test -run '^$' -bench BenchmarkQueue1M -benchtime 1x ./frontier
func BenchmarkQueue1M(b *testing.B) {
	if testing.Short() {
		b.Skip("enqueues a million URLs")
	}
	for _, batch := range []int{10_000, 2_000} {
		b.Run(fmt.Sprintf("add=%d", batch), func(b *testing.B) { benchQueue(b, batch) })
	}
}

func benchQueue(b *testing.B, batch int) {
	const urls, hosts, completes = 1_000_000, 1000, 5000
	for range b.N {
		runtime.GC()
		// Reset the peak RSS (VmHWM) of the process, so that it is this run's.
		os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
		dir := b.TempDir()
		db, err := storage.Open(dir, nil)
		if err != nil {
			b.Fatal(err)
		}
		f, err := Open(db, nil)
		if err != nil {
			b.Fatal(err)
		}
		// Sample the resident set every 2ms to split the peak into anonymous memory (Go heap,
		// bbolt's transaction buffers) and file pages (bbolt's mmap).
		peaks := samplePeaks(b, 2*time.Millisecond, 0)
		var peakHeap uint64
		sampleHeap := func() {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peakHeap = max(peakHeap, ms.HeapInuse)
		}
		url := func(i int) Entry {
			h := fmt.Sprintf("host%04d.example", i%hosts)
			return Entry{URL: fmt.Sprintf("http://%s/section/%d/page-%07d.html", h, i/7919, i), Host: h, Depth: 1,
				Parent: fmt.Sprintf("http://%s/", h)}
		}

		start := time.Now()
		es := make([]Entry, 0, batch)
		for i := 0; i < urls; i += batch {
			es = es[:0]
			for j := i; j < i+batch; j++ {
				es = append(es, url(j))
			}
			if n, err := f.Add(es); err != nil || n != len(es) {
				b.Fatalf("Add: %d, %v", n, err)
			}
			if i%(10*batch) == 0 {
				sampleHeap()
			}
		}
		addDur := time.Since(start)

		start = time.Now()
		now := time.Now()
		done := 0
		for done < completes {
			for _, h := range f.ReadyHosts(now) {
				l, ok, err := f.Lease(now, h)
				if err != nil || !ok {
					b.Fatalf("Lease: %v, %v", ok, err)
				}
				r := Result{Kind: Fetched, Page: &storage.Page{URL: l.URL, Status: 200, Body: []byte(strings.Repeat("<p>x</p>", 500))},
					Links: []Entry{url(done), url(done + 1)}}
				if err := f.Complete(l, r); err != nil {
					b.Fatal(err)
				}
				if done++; done == completes {
					break
				}
			}
		}
		completeDur := time.Since(start)
		sampleHeap()

		peaks.end()
		st := procStatus(b)
		fi, _ := os.Stat(filepath.Join(dir, storage.FileName))
		b.ReportMetric(float64(urls)/addDur.Seconds(), "add-urls/s")
		b.ReportMetric(float64(completes)/completeDur.Seconds(), "completes/s")
		b.ReportMetric(float64(st["VmHWM"])/1024, "peak-RSS-MB")
		b.ReportMetric(float64(peaks.anon)/1024, "peak-anon-MB")
		b.ReportMetric(float64(peaks.file)/1024, "peak-file-MB")
		b.ReportMetric(float64(st["RssAnon"])/1024, "end-anon-MB")
		b.ReportMetric(float64(st["RssFile"])/1024, "end-file-MB")
		b.ReportMetric(float64(peakHeap)/(1<<20), "peak-heap-MB")
		b.ReportMetric(float64(fi.Size())/(1<<20), "file-MB")
		if c := f.Counts(); c.Queued != urls-completes || c.Fetched != completes {
			b.Fatalf("Counts = %+v", c)
		}
		frontierBytes, records, queue := frontierBytes(b, db)
		b.ReportMetric(float64(frontierBytes)/float64(urls), "frontier-B/URL")
		b.ReportMetric(float64(records)/float64(urls), "records-B/URL")
		b.ReportMetric(float64(queue)/float64(urls), "queue-B/URL")
		b.ReportMetric(float64(f.seen.size()), "fingerprints")
		start = time.Now()
		if _, err := Open(db, nil); err != nil { // rebuilds the in-memory seen-set
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "open-s")
		db.Close()
	}
}

// frontierBytes returns the bytes of the pages (branch and leaf) the frontier's buckets take
// in db's file, and of them those of the URL records (both formats) and of the queue.
func frontierBytes(b *testing.B, db *storage.DB) (all, records, queue int) {
	if err := db.Bolt().View(func(tx *bbolt.Tx) error {
		for _, name := range allBuckets {
			st := tx.Bucket(name).Stats()
			n := st.BranchAlloc + st.LeafAlloc
			all += n
			switch string(name) {
			case string(bucketRecords), string(bucketURLs), string(bucketSeen):
				records += n
			case string(bucketQueue), string(bucketQueues):
				queue += n
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	return all, records, queue
}

// peaks are the highest anonymous and file-backed resident set (kB) and Go heap in use (bytes)
// samplePeaks saw; read them after end.
type peaks struct {
	anon, file    int
	heap          uint64
	stop, stopped chan struct{}
}

// samplePeaks samples /proc/self/status every interval, and the Go heap every heapEvery
// samples (0: never), until end.
func samplePeaks(b *testing.B, every time.Duration, heapEvery int) *peaks {
	p := &peaks{stop: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(p.stopped)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for n := 0; ; n++ {
			st := procStatus(b)
			p.anon, p.file = max(p.anon, st["RssAnon"]), max(p.file, st["RssFile"])
			if heapEvery > 0 && n%heapEvery == 0 {
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				p.heap = max(p.heap, ms.HeapInuse)
			}
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

// end stops the sampling and waits for it.
func (p *peaks) end() {
	close(p.stop)
	<-p.stopped
}

// procStatus returns the kB figures of /proc/self/status (Linux only).
func procStatus(b *testing.B) map[string]int {
	fh, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status")
	}
	defer fh.Close()
	m := make(map[string]int)
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if f := strings.Fields(v); ok && len(f) == 2 && f[1] == "kB" {
			m[k], _ = strconv.Atoi(f[0])
		}
	}
	return m
}

// BenchmarkQueue10M queues 10,000,000 URLs as a crawl does: 4 workers lease URLs of 10,000
// hosts and complete each with 50 links, 40 of them new (32 to the page's own host, 8 to
// others) and 10 already seen, until 10 million URLs are learned; no page is stored. It
// reports the store's bytes per queued URL (the file, and the frontier's buckets), the peak RSS
// of the process (VmHWM) and its anonymous and file-backed peaks, the peak Go heap, the rate,
// and how long Open takes to load the in-memory seen-set. It takes minutes and about 2 GB of
// disk in the temporary directory; run it alone:
//
//	go test -run '^$' -bench BenchmarkQueue10M -benchtime 1x -timeout 60m ./frontier
func BenchmarkQueue10M(b *testing.B) {
	if testing.Short() {
		b.Skip("queues ten million URLs")
	}
	const target, hosts, workers, newLinks, seenLinks = 10_000_000, 10_000, 4, 40, 10
	for range b.N {
		runtime.GC()
		os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
		dir := b.TempDir()
		db, f := openBench(b, dir, &storage.Options{NoSync: true})
		peaks := samplePeaks(b, 5*time.Millisecond, 20)
		hostName := func(h int) string { return fmt.Sprintf("www.host%05d.example", h) }
		var next atomic.Int64 // number of the next new URL
		newURL := func(h int) Entry {
			n := next.Add(1)
			host := hostName(h)
			return Entry{URL: fmt.Sprintf("http://%s/section/%d/page-%08d.html", host, n%97, n), Host: host, Depth: 2}
		}
		seeds := make([]Entry, hosts)
		for h := range seeds {
			seeds[h] = Entry{URL: "http://" + hostName(h) + "/", Host: hostName(h)}
		}
		if _, err := f.Add(seeds); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		now := time.Now()
		var turn atomic.Int64
		rngs := workerRNGs(workers, 1)
		runWorkers(b, workers, func(w int) (bool, error) {
			rng := rngs[w]
			if c := f.Counts(); c.Queued+c.Fetched >= target {
				return false, nil
			}
			h := int(turn.Add(1) % hosts)
			l, ok, err := f.Lease(now, hostName(h))
			if err != nil || !ok {
				return err == nil, err
			}
			links := make([]Entry, 0, newLinks+seenLinks)
			for i := range newLinks {
				lh := h
				if i%5 == 4 {
					lh = rng.IntN(hosts)
				}
				e := newURL(lh)
				e.Parent = l.URL
				links = append(links, e)
			}
			for range seenLinks {
				s := seeds[rng.IntN(hosts)]
				s.Parent = l.URL
				links = append(links, s)
			}
			return true, f.Complete(l, Result{Kind: Fetched, Links: links})
		})
		dur := time.Since(start)
		peaks.end()
		st := procStatus(b)
		c := f.Counts()
		all, records, queue := frontierBytes(b, db)
		fi, _ := os.Stat(filepath.Join(dir, storage.FileName))
		learned := c.Queued + c.Fetched + c.Failed + c.Excluded
		b.ReportMetric(float64(learned), "URLs")
		b.ReportMetric(float64(c.Queued), "queued")
		b.ReportMetric(float64(learned)/dur.Seconds(), "URLs/s")
		b.ReportMetric(float64(fi.Size())/float64(c.Queued), "file-B/queued")
		b.ReportMetric(float64(all)/float64(learned), "frontier-B/URL")
		b.ReportMetric(float64(records)/float64(learned), "records-B/URL")
		b.ReportMetric(float64(queue)/float64(c.Queued), "queue-B/queued")
		b.ReportMetric(float64(st["VmHWM"])/1024, "peak-RSS-MB")
		b.ReportMetric(float64(peaks.anon)/1024, "peak-anon-MB")
		b.ReportMetric(float64(peaks.file)/1024, "peak-file-MB")
		b.ReportMetric(float64(peaks.heap)/(1<<20), "peak-heap-MB")
		b.ReportMetric(float64(fi.Size())/(1<<20), "file-MB")
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		// Let the first frontier's seen-set go (its mapping is released by a cleanup after a
		// collection) and the heap's free pages return to the kernel, so that the peak below
		// is the reopening's own.
		f = nil
		debug.FreeOSMemory()
		time.Sleep(100 * time.Millisecond)
		debug.FreeOSMemory()
		os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
		start = time.Now()
		db, _ = openBench(b, dir, nil)
		b.ReportMetric(time.Since(start).Seconds(), "open-s")
		b.ReportMetric(float64(procStatus(b)["VmHWM"])/1024, "open-peak-RSS-MB")
		db.Close()
	}
}
