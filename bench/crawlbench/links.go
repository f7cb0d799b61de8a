package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/storage"
	"go.etcd.io/bbolt"
)

// linksResume is -links-resume: pages crawled again on resume of each crawl's store.
var linksResume = flag.String("links-resume", "", "links: N[,N…]: after each crawl, for each N, run it again on its store with nothing more to fetch (a row marked +open: its CPU ms in all, for opening the store and closing it) and then with N more pages (a row marked +resume), on the same web")

// linksConfig is what -scenario links crawls.
type linksConfig struct {
	links    []int // links per page, one crawl each
	pages    int   // pages per host of the two hosts
	maxPages int   // --max-pages of each crawl
	pageKB   int
	rounds   int   // crawls of each figure, interleaved
	resume   []int // -links-resume: more pages on resume of each crawl's store, in turn
}

// linkCosts runs the crawl binary on two unlimited hosts whose pages carry cfg.links[i] links
// each, for every figure in turn (cfg.rounds times, interleaved, so that a noisy machine weighs
// on every figure alike), and prints pages/s, CPU per page, CPU per discovered link (an href on
// a fetched page) and what the frontier's buckets take on disk per URL they hold and per
// queued URL. With -links-resume, each crawl is followed, for each of its figures, by two more
// on its store: one with nothing left to fetch (what opening and closing the store costs) and
// one resumed for that many more pages.
func linkCosts(w io.Writer, bin string, cfg linksConfig, crawlFlags []string, timeout time.Duration, seed int64) error {
	for _, f := range strings.FieldsFunc(*linksResume, func(r rune) bool { return r == ',' }) {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return fmt.Errorf("-links-resume: %q is not a number of pages", f)
		}
		cfg.resume = append(cfg.resume, n)
	}
	tmp, bin, err := benchDir("crawl-links-", bin)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	text := max(cfg.pageKB*1024-pageMarkup, 1)
	fmt.Fprintf(w, "links: 2 unlimited hosts × %d pages of ~%d KB, --max-pages %d, %d round(s)\n", cfg.pages, cfg.pageKB, cfg.maxPages, cfg.rounds)
	fmt.Fprintf(w, "%10s %8s %9s %9s %9s %9s %10s %11s %9s %9s %8s\n", "links", "pages", "pages/s", "CPU ms/p", "sys ms/p", "µs/link", "URLs", "frontier", "B/URL", "B/queued", "RSS MB")
	for round := range cfg.rounds {
		for _, n := range cfg.links {
			specs := []simweb.HostSpec{{Name: "free1", Pages: cfg.pages, TextSize: text, Links: n},
				{Name: "free2", Pages: cfg.pages, TextSize: text, Links: n}}
			web, err := simweb.Start(specs, &simweb.Options{Seed: seed})
			if err != nil {
				return err
			}
			_, perPage, err := meanPage(web)
			if err != nil {
				web.Close()
				return err
			}
			dir := filepath.Join(tmp, fmt.Sprintf("r%d-l%d", round, n))
			done := 0
			runs := []int{cfg.maxPages}
			labels := []string{fmt.Sprint(n)}
			for _, more := range cfg.resume {
				total := runs[len(runs)-1]
				runs = append(runs, total, total+more)
				labels = append(labels, fmt.Sprint(n)+"+open", fmt.Sprint(n)+"+resume")
			}
			for i, total := range runs {
				flags := slices.Concat([]string{"--max-pages", fmt.Sprint(total)}, crawlFlags)
				run, err := runCrawl(bin, dir, web.Seeds(), flags, timeout, false)
				if err != nil {
					web.Close()
					return err
				}
				pages := tally(web).pages - done
				done += pages
				urls, queued, frontierBytes, err := frontierSize(filepath.Join(dir, "data"))
				if err != nil {
					web.Close()
					return err
				}
				links := perPage * float64(pages)
				fmt.Fprintf(w, "%10s %8d %9.0f %9.3f %9.3f %9.2f %10d %8.1f MB %9.0f %9.0f %8.1f%s\n", labels[i], pages,
					float64(pages)/run.wall.Seconds(), 1000*run.cpu.Seconds()/float64(max(pages, 1)),
					1000*run.sys.Seconds()/float64(max(pages, 1)), 1e6*run.cpu.Seconds()/max(links, 1),
					urls, float64(frontierBytes)/(1<<20), float64(frontierBytes)/float64(max(urls, 1)),
					float64(frontierBytes)/float64(max(queued, 1)), run.peakMB, exitNote(run))
			}
			web.Close()
			os.RemoveAll(dir)
		}
	}
	return nil
}

// benchDir makes a temporary directory (prefix names it) and, unless bin names a crawl binary
// already, builds one into it. The caller removes the directory.
func benchDir(prefix, bin string) (dir, crawlBin string, err error) {
	dir, err = os.MkdirTemp("", prefix)
	if err != nil {
		return "", "", err
	}
	if bin == "" {
		if bin, err = buildCrawl(dir); err != nil {
			os.RemoveAll(dir)
			return "", "", err
		}
	}
	return dir, bin, nil
}

// buildCrawl builds the crawl command of the checkout this module replaces (go.mod's replace
// directive) into dir and returns the binary's path.
func buildCrawl(dir string) (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/crawl-project/crawl").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m github.com/crawl-project/crawl (run the bench inside the bench module, or give -crawl): %w", err)
	}
	root := strings.TrimSpace(string(out))
	bin := filepath.Join(dir, "crawl")
	build := exec.Command("go", "build", "-o", bin, "./cmd/crawl")
	build.Dir = root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/crawl in %s (or give -crawl): %w", root, err)
	}
	return bin, nil
}

// frontierSize opens the store in dir read-only and returns how many URLs its frontier has
// learned, how many are queued, and the bytes of the file's pages its buckets (frontier/…) take.
func frontierSize(dir string) (urls, queued int, size int64, err error) {
	db, err := storage.Open(dir, &storage.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return 0, 0, 0, err
	}
	defer db.Close()
	f, err := frontier.Open(db, nil)
	if err != nil {
		return 0, 0, 0, err
	}
	c := f.Counts()
	urls, queued = c.Queued+c.Fetched+c.Failed+c.Excluded, c.Queued
	err = db.Bolt().View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			if bytes.HasPrefix(name, []byte("frontier/")) {
				st := b.Stats()
				size += int64(st.BranchAlloc + st.LeafAlloc)
			}
			return nil
		})
	})
	return urls, queued, size, err
}
