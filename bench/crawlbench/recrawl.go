package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.etcd.io/bbolt"

	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/storage"
)

// recrawl crawls one unlimited host of pages pages whose pages send validators (simweb
// Revisions: a quarter send none), then recrawls it unchanged with Recrawl, and prints what
// each run cost: wall time, requests, 304s, body bytes received, bodies stored (compressed),
// and the store's growth, then where the store's bytes are after each run (storeUse).
func recrawl(w io.Writer, seed int64, pages int) error {
	web, err := simweb.Start([]simweb.HostSpec{{Name: "site", Pages: pages, Revisions: true}}, &simweb.Options{Seed: seed})
	if err != nil {
		return err
	}
	defer web.Close()
	dir, err := os.MkdirTemp("", "crawl-bench-recrawl-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintf(w, "recrawl: one unlimited host of %d pages (1 in 4 without ETag or Last-Modified), unchanged between runs\n", pages)
	fmt.Fprintf(w, "%-8s %9s %9s %7s %7s %14s %14s %14s %14s\n", "run", "seconds", "requests", "304s", "200s", "body bytes", "bodies stored",
		"file growth", "data growth")
	var lastSeq uint64
	var size, data, stored int64
	var uses []storeUse
	for i, recrawl := range []bool{false, true} {
		web.Reset()
		start := time.Now()
		if _, err := crawlWeb(web, dir, func(c *crawler.Config) {
			c.Recrawl, c.MaxRate, c.InitialRate = recrawl, 1e6, 1000
			if recrawl {
				c.Seeds = nil
			}
		}); err != nil {
			return err
		}
		elapsed := time.Since(start)
		body, last, err := bodyBytesAfter(dir, lastSeq)
		if err != nil {
			return err
		}
		use, err := measureStore(dir)
		if err != nil {
			return err
		}
		uses = append(uses, use)
		st := web.Stats()["site"]
		fmt.Fprintf(w, "%-8s %9.2f %9d %7d %7d %14d %14d %14d %14d\n", []string{"first", "recrawl"}[i], elapsed.Seconds(), st.PageRequests,
			st.NotModified, st.OK-st.RobotsRequests, body, use.bodies-stored, use.file-size, use.data-data)
		lastSeq, size, data, stored = last, use.file, use.data, use.bodies
	}
	fmt.Fprintf(w, "\nstore after each run: bytes in pages allocated (in use by keys and values)\n")
	printStoreUse(w, uses)
	return nil
}

// storeUse is where the bytes of a store file are: the file's size, the size of its data
// (bbolt's high-water mark: the file beyond it is preallocated), and of that the pages each
// top-level bucket holds (and the bytes its keys and values fill in them); the rest of the
// data is free pages, the freelist and the two meta pages.
type storeUse struct {
	file, data int64
	bodies     int64 // compressed bytes of the stored bodies (storage.DB.StoredBodies)
	alloc      map[string]int64
	inuse      map[string]int64
}

// measureStore reads the store in dir read-only and returns its storeUse.
func measureStore(dir string) (storeUse, error) {
	path := filepath.Join(dir, storage.FileName)
	fi, err := os.Stat(path)
	if err != nil {
		return storeUse{}, err
	}
	u := storeUse{file: fi.Size(), alloc: map[string]int64{}, inuse: map[string]int64{}}
	sdb, err := storage.Open(dir, &storage.Options{ReadOnly: true})
	if err != nil {
		return storeUse{}, err
	}
	_, u.bodies, err = sdb.StoredBodies()
	if cerr := sdb.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return storeUse{}, err
	}
	db, err := bbolt.Open(path, 0o644, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return storeUse{}, err
	}
	defer db.Close()
	err = db.View(func(tx *bbolt.Tx) error {
		u.data = tx.Size()
		ps := int64(db.Info().PageSize)
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			s := b.Stats()
			u.alloc[string(name)] = int64(s.BranchPageN+s.BranchOverflowN+s.LeafPageN+s.LeafOverflowN) * ps
			u.inuse[string(name)] = int64(s.BranchInuse + s.LeafInuse)
			return nil
		})
	})
	return u, err
}

// printStoreUse prints one column per run: each bucket's allocated bytes (in use), then the
// rest of the data (free pages, freelist, meta pages) and the preallocated tail of the file.
func printStoreUse(w io.Writer, uses []storeUse) {
	var names []string
	for name := range uses[len(uses)-1].alloc {
		names = append(names, name)
	}
	slices.Sort(names)
	fmt.Fprintf(w, "%-22s", "")
	for i := range uses {
		fmt.Fprintf(w, " %26s", []string{"after first", "after recrawl"}[i])
	}
	fmt.Fprintln(w)
	for _, name := range names {
		fmt.Fprintf(w, "%-22s", name)
		for _, u := range uses {
			fmt.Fprintf(w, " %26s", fmt.Sprintf("%d (%d)", u.alloc[name], u.inuse[name]))
		}
		fmt.Fprintln(w)
	}
	rows := []struct {
		name string
		of   func(storeUse) int64
	}{
		{"free, freelist, meta", func(u storeUse) int64 {
			n := u.data
			for _, a := range u.alloc {
				n -= a
			}
			return n
		}},
		{"data (high-water)", func(u storeUse) int64 { return u.data }},
		{"preallocated", func(u storeUse) int64 { return u.file - u.data }},
		{"file", func(u storeUse) int64 { return u.file }},
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%-22s", r.name)
		for _, u := range uses {
			fmt.Fprintf(w, " %26d", r.of(u))
		}
		fmt.Fprintln(w)
	}
}

// bodyBytesAfter sums the body bytes of the pages stored after sequence number after, and
// returns the last sequence number.
func bodyBytesAfter(dir string, after uint64) (bytes int64, last uint64, err error) {
	db, err := storage.Open(dir, &storage.Options{ReadOnly: true})
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	last = after
	err = db.Pages(func(p *storage.Page) error {
		if p.Seq > after {
			bytes += int64(len(p.Body))
			last = p.Seq
		}
		return nil
	})
	return bytes, last, err
}
