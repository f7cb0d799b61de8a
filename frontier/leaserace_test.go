package frontier

import (
	"fmt"
	"testing"
	"time"
)

// TestLeaseNeverHandsOutACompletedURL: Lease scans a read snapshot. If a URL leased earlier is
// completed (committed and unleased) while that scan runs, the snapshot still shows it queued;
// it must still look leased to the scan, or the same URL is handed out again, fetched twice, and
// its second Complete fails with ErrNotLeased.
func TestLeaseNeverHandsOutACompletedURL(t *testing.T) {
	f := newTestFrontier(t)
	// Grow the store first, then complete those URLs: their freed pages leave room, so the
	// Complete below commits without remapping (which would wait for the scan's read
	// transaction and hide the race).
	var filler []Entry
	for i := range 3000 {
		filler = append(filler, Entry{URL: fmt.Sprintf("http://filler/%d", i), Host: "filler"})
	}
	if _, err := f.Add(filler); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Add([]Entry{{URL: "http://h/1", Host: "h"}, {URL: "http://h/2", Host: "h"}}); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1e9, 0)
	first, ok, err := f.Lease(now, "h")
	if err != nil || !ok {
		t.Fatalf("Lease: %v %v", ok, err)
	}
	completed := make(chan error, 1)
	testHookLeaseScan = func() {
		testHookLeaseScan = nil
		go func() { completed <- f.Complete(first, Result{Kind: Failed, Reason: "test"}) }()
		select { // give the Complete every chance to commit and unlease during the scan
		case err := <-completed:
			t.Logf("Complete finished during the scan")
			completed <- err
		case <-time.After(200 * time.Millisecond):
			t.Logf("Complete did not finish during the scan")
		}
	}
	defer func() { testHookLeaseScan = nil }()
	second, ok, err := f.Lease(now, "h")
	if err != nil || !ok {
		t.Fatalf("second Lease: %v %v", ok, err)
	}
	if err := <-completed; err != nil {
		t.Fatalf("Complete of the first lease: %v", err)
	}
	if second.URL == first.URL {
		t.Fatalf("%s leased again after it was completed", first.URL)
	}
	if err := f.Complete(second, Result{Kind: Failed, Reason: "test"}); err != nil {
		t.Errorf("Complete of the second lease: %v", err)
	}
}
