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
