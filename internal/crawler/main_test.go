package crawler

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

// TestMain runs up to testParallel tests at once unless -parallel says otherwise.
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(testParallel))
	}
	os.Exit(m.Run())
}

// testParallel is how many of this package's parallel tests run at once by default: they
// mostly wait on paced and refusing loopback servers, so the default (GOMAXPROCS, 2 on a
// 2-core machine) leaves the cores idle. TestHostileServers, which measures the process's
// heap, and tests that change package variables stay sequential: they end before any
// parallel test starts.
const testParallel = 4
