package frontier

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
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
		var peakAnon, peakFile int
		stop, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			tick := time.NewTicker(2 * time.Millisecond)
			defer tick.Stop()
			for {
				st := procStatus(b)
				peakAnon, peakFile = max(peakAnon, st["RssAnon"]), max(peakFile, st["RssFile"])
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		}()
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

		close(stop)
		<-stopped
		st := procStatus(b)
		fi, _ := os.Stat(filepath.Join(dir, storage.FileName))
		b.ReportMetric(float64(urls)/addDur.Seconds(), "add-urls/s")
		b.ReportMetric(float64(completes)/completeDur.Seconds(), "completes/s")
		b.ReportMetric(float64(st["VmHWM"])/1024, "peak-RSS-MB")
		b.ReportMetric(float64(peakAnon)/1024, "peak-anon-MB")
		b.ReportMetric(float64(peakFile)/1024, "peak-file-MB")
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
			case string(bucketURLs), string(bucketSeen):
				records += n
			case string(bucketQueue):
				queue += n
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	return all, records, queue
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
