package main

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/urlnorm"
)

// hostEntry is one host's table in a --hosts-config file (TOML):
//
//	["docs.example.com"]
//	max_rate = 2                           # requests/s, at most
//	concurrency = 1                        # requests in flight, at most
//	ignore_robots = true                   # a host you own: robots.txt not fetched nor obeyed
//	headers = { "X-Api-Key" = "secret" }   # sent to this host only
type hostEntry struct {
	MaxRate      float64           `toml:"max_rate"`
	Concurrency  int               `toml:"concurrency"`
	IgnoreRobots bool              `toml:"ignore_robots"`
	Headers      map[string]string `toml:"headers"`
}

// hostKeys are the keys a host's table may hold.
var hostKeys = []string{"max_rate", "concurrency", "ignore_robots", "headers"}

// readHostsConfig reads a --hosts-config file into the crawler's per-host policies and the
// headers to send to each host, both by host key. Every error names the file, and the line
// or the host and key that is wrong.
func readHostsConfig(path string) (map[string]crawler.HostPolicy, map[string]http.Header, error) {
	var raw map[string]any
	if _, err := toml.DecodeFile(path, &raw); err != nil {
		return nil, nil, tomlError(path, err)
	}
	for name, v := range raw {
		if _, ok := v.(map[string]any); !ok {
			return nil, nil, fmt.Errorf("%s: %q is not a table of host settings: write [%q] above its keys", path, name, name)
		}
	}
	var file map[string]hostEntry
	md, err := toml.DecodeFile(path, &file)
	if err != nil {
		return nil, nil, tomlError(path, err)
	}
	for _, k := range md.Undecoded() {
		if len(k) == 2 && !slices.Contains(hostKeys, k[1]) {
			return nil, nil, fmt.Errorf("%s: [%q]: unknown key %q (keys: %s)", path, k[0], k[1], strings.Join(hostKeys, ", "))
		}
		return nil, nil, fmt.Errorf("%s: unknown key %s", path, k)
	}
	policies := map[string]crawler.HostPolicy{}
	headers := map[string]http.Header{}
	for host, e := range file {
		u, err := urlnorm.Parse("http://" + host + "/")
		if err != nil || strings.ContainsAny(host, "/@?#") {
			return nil, nil, fmt.Errorf("%s: [%q]: want a host name, host:port or address", path, host)
		}
		key := urlnorm.HostKey(u)
		if e.MaxRate < 0 {
			return nil, nil, fmt.Errorf("%s: [%q]: max_rate must be a positive number of requests/s, not %g", path, host, e.MaxRate)
		}
		if e.Concurrency < 0 {
			return nil, nil, fmt.Errorf("%s: [%q]: concurrency must be a positive number of requests, not %d", path, host, e.Concurrency)
		}
		p := crawler.HostPolicy{MaxRate: e.MaxRate, MaxConcurrency: e.Concurrency}
		if e.IgnoreRobots {
			p.Robots = crawler.RobotsIgnored
		}
		policies[key] = p
		for name, value := range e.Headers {
			h := headers[key]
			if err := addHeader(&h, name, value); err != nil {
				return nil, nil, fmt.Errorf("%s: [%q]: header %q: %v", path, host, name, err)
			}
			headers[key] = h
		}
	}
	return policies, headers, nil
}

// tomlLine matches the decoder's "toml: line N (last key K): message".
var tomlLine = regexp.MustCompile(`^toml: line (\d+) \(last key "(?:[^"\\]|\\.)*"\): (.*)$`)

// tomlError is a TOML syntax or type error as FILE:LINE: message.
func tomlError(path string, err error) error {
	if pe := (toml.ParseError{}); errors.As(err, &pe) {
		return fmt.Errorf("%s:%d: %s", path, pe.Position.Line, pe.Message)
	}
	if m := tomlLine.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("%s:%s: %s", path, m[1], m[2])
	}
	return fmt.Errorf("%s: %s", path, strings.TrimPrefix(err.Error(), "toml: "))
}
