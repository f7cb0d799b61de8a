package hostlimit_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"

	"github.com/crawl-project/crawl/hostlimit"
)

// A plain http.Client whose requests all pass their host's gate: 50 requests sent at once are
// paced and windowed per host, and each host's limit is learned from its answers.
func ExampleNewTransport() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello")
	}))
	defer srv.Close()

	client := &http.Client{Transport: hostlimit.NewTransport(nil, &hostlimit.TransportOptions{
		InitialRate: 20, // req/s per host at first; learned from there
	})}
	defer client.CloseIdleConnections() // also saves what was learned, with a Store

	var wg sync.WaitGroup
	var ok atomic.Int32
	for i := range 50 {
		wg.Go(func() {
			resp, err := client.Get(fmt.Sprintf("%s/page/%d", srv.URL, i))
			if err != nil {
				return
			}
			defer resp.Body.Close() // frees the request's slot in its host's window
			if _, err := io.Copy(io.Discard, resp.Body); err == nil && resp.StatusCode == http.StatusOK {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	fmt.Println(ok.Load(), "pages")
	// Output: 50 pages
}

// A host that answers 429 with Retry-After is paused for that long, and the GET is sent again
// after the pause: the caller sees the final answer. Refusals and pauses show in the Observer.
func ExampleNewTransport_retryAfter() {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		io.WriteString(w, "hello")
	}))
	defer srv.Close()

	client := &http.Client{Transport: hostlimit.NewTransport(nil, &hostlimit.TransportOptions{
		Retry: &hostlimit.RetryPolicy{MaxAttempts: 3},
		Observer: func(e hostlimit.Event) {
			if e.Kind == hostlimit.AttemptEnded {
				fmt.Printf("attempt %d: %d, host paused for %v\n", e.Attempt, e.Status, e.Pause)
			}
		},
	})}
	defer client.CloseIdleConnections()

	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	fmt.Println("caller got", resp.StatusCode)
	// Output:
	// attempt 1: 429, host paused for 1s
	// attempt 2: 200, host paused for 0s
	// caller got 200
}
