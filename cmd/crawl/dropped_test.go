package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/crawl-project/crawl/frontier"
)

// TestStatusDropped: a page of 1,500 links to a host over --max-host-pages records
// frontier.OverBudgetRecords of them as excluded limit and counts the rest; crawl status says
// how many were counted, in text and JSON.
func TestStatusDropped(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path != "/" {
			w.Write([]byte("<p>leaf</p>"))
			return
		}
		for i := range 1500 {
			fmt.Fprintf(w, `<a href="/p%d">p</a>`, i)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	runOK(t, srv.URL+"/", "--data", dir, "--max-host-pages", "2")
	st := statusJSON(t, dir)
	want := 1500 - 1 - frontier.OverBudgetRecords // the seed and one link fill the budget of 2
	if st.ExcludedBy["limit"] != frontier.OverBudgetRecords || st.Dropped != want {
		t.Errorf("excluded %v, dropped %d; want %d limit, %d dropped", st.ExcludedBy, st.Dropped, frontier.OverBudgetRecords, want)
	}
	var out, errb bytes.Buffer
	if code := statusCmd([]string{"--data", dir}, &out, &errb); code != exitOK {
		t.Fatalf("crawl status: exit %d\n%s", code, errb.String())
	}
	if line := fmt.Sprintf("not stored (counted only): %d", want); !strings.Contains(out.String(), line) {
		t.Errorf("crawl status does not say %q:\n%s", line, out.String())
	}
}
