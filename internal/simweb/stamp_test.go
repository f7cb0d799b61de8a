package simweb

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// With KernelArrival a request's arrival is when its bytes reached the host, however late its
// handler runs: a request whose handler is held back 1.2 s, then one sent as soon as the first
// is answered, to a host allowing one a second, are both served; without it (the control) they
// seem to arrive together and the second is refused.
func TestKernelArrival(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SO_TIMESTAMPNS on TCP is Linux's")
	}
	for _, kernel := range []bool{true, false} {
		t.Run(fmt.Sprintf("KernelArrival=%v", kernel), func(t *testing.T) {
			spec := HostSpec{Name: "h", Pages: 3, Limit: 1, Burst: 1, Reply: Reply429Seconds}
			w, err := Start([]HostSpec{spec}, &Options{KernelArrival: kernel})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			addr := strings.TrimSuffix(strings.TrimPrefix(w.URL("h"), "http://"), "/")
			get := func(path string, late time.Duration) (int, time.Time) {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if late > 0 {
					w.gate.Lock() // its handler does not start (nor read the clock) until unlocked
				}
				sent := time.Now()
				fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: h\r\n\r\n", path)
				if late > 0 {
					time.Sleep(late)
					w.gate.Unlock()
				}
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode, sent
			}
			code1, sent := get("/p1", 1200*time.Millisecond)
			code2, _ := get("/p2", 0)
			st := w.Stats()["h"]
			t.Logf("statuses %d %d; arrivals %v after the first send, %v apart", code1, code2, st.FirstRequest.Sub(sent), st.LastRequest.Sub(st.FirstRequest))
			if kernel {
				if st.OverLimit != 0 || st.FirstRequest.Before(sent) || st.FirstRequest.After(sent.Add(300*time.Millisecond)) {
					t.Errorf("%d refused, first arrival %v after its send; want both served, the first arriving as sent", st.OverLimit, st.FirstRequest.Sub(sent))
				}
			} else if st.OverLimit != 1 || code2 != http.StatusTooManyRequests {
				t.Errorf("the control: %d refused (second: %d), want the second (both seem to arrive when the first is served)", st.OverLimit, code2)
			}
		})
	}
}

// KernelArrival needs the real clock.
func TestKernelArrivalNeedsRealClock(t *testing.T) {
	_, err := Start([]HostSpec{{Name: "h", Pages: 1}}, &Options{KernelArrival: true, Clock: time.Now})
	if !errors.Is(err, ErrBadSpec) {
		t.Fatalf("Start with KernelArrival and a Clock: %v, want ErrBadSpec", err)
	}
}
