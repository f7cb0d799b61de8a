package main

import (
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/refused"
)

// TestUnreachableSeedEndsSoon: a crawl whose only seed refuses connections says which host it
// waits for, ends within 30 s with exit 1 and the seed failed, and --retry failed fetches it
// once the host answers.
func TestUnreachableSeedEndsSoon(t *testing.T) {
	port := refused.Hold(t)
	addr := port.Addr
	dir := t.TempDir()
	start := time.Now()
	code, out, errOut := crawlCmd(t, "", "run", "--data", dir, "http://"+addr+"/")
	took := time.Since(start)
	if code != exitRuntime {
		t.Errorf("exit %d, want %d (nothing was fetched)", code, exitRuntime)
	}
	// The crawl's own time (its summary's), from its start to its end: the process's start and
	// exit, which take seconds more under -race on a loaded machine, are not the crawl's waiting.
	m := regexp.MustCompile(`crawl \S+ in (\S+):`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no summary saying how long the crawl took:\n%s%s", out, errOut)
	}
	if ran, err := time.ParseDuration(m[1]); err != nil || ran > 30*time.Second {
		t.Errorf("the crawl took %s (%v with the process's start and exit), want under 30s", m[1], took.Round(time.Second))
	}
	if took > time.Minute { // a process held open after its crawl ended
		t.Errorf("the process took %v, its crawl %s", took.Round(time.Second), m[1])
	}
	if !strings.Contains(errOut, `waiting for its robots.txt" host=`+addr) {
		t.Errorf("stderr does not say the crawl waits for %s:\n%s", addr, errOut)
	}
	// Each message says each fact once: not "robots.txt: conn-refused: fetch URL: conn-refused:
	// Get "URL": dial tcp …: connection refused".
	for _, line := range strings.Split(out+errOut, "\n") {
		if strings.Count(line, "conn-refused") > 1 || strings.Count(line, "connection refused") > 1 || strings.Count(line, "robots.txt") > 1 {
			t.Errorf("a message repeats its cause: %s", line)
		}
	}
	if code, out, _ := crawlCmd(t, "", "urls", "--data", dir, "--state", "failed"); code != exitOK || !strings.Contains(out, "http://"+addr+"/") {
		t.Errorf("crawl urls --state failed: exit %d, want the seed listed:\n%s", code, out)
	}
	t.Logf("ended in %s (%v with the process's start and exit)", m[1], took.Round(100*time.Millisecond))

	port.Release()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("cannot listen on %s again to try --retry failed: %v", addr, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<p>up again</p>"))
	})}
	go srv.Serve(ln)
	defer srv.Close()
	code, out, errOut = crawlCmd(t, "", "run", "--data", dir, "--retry", "failed")
	if code != exitOK || !strings.Contains(out, "1 fetched") {
		t.Errorf("crawl run --retry failed: exit %d, want the seed fetched:\n%s%s", code, out, errOut)
	}
}
