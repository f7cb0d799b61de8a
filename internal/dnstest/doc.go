// Package dnstest serves DNS on loopback for tests and benchmarks: A and AAAA records for the
// names a test chooses, NXDOMAIN for every other name, each answer held for a delay the test
// chooses (a slow resolver), and a count of the queries each name received. It stands in for a
// resolver so that a crawl of simulated hosts (internal/simweb's broad webs) resolves their
// names without the system's configuration or the internet.
//
// The protocol is github.com/miekg/dns's; this package adds only the zone, the delays and the
// counting. One Server answers on one port over UDP and TCP, on 127.0.0.1 only.
package dnstest
