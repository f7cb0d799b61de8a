// Package redistest starts a real redis-server for tests: one process per Start, on a free
// loopback port, with an append-only file in the test's temporary directory and no RDB
// snapshots (an empty --save). The server is stopped by its PID when the test ends.
// StartCluster starts a real Redis Cluster the same way: masters×(1+replicas) nodes with
// --cluster-enabled on free loopback ports (each with its bus port free), joined with
// redis-cli --cluster create, returned once every node reports cluster_state:ok; its
// cluster-node-timeout is short (NodeTimeout), so a killed master's replica takes over within
// a few seconds.
//
// StartWith and StartClusterWith take Options: TLS only (with a throwaway authority made by
// NewCerts in the test's temporary directory; a cluster's bus and replication use TLS too),
// and ACL users (the default user is then off; this package's own checks log in as AdminUser).
//
// StartOld starts a stand-in that only claims an old redis_version, to test how a client
// refuses a server older than any installed.
//
// When redis-server (or, for a cluster, redis-cli) is not on PATH the test is skipped, except
// under CI=true, where it fails: CI installs redis-server (.ci/run), so a missing binary there
// is a broken machine, not a reason to pass without testing.
package redistest
