package fetch

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// TestMethodBody: a POST carries its body and type; its gzip answer is decoded and capped as a
// GET's; a body over MaxRequestBody is refused before anything is sent.
func TestMethodBody(t *testing.T) {
	var got, gotType, gotMethod string
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		b, _ := io.ReadAll(r.Body)
		got, gotType, gotMethod = string(b), r.Header.Get("Content-Type"), r.Method
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		zw.Write(bytes.Repeat([]byte("x"), 100))
		zw.Close()
	}))
	defer srv.Close()
	c := New(Config{MaxBody: 10})
	defer c.CloseIdle()
	u, _ := url.Parse(srv.URL + "/api")
	resp, err := c.GetWith(context.Background(), u, GetOptions{Method: "POST", Body: []byte(`{"q":1}`), BodyType: "application/json"})
	if err != nil {
		t.Fatal(err)
	}
	if gotMethod != "POST" || got != `{"q":1}` || gotType != "application/json" {
		t.Errorf("server saw %s %q type %q", gotMethod, got, gotType)
	}
	if string(resp.Body) != "xxxxxxxxxx" || !resp.Truncated || resp.DecodedFrom == "" {
		t.Errorf("body %q truncated %v decoded from %q", resp.Body, resp.Truncated, resp.DecodedFrom)
	}
	_, err = c.GetWith(context.Background(), u, GetOptions{Method: "POST", Body: make([]byte, MaxRequestBody+1)})
	var fe *Error
	if !errors.As(err, &fe) || !errors.Is(err, errRequestBody) || calls != 1 {
		t.Errorf("oversized body: err %v, calls %d", err, calls)
	}
}

// TestPageHeader: a page's headers are sent, except those the client owns; its Accept replaces
// the client's; its Authorization is sent but not kept in ReqHeader.
func TestPageHeader(t *testing.T) {
	var seen http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
	}))
	defer srv.Close()
	c := New(Config{UserAgent: "crawl-test"})
	defer c.CloseIdle()
	u, _ := url.Parse(srv.URL + "/api")
	h := http.Header{
		"Origin": {"http://site.test"}, "X-Api-Key": {"k1"}, "Accept": {"application/json"},
		"Authorization": {"Bearer t"}, "User-Agent": {"HeadlessChrome"}, "Range": {"bytes=0-1"},
		"If-None-Match": {`"x"`}, "Cookie": {"a=b"}, "Connection": {"close"},
	}
	resp, err := c.GetWith(context.Background(), u, GetOptions{Header: h})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"Origin": "http://site.test", "X-Api-Key": "k1", "Accept": "application/json",
		"Authorization": "Bearer t", "User-Agent": "crawl-test", "Range": "", "If-None-Match": "", "Cookie": "",
	} {
		if got := seen.Get(k); got != want {
			t.Errorf("server saw %s %q, want %q", k, got, want)
		}
	}
	if resp.ReqHeader.Get("Authorization") != "" || resp.ReqHeader.Get("X-Api-Key") != "k1" {
		t.Errorf("ReqHeader %v: want the page's headers without its credential", resp.ReqHeader)
	}
	if _, err := c.GetWith(context.Background(), u, GetOptions{Header: http.Header{"X-Bad": {"a\r\nInjected: 1"}}}); err == nil {
		t.Errorf("a header value with CR LF was sent")
	}
}
