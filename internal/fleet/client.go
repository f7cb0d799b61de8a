package fleet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/crawl-project/crawl/internal/urlnorm"
	"github.com/redis/go-redis/v9"
)

// Target is the Redis or Valkey a shared crawl lives in, as a URL names it:
// redis://[USER:PASSWORD@]HOST:PORT[,HOST:PORT…][/DB], or rediss:// for TLS. Several
// comma-separated nodes are seeds: the first that answers is asked whether it runs in cluster
// mode, and a cluster's other nodes are discovered from it.
//
// A rediss:// target verifies each node's certificate, for the node's host as the URL or the
// cluster names it, against the system's roots, or against only the authorities of the PEM
// file the query's tls_ca=FILE names. tls_cert=FILE&tls_key=FILE give a client certificate,
// for a server that asks for one (tls-auth-clients). go-redis' skip_verify is refused: there
// is no unverified TLS. Other query options are go-redis' (redis.ParseURL).
type Target struct {
	Addrs []string // the seed nodes, HOST:PORT
	DB    int      // the database (a cluster has only 0)
	TLS   bool     // rediss://
	opts  *redis.Options
}

// ACL is the least a shared crawl's ACL user needs, as ACL SETUSER rules: its keys (crawl:*),
// data commands, scripts, MULTI, WAIT and the connection's own commands (@connection), INFO
// (Dial asks whether a node runs a cluster; a worker reads its masters' replicas), TIME (the
// crawl's clock) and CLUSTER SLOTS (a cluster client's map); no pub/sub channel and nothing
// @dangerous (FLUSHALL, KEYS, CONFIG …). docs/fleet.md shows it in use.
const ACL = "~crawl:* resetchannels -@all +@read +@write +@scripting +@connection +@transaction -@dangerous +info +time +cluster|slots"

// ParseTarget parses a --redis URL. The error names what is wrong with it, never its password.
func ParseTarget(raw string) (Target, error) {
	t, err := parseTarget(raw)
	if err != nil {
		shown, pass := urlnorm.RedactPassword(raw)
		msg := err.Error()
		if pass != "" {
			msg = strings.ReplaceAll(msg, pass, "…")
		}
		return t, fmt.Errorf("%q: %s", shown, msg)
	}
	return t, nil
}

func parseTarget(raw string) (Target, error) {
	var t Target
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || scheme != "redis" && scheme != "rediss" {
		return t, errors.New("want redis://HOST:PORT/DB or rediss:// (TLS)")
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	path, query, _ := strings.Cut(tail, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return t, fmt.Errorf("the query: %w", err)
	}
	trust, err := popTLSFiles(q, scheme == "rediss")
	if err != nil {
		return t, err
	}
	userinfo, hosts := "", authority
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		userinfo, hosts = authority[:i+1], authority[i+1:]
	}
	for _, h := range strings.Split(hosts, ",") {
		if h == "" {
			return t, errors.New("an empty node in the list of nodes")
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(h, "6379")
		}
		t.Addrs = append(t.Addrs, h)
	}
	u := scheme + "://" + userinfo + t.Addrs[0] + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	opts, err := redis.ParseURL(u)
	if err != nil {
		return t, err
	}
	if opts.TLSConfig != nil {
		opts.TLSConfig.RootCAs, opts.TLSConfig.Certificates = trust.roots, trust.certs
	}
	t.DB, t.TLS, t.opts = opts.DB, opts.TLSConfig != nil, opts
	return t, nil
}

// tlsTrust is what a rediss:// URL's query says to trust and present: nil roots are the
// system's, no certs present none.
type tlsTrust struct {
	roots *x509.CertPool
	certs []tls.Certificate
}

// popTLSFiles takes the query options tls_ca, tls_cert and tls_key out of q and reads the files
// they name. The error names the option and the file.
func popTLSFiles(q url.Values, isTLS bool) (tlsTrust, error) {
	var tr tlsTrust
	if q.Has("skip_verify") {
		return tr, errors.New("skip_verify is refused: the certificate is always verified (tls_ca=FILE trusts a private authority)")
	}
	files := map[string]string{}
	for _, name := range []string{"tls_ca", "tls_cert", "tls_key"} {
		if !q.Has(name) {
			continue
		}
		if files[name] = q.Get(name); files[name] == "" {
			return tr, fmt.Errorf("%s: no file named", name)
		}
		q.Del(name)
	}
	if len(files) == 0 {
		return tr, nil
	}
	ca, cert, key := files["tls_ca"], files["tls_cert"], files["tls_key"]
	if !isTLS {
		return tr, errors.New("tls_ca, tls_cert and tls_key need rediss:// (TLS)")
	}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return tr, fmt.Errorf("tls_ca: %w", err)
		}
		tr.roots = x509.NewCertPool()
		if !tr.roots.AppendCertsFromPEM(pem) {
			return tr, fmt.Errorf("tls_ca: no PEM certificate in %s", ca)
		}
	}
	if (cert == "") != (key == "") {
		return tr, errors.New("tls_cert and tls_key go together: a client certificate and its key")
	}
	if cert != "" {
		c, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return tr, fmt.Errorf("tls_cert %s, tls_key %s: %w", cert, key, err)
		}
		tr.certs = []tls.Certificate{c}
	}
	return tr, nil
}

