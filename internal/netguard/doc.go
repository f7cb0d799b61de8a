// Package netguard keeps a crawler fed links by strangers from being steered into the network
// it runs in (SSRF). Its Guard checks the address actually dialled — after DNS resolution, on
// every connection, redirects and DNS rebinding included — and refuses loopback, private,
// link-local (169.254.0.0/16, cloud metadata), unique-local, shared (CGNAT), multicast and
// unspecified addresses unless their range was allowed. IPv6 addresses that carry an IPv4 one
// (mapped, IPv4-compatible ::/96, translated, NAT64 64:ff9b::/96) are judged by the IPv4 address;
// local-use NAT64 (64:ff9b:1::/48) is refused as a whole. A proxy is let through as one
// address:port endpoint, never as its block. It is written by hand because it is a
// few lines over net/netip and no library does exactly this check at dial time.
package netguard
