// Package redistest starts a real redis-server for tests: one process per Start, on a free
// loopback port, with an append-only file in the test's temporary directory and no RDB
// snapshots (an empty --save). The server is stopped by its PID when the test ends.
//
// When redis-server is not on PATH the test is skipped, except under CI=true, where it fails:
// CI installs redis-server (.ci/run), so a missing binary there is a broken machine, not a
// reason to pass without testing.
package redistest