// String names the target for messages: its nodes and database.
func (t Target) String() string {
	return fmt.Sprintf("%s (database %d)", strings.Join(t.Addrs, ","), t.DB)
}

// Dial connects to t: it asks the seeds in turn (INFO cluster) whether they run in cluster
// mode and returns a cluster client (which follows the cluster's slots and failovers) or a
// single-node client. tune, if not nil, adjusts the connection options (timeouts, retries)
// before the client is made. The error names the nodes and the cause; a cluster named with a
// database other than 0 is refused.
func (t Target) Dial(ctx context.Context, tune func(*redis.Options)) (redis.UniversalClient, error) {
	if t.opts == nil {
		return nil, errors.New("fleet: Dial of a Target not made by ParseTarget")
	}
	base := *t.opts
	if tune != nil {
		tune(&base)
	}
	var errs []error
	for _, addr := range t.Addrs {
		o := base
		o.Addr, o.DB = addr, 0 // a cluster node refuses SELECT
		o.TLSConfig = tlsFor(base.TLSConfig, addr)
		c := redis.NewClient(&o)
		info, err := c.Info(ctx, "cluster").Result()
		if err != nil {
			c.Close()
			errs = append(errs, explainDial(addr, o.TLSConfig != nil, err))
			continue
		}
		c.Close()
		if !strings.Contains(info, "cluster_enabled:1") {
			o.DB = t.DB
			return redis.NewClient(&o), nil
		}
		if t.DB != 0 {
			return nil, fmt.Errorf("%s is a Redis Cluster, which has only database 0 (the URL names %d)", addr, t.DB)
		}
		seeds := append([]string{addr}, slices.DeleteFunc(slices.Clone(t.Addrs), func(a string) bool { return a == addr })...)
		return redis.NewClusterClient(clusterOptions(&base, seeds)), nil
	}
	return nil, errors.Join(errs...)
}

// explainDial is err of a connection to addr (over TLS if isTLS), with a hint where the URL
// can fix it.
func explainDial(addr string, isTLS bool, err error) error {
	var unknown x509.UnknownAuthorityError
	var notTLS tls.RecordHeaderError
	switch {
	case errors.As(err, &unknown):
		return fmt.Errorf("%s: %w (to trust a private authority, add tls_ca=FILE to the URL's query)", addr, err)
	case isTLS && errors.As(err, &notTLS):
		return fmt.Errorf("%s: %w (if the server does not speak TLS, use redis://)", addr, err)
	case isTLS && isTimeout(err):
		return fmt.Errorf("%s: %w (a server that does not speak TLS never answers the TLS handshake: if so, use redis://)", addr, err)
	case !isTLS && errors.Is(err, io.EOF):
		return fmt.Errorf("%s: %w (the server closed the connection: if it speaks TLS only, use rediss://)", addr, err)
	}
	return fmt.Errorf("%s: %w", addr, err)
}

// isTimeout reports whether err is a deadline that ran out.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// clusterReload is how often a cluster client reloads the slots' owners: go-redis learns a
// promoted replica from such a reload, not from a failed connection.
const clusterReload = time.Second

func clusterOptions(o *redis.Options, seeds []string) *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs:    seeds,
		Username: o.Username, Password: o.Password,
		TLSConfig:  o.TLSConfig,
		MaxRetries: o.MaxRetries, MinRetryBackoff: o.MinRetryBackoff, MaxRetryBackoff: o.MaxRetryBackoff,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
		PoolSize: o.PoolSize, MinIdleConns: o.MinIdleConns,
		ClusterStateReloadInterval: clusterReload,
		NewClient: func(no *redis.Options) *redis.Client {
			no.TLSConfig = tlsFor(no.TLSConfig, no.Addr)
			return redis.NewClient(no)
		},
	}
}

// tlsFor is c for a connection to addr: its server name is addr's host, so each node of a
// cluster is verified under its own name.
func tlsFor(c *tls.Config, addr string) *tls.Config {
	if c == nil {
		return nil
	}
	c = c.Clone()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		c.ServerName = host
	}
	return c
}
