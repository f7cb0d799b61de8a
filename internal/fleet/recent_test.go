package fleet

import (
	"errors"
	"testing"

	"github.com/crawl-project/crawl/frontier"
)

// recentLinks leaves out the links it was given and repeats within a page, keeps the others,
// and forgets a fingerprint when a newer one takes its slot (never a false yes).
func TestRecentLinksFilter(t *testing.T) {
	r := newRecentLinks(1024)
	e := func(u string) frontier.Entry { return frontier.Entry{URL: u, Host: "h"} }
	res := frontier.Result{Kind: frontier.Fetched,
		Links:    []frontier.Entry{e("http://h/a"), e("http://h/b"), e("http://h/a")},
		Excluded: []frontier.Exclusion{{Entry: e("http://h/b"), Reason: "robots"}, {Entry: e("http://h/x"), Reason: "robots"}}}
	got, fps := r.filter(res)
	if len(got.Links) != 2 || len(got.Excluded) != 1 || got.Excluded[0].URL != "http://h/x" || len(fps) != 3 {
		t.Fatalf("first page: links %v excluded %v fps %d; want a, b, x once each", got.Links, got.Excluded, len(fps))
	}
	// a page being committed claims its links: another page leaves them out
	got, again := r.filter(res)
	if len(got.Links)+len(got.Excluded) != 0 || len(again) != 0 {
		t.Fatalf("while the first page is committed: %v %v kept, want none", got.Links, got.Excluded)
	}
	// its commit refused, they are given back and sent again
	r.forget(fps)
	got, fps = r.filter(res)
	if len(got.Links) != 2 || len(got.Excluded) != 1 {
		t.Fatalf("after forget: links %v excluded %v, want a, b, x again", got.Links, got.Excluded)
	}
	// a fingerprint in the same slot evicts a's
	a := Fingerprint("http://h/a")
	var other string
	for i := 0; ; i++ {
		u := "http://h/o" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676%26))
		if fp := Fingerprint(u); fp != a && fp%1024 == a%1024 {
			other = u
			break
		}
	}
	r.remember([]uint64{Fingerprint(other)})
	got, _ = r.filter(frontier.Result{Kind: frontier.Fetched, Links: []frontier.Entry{e("http://h/a"), e(other)}})
	if len(got.Links) != 1 || got.Links[0].URL != "http://h/a" {
		t.Fatalf("after eviction: kept %v, want a only", got.Links)
	}
}

// After an outage the worker forgets what it saw Redis record: a Redis restarted on its
// append-only file may have lost the last second of writes, links included, and a link left
// out because it was "recorded" would never be crawled (TestFleetRedisKilled lost 7 pages so).
func TestRecentLinksForgottenAfterOutage(t *testing.T) {
	f := &Frontier{recent: newRecentLinks(1024), opts: FrontierOptions{}.withDefaults()}
	res := frontier.Result{Kind: frontier.Fetched, Links: []frontier.Entry{{URL: "http://h/a", Host: "h"}}}
	_, fps := f.recent.filter(res)
	f.recent.remember(fps)
	f.linkOK() // no outage: nothing forgotten
	if got, _ := f.recent.filter(res); len(got.Links) != 0 {
		t.Fatalf("kept %v without an outage, want it left out", got.Links)
	}
	f.linkFailed(errors.New("connection refused"))
	f.linkOK()
	if got, _ := f.recent.filter(res); len(got.Links) != 1 {
		t.Fatalf("kept %v after an outage, want the link sent again", got.Links)
	}
}
