// Package urlnorm turns the URL strings a crawler meets (seeds, hrefs,
// Location headers) into one canonical absolute http(s) URL each, and derives
// the keys the crawler groups URLs by: the politeness key (HostKey) and the
// registrable domain (Registrable).
//
// Normalization is deliberately conservative: it only applies rewrites that
// RFC 3986 §6.2.2 (syntax-based normalization) and the WHATWG URL standard
// agree do not change which resource a URL names, so two spellings of one URL
// share a single frontier entry:
//
//   - surrounding C0 controls and spaces are trimmed; tab, CR and LF inside
//     are removed (as browsers do);
//   - scheme and host are lowercased; internationalized host names become
//     punycode (x/net/idna, Lookup profile); IPv6 literals take their
//     canonical RFC 5952 form;
//   - the default port (:80 for http, :443 for https), an empty port, an empty
//     userinfo, the fragment and an empty query ("?" alone) are dropped;
//   - percent-encoding uses upper-case hex; encoded unreserved characters
//     (ALPHA DIGIT - . _ ~) are decoded; reserved characters stay as they
//     are; bytes that may not appear literally (spaces, controls, non-ASCII,
//     a '%' not starting an escape, ...) are encoded;
//   - dot segments are removed after decoding (so "%2E%2E" counts as "..");
//     an empty path becomes "/";
//   - in http(s) URLs and in relative references a backslash before the query
//     is read as '/', as browsers read it.
//
// The splitting into components and the reference resolution (RFC 3986
// §5.2) are written by hand instead of using net/url's: url.Parse rejects
// inputs that browsers accept ("%zz", unescaped spaces) and keeps those it
// accepts in non-canonical form, and url.URL.ResolveReference does not
// normalize the result. The final string is still handed to url.Parse, so
// every *url.URL this package returns round-trips through String().
//
// Every function is pure and safe for concurrent use. A Resolver, which resolves the many links
// of one page against its base with fewer allocations, is not; it returns what Resolve does.
package urlnorm
