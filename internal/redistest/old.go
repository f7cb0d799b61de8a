package redistest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
)

// StartOld starts, on a free loopback port, a server that speaks just enough of Redis'
// protocol to claim to be the given redis_version (with a fixed run_id): INFO answers with
// that server section whatever the section asked, HELLO is unknown (as before Redis 6), and
// every other command is answered OK. It tells how a client treats a server older than any
// installed one. It returns the server's address; the listener closes when t ends.
func StartOld(t testing.TB, version string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	info := "# Server\r\nredis_version:" + version + "\r\nrun_id:0123456789abcdef0123456789abcdef01234567\r\n"
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveOld(c, info)
		}
	}()
	return ln.Addr().String()
}

// serveOld answers c's commands (RESP arrays of bulk strings, at most 64 arguments of 64 KB)
// until it closes or sends anything else.
func serveOld(c net.Conn, info string) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		n, ok := readLen(r, '*', 64)
		if !ok || n == 0 {
			return
		}
		var name string
		for i := range n {
			size, ok := readLen(r, '$', 64<<10)
			if !ok {
				return
			}
			b := make([]byte, size+2)
			if _, err := io.ReadFull(r, b); err != nil {
				return
			}
			if i == 0 {
				name = strings.ToUpper(string(b[:size]))
			}
		}
		reply := "+OK\r\n"
		switch name {
		case "HELLO":
			reply = "-ERR unknown command 'HELLO'\r\n"
		case "INFO":
			reply = fmt.Sprintf("$%d\r\n%s\r\n", len(info), info)
		}
		if _, err := c.Write([]byte(reply)); err != nil {
			return
		}
	}
}

// readLen reads a line "<kind><n>\r\n" with 0 ≤ n ≤ most.
func readLen(r *bufio.Reader, kind byte, most int) (int, bool) {
	line, err := r.ReadString('\n')
	if err != nil || len(line) < 3 || line[0] != kind {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimRight(line[1:], "\r\n"))
	return n, err == nil && n >= 0 && n <= most
}
