package fleet

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/crawl-project/crawl/internal/termsafe"
	"github.com/redis/go-redis/v9"
)

// server is one Redis node the crawl's keys live on, as its INFO server section describes it.
type server struct {
	Addr    string // HOST:PORT, as the client dials it
	Version string // redis_version (Valkey reports the Redis version it matches)
	RunID   string // run_id: drawn anew each time the process starts
}

// minVersion is the oldest Redis the scripts run on: SMISMEMBER, ZMSCORE and LPOP with a
// count came with 6.2.
var minVersion = version{6, 2}

// version is a server's major and minor version.
type version struct{ major, minor int }

func (v version) less(w version) bool {
	return v.major < w.major || v.major == w.major && v.minor < w.minor
}

// parseVersion reads the major and minor numbers of a redis_version ("7.0.15", "6.2.0",
// "255.255.255" for an unstable build).
func parseVersion(s string) (version, error) {
	parts := strings.SplitN(s, ".", 3)
	if len(parts) < 2 {
		return version{}, fmt.Errorf("redis_version %q is not MAJOR.MINOR[.PATCH]", shorten(s))
	}
	var v version
	var err1, err2 error
	v.major, err1 = strconv.Atoi(parts[0])
	v.minor, err2 = strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil || v.major < 0 || v.minor < 0 {
		return version{}, fmt.Errorf("redis_version %q is not MAJOR.MINOR[.PATCH]", shorten(s))
	}
	return v, nil
}

// shorten bounds a string a server sent before it is quoted in a message.
func shorten(s string) string {
	const most = 40
	if len(s) > most {
		return s[:most] + "…"
	}
	return s
}

// checkVersion refuses a server older than minVersion (or one whose version cannot be read),
// naming its address and version.
func (sv server) checkVersion() error {
	v, err := parseVersion(sv.Version)
	if err != nil {
		return fmt.Errorf("%s: %w", sv.Addr, err)
	}
	if v.less(minVersion) {
		return fmt.Errorf("redis %s at %s: %w", termsafe.Escape(shorten(sv.Version)), sv.Addr, ErrServerTooOld)
	}
	return nil
}

// parseServerInfo reads redis_version and run_id from the reply of INFO server.
func parseServerInfo(addr, info string) server {
	sv := server{Addr: addr}
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimRight(line, "\r"), ":")
		if !ok {
			continue
		}
		switch k {
		case "redis_version":
			sv.Version = v
		case "run_id":
			sv.RunID = v
		}
	}
	return sv
}

// readServers reads INFO server of the node a single-node client talks to, or of every
// master of a cluster that holds one of the crawl's keys (a partition's, or one of the
// crawl-wide keys), as the client's map of slots (reloaded every clusterReload) names them.
// The error names each node not read (the others are returned).
func (s *Store) readServers(ctx context.Context) ([]server, error) {
	var nodes []*redis.Client
	switch c := s.rdb.(type) {
	case *redis.Client:
		nodes = []*redis.Client{c}
	case *redis.ClusterClient:
		byAddr := map[string]*redis.Client{}
		keys := []string{s.k.config(), s.k.active(), s.k.workers(), s.k.released(), s.k.reports()}
		for p := range s.opts.Partitions {
			keys = append(keys, s.k.counts(p))
		}
		for _, key := range keys {
			n, err := c.MasterForKey(ctx, key)
			if err != nil {
				return nil, fmt.Errorf("fleet: the master of %s: %w", key, err)
			}
			byAddr[n.Options().Addr] = n
		}
		for _, n := range byAddr {
			nodes = append(nodes, n)
		}
	default:
		return nil, fmt.Errorf("fleet: unsupported Redis client %T", s.rdb)
	}
	out := make([]server, len(nodes)) // a node not read stays the zero server
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr := n.Options().Addr
			info, err := n.Info(ctx, "server").Result()
			if err != nil {
				errs[i] = fmt.Errorf("fleet: INFO server of %s: %w", addr, err)
				return
			}
			out[i] = parseServerInfo(addr, info)
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// checkServers refuses servers too old for the crawl's scripts (at Open) and records their
// run_ids, against which restarted compares.
func (s *Store) checkServers(ctx context.Context) error {
	svs, err := s.readServers(ctx)
	if err != nil {
		return err
	}
	for _, sv := range svs {
		if err := sv.checkVersion(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.runIDs = runIDsOf(svs)
	s.mu.Unlock()
	return nil
}

func runIDsOf(svs []server) map[string]string {
	m := make(map[string]string, len(svs))
	for _, sv := range svs {
		m[sv.Addr] = sv.RunID
	}
	return m
}

// restarted reads the servers' run_ids again and returns the address of one that is new or
// has a new run_id since it was last read ("" if none): a node that restarted, or a replica
// promoted in a failover, either of which may have lost the last writes it acknowledged. (A
// master gone from the list had its slots moved, which loses nothing.) complete reports
// whether every node was read; one that was not (it does not answer, or the client does not
// know the master of a slot yet) keeps its last run_id, and is compared once it answers. The
// error says why a node was not read.
func (s *Store) restarted(ctx context.Context) (addr string, complete bool, err error) {
	svs, err := s.readServers(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	was := s.runIDs
	if s.runIDs == nil {
		s.runIDs = map[string]string{}
	}
	for _, sv := range svs {
		if sv.Addr == "" {
			continue // not read
		}
		if old, ok := was[sv.Addr]; (!ok || old != sv.RunID) && was != nil && addr == "" {
			addr = sv.Addr
		}
		s.runIDs[sv.Addr] = sv.RunID
	}
	return addr, err == nil, err
}

// remarkActive adds every partition this Store has marked active (markActive) to the crawl's
// active set again: a restarted Redis may have lost a mark that this Store still remembers,
// and a partition with work missing from the set is never read (no worker leases from it, and
// the crawl looks idle).
func (s *Store) remarkActive(ctx context.Context) error {
	s.mu.Lock()
	add := make([]any, 0, len(s.active))
	for p := range s.active {
		add = append(add, p)
	}
	s.mu.Unlock()
	if len(add) == 0 {
		return nil
	}
	if err := s.rdb.SAdd(ctx, s.k.active(), add...).Err(); err != nil {
		return fmt.Errorf("fleet: mark partitions active again: %w", err)
	}
	return nil
}
