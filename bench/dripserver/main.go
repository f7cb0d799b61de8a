// Command dripserver serves two hosts on loopback for measuring a crawl against a host that
// answers nothing in time: one that answers robots.txt at once (404) and writes every page one
// byte a second, headers included, and an ordinary host of 21 pages. It writes a seed file of
// the ordinary host's front page and -n pages of the dripping host, and serves until killed:
//
//	go run -C bench ./dripserver -seeds /tmp/seeds.txt &
//	crawl run --seeds /tmp/seeds.txt --data /tmp/drip --timeout 3 --max-attempts 2
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	dripAddr := flag.String("drip", "127.0.0.1:18081", "address of the host that drips")
	okAddr := flag.String("ok", "127.0.0.1:18082", "address of the ordinary host")
	n := flag.Int("n", 200, "pages of the dripping host in the seed file")
	seeds := flag.String("seeds", "seeds.txt", "seed file to write")
	flag.Parse()

	var b strings.Builder
	fmt.Fprintf(&b, "http://%s/\n", *okAddr)
	for i := range *n {
		fmt.Fprintf(&b, "http://%s/p/%d\n", *dripAddr, i)
	}
	if err := os.WriteFile(*seeds, []byte(b.String()), 0o644); err != nil {
		log.Fatal(err)
	}
	go func() {
		log.Fatal(http.ListenAndServe(*okAddr, http.HandlerFunc(ordinary)))
	}()
	log.Fatal(http.ListenAndServe(*dripAddr, http.HandlerFunc(drip)))
}

// ordinary serves a front page linking 20 pages, and those pages.
func ordinary(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html")
	if r.URL.Path != "/" {
		fmt.Fprintf(w, "<p>a page</p>")
		return
	}
	for i := range 20 {
		fmt.Fprintf(w, `<a href="/o/%d">%d</a> `, i, i)
	}
}

// drip answers robots.txt at once and writes anything else one byte a second.
func drip(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/robots.txt" {
		http.NotFound(w, r)
		return
	}
	c, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	defer c.Close()
	msg := "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 12\r\n\r\n<p>slow</p>\n"
	for i := range len(msg) {
		if _, err := c.Write([]byte{msg[i]}); err != nil {
			return
		}
		time.Sleep(time.Second)
	}
}
