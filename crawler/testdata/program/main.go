// Command program is the smallest Go program built on package crawler, in a module of its own:
// crawl the seeds given as arguments into the data directory -data, printing each page's URL,
// status and title. Killed and run again on the same directory, it resumes.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/crawl-project/crawl/crawler"
)

func main() {
	dir := flag.String("data", "", "data directory")
	rate := flag.Float64("initial-rate", 0, "each host's first rate, requests/s (0: the default)")
	flag.Parse()
	seeds := flag.Args()

	c, err := crawler.New(crawler.Options{Seeds: seeds, DataDir: *dir, InitialRate: *rate})
	if err != nil {
		log.Fatal(err)
	}
	c.OnPage(func(p *crawler.Page) {
		doc, err := p.Doc() // *goquery.Document, parsed at most once
		if err == nil {
			fmt.Println(p.URL, p.Status, doc.Find("title").Text())
		}
	})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := c.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
