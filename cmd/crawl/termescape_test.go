package main

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"strings"
	"testing"
	"unicode"
)

// hostileStatusServer answers every request with a status line that would set the terminal's
// title and clear its screen (robots.txt is not found).
func hostileStatusServer(t *testing.T, status string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					body, st := "<a href=\"/x\">x</a>", status
					if req.URL.Path == "/robots.txt" {
						body, st = "", "404 Not Found"
					}
					if _, err := c.Write([]byte("HTTP/1.1 " + st + "\r\nContent-Type: text/html\r\nContent-Length: " +
						itoa(len(body)) + "\r\n\r\n" + body)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/"
}

func itoa(n int) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + n%10)}, b...)
		if n /= 10; n == 0 {
			return string(b)
		}
	}
}

// checkNoControls fails t if text holds a control character other than newline (the progress
// line's carriage return and erase-line sequence are the crawler's own: not tested here, where
// stderr is no terminal).
func checkNoControls(t *testing.T, what, text string) {
	t.Helper()
	for _, r := range text {
		if r != '\n' && (unicode.IsControl(r) || r == '\u202e') {
			t.Errorf("%s holds control character %U:\n%q", what, r, text)
			return
		}
	}
}

// TestServerTextEscaped: what a server puts in its status line reaches the run's output and
// summary, the log lines, crawl status ("last error") and crawl urls with every control
// character escaped.
func TestServerTextEscaped(t *testing.T) {
	const evil = "\x1b]0;PWNED\x07\x1b[2J\u202e\u009b"
	seed := hostileStatusServer(t, "500 "+evil)
	dir := t.TempDir()
	for _, format := range []string{"text", "json"} {
		var out, errb bytes.Buffer
		runCmd([]string{"--data", dir, "--max-attempts", "1", "--log-format", format, "--retry", "failed", seed}, &out, &errb)
		checkNoControls(t, "crawl run's output ("+format+" logs)", out.String()+errb.String())
		if !strings.Contains(out.String()+errb.String(), `\x1b]0;PWNED`) && format == "text" {
			t.Errorf("crawl run does not show the status line, escaped:\n%s%s", out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	statusCmd([]string{"--data", dir}, &out, &errb)
	checkNoControls(t, "crawl status", out.String()+errb.String())
	if !strings.Contains(out.String(), `\x1b]0;PWNED\x07\x1b[2J`) {
		t.Errorf("crawl status's last error does not show the status line, escaped:\n%s", out.String())
	}
	out.Reset()
	urlsCmd([]string{"--data", dir}, &out, &errb)
	urlsCmd([]string{"--data", dir, "--json"}, &out, &errb)
	checkNoControls(t, "crawl urls", out.String()+errb.String())
}
