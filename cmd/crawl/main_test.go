package main

import (
	"os"
	"testing"
)

// TestMain lets the test binary act as the crawl command itself when CRAWL_AS_MAIN=1, so tests
// can run real crawl processes (and kill them) without a separate build step.
func TestMain(m *testing.M) {
	if os.Getenv("CRAWL_AS_MAIN") == "1" {
		os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
