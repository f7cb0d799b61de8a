// Package robots decides, from the bytes of a robots.txt file and its HTTP status, whether a
// crawler may fetch a URL, following RFC 9309 (Robots Exclusion Protocol). It is pure: no HTTP,
// no clock, no state beyond the parsed file. Fetching robots.txt (and following up to five
// redirects for it) is done by the crawl loop through package fetch; this package only takes
// the final (status, body).
//
// There are only a few types: Robots (a parsed file, immutable, safe for concurrent use) and
// Verdict (the answer for one URL, with the rule, line and group that decided it, so a human can
// check it). NextCheck and Effective are the cache policy the crawl loop applies per host.
//
// # Why a hand-written matcher instead of github.com/temoto/robotstxt
//
// temoto/robotstxt v1.1.2 is in go.mod and was read line by line. Its exported API cannot be
// used for any part of the decision without inheriting behaviour RFC 9309 forbids:
//
//   - FromBytes returns an error (and no rules at all) when one line is malformed
//     (e.g. "Crawl-delay: 1s") or when a rule precedes the first user-agent line; RFC 9309
//     §2.2.2 and §2.3.1.5 say to ignore such lines and keep the rest.
//   - FindGroup matches user-agent lines by prefix ("User-agent: Foo" applies to "FooBot");
//     RFC 9309 §2.2.1 compares whole product tokens, case-insensitively.
//   - Group.Test keeps the first of two equally long matches (RFC: allow wins), measures
//     wildcard rules by the length of their compiled regexp, and runs that regexp unanchored,
//     so "Disallow: /private*/" blocks "/public/private1/"; every "$" becomes an end anchor.
//   - Neither rules nor paths are percent-normalized: "Disallow: /ツ" does not block
//     "/%E3%83%84", and "%aa" differs from "%AA".
//   - "#" starts a comment only at the start of a token, so "Disallow: /a#b" keeps "#b".
//   - After a 5xx, FromStatusAndBytes returns a value whose FindGroup(agent).Test(path) says
//     "allowed" (only TestAgent says disallowed), and 429 is treated as an ordinary 4xx.
//
// The scanner, group parser and matcher it would take to fix these are most of the library, so
// this package implements them directly (a few hundred lines) and uses temoto only in tests: as a
// cross-check on the cases where both agree, and to pin down each deviation above.
//
// # Matching rules (what Test implements)
//
// Parsing (Parse): at most MaxSize bytes are read; a line cut by that limit is dropped. A UTF-8
// BOM is skipped, and so is a partial one (EF BB or EF alone). Lines end at CR, LF or CRLF. "#" starts a comment anywhere in a line. Keys are
// case-insensitive; whitespace around key and value is ignored; a line without ":" is accepted
// as "key value" when it has exactly two whitespace-separated fields. Common misspellings are
// accepted (useragent, user agent, dissallow, dissalow, disalow, diasllow, disallaw, crawldelay,
// site-map), since reading more of a file can only make the crawler more polite. Lines that
// cannot be understood are skipped; they never invalidate the rest of the file.
//
// Groups: one or more user-agent lines (blank lines and non-group lines such as Sitemap may sit
// between them) followed by group members (allow, disallow, crawl-delay). A user-agent line after
// a member starts a new group. Members before the first user-agent line are ignored. A
// user-agent value's product token is its leading run of [A-Za-z_-] ("FooBot/1.0" → "FooBot");
// "*" is the wildcard group. For an agent, every group naming its product token (compared
// case-insensitively, whole token) is used, merged; if there is none, every "*" group; if there
// is none either, everything is allowed.
//
// Rules: a rule value that starts with neither "/" nor "*" gets a "/" prepended; an empty value
// matches nothing. "*" matches any run of octets (including "/" and "?"); a "$" at the very end
// anchors the rule at the end of the path and query; a "$" anywhere else is literal. A rule
// matches when it matches a prefix of the path and query, starting at its first octet. The
// matching rule with the most octets wins (octets of the normalized rule as written, counting
// "*" and a trailing "$"); on a tie allow beats disallow; on a further tie the earlier line
// wins. The path "/robots.txt" itself (exactly, without a query) is always allowed, even when
// the file is unreachable.
//
// Percent-encoding (RFC 9309 §2.2.2, §2.2.3), applied identically to rules and to the request
// path: octets outside printable ASCII, space and the characters `"<>\^{|}` and backquote are
// percent-encoded; "%xx" escapes get upper-case hex; escapes of unreserved characters
// (A-Z a-z 0-9 - . _ ~, RFC 3986 §2.3) are decoded, since encoding them or not must not change
// the match; escapes of every other character stay encoded, so "%2F" and "/" differ, as RFC
// 3986 says reserved characters do. A "%" not followed by two hex digits becomes "%25". In the
// path (never in a rule) a literal "*" or "$" is encoded as "%2A" / "%24", which is how a rule
// names those characters literally (§2.2.3). After the first "?" (the query), escapes of ":",
// "/", "?" and "@" are decoded: the §2.2.2 table makes "?baz=https://foo.bar" and
// "?baz=https%3A%2F%2Ffoo.bar" the same, and these characters have no delimiter role inside a
// query (RFC 3986 §3.4). So "*" in a rule crosses into the query as usual ("Disallow: /*/edit"
// blocks "/p?next=/edit" and "/p?next=%2Fedit"), while in the path "%2F" and "/" stay apart.
//
// # Cost
//
// A robots.txt is written by the host, so nothing in it may make the crawler's work grow
// faster than the file. Parse is linear in the bytes it reads (at most MaxSize): each line is
// handled once, and nothing seen before is searched again (a group's user-agent lines, its
// product tokens, the Sitemap values and each group's rules are kept in maps; a rule repeated
// in a group is kept once, since the earlier line wins the tie). Test matches each rule of the
// groups that apply in O(len(rule) + len(path)): a wildcard rule finds each segment at its
// leftmost occurrence after the previous one, left to right, never backtracking. So a verdict
// costs at most O(R·P + S) for R rules of S bytes in total and a path of P bytes, and the
// Group string of a verdict that names several groups is built once per agent. R·P is not
// bounded further: a file of MaxSize of distinct wildcard rules ("Disallow: /*a1*b", …, some
// 25,000 rules) costs about 6 ms of CPU per 2,048-byte path (BENCHMARKS.md).
//
// Status codes (FromResponse): 2xx parses the body; 4xx other than 429 means "unavailable",
// i.e. allow all (§2.3.1.3); 429, 5xx and anything else (1xx, out-of-range codes, and 0, which
// callers pass for a network error or timeout) mean "unreachable", i.e. disallow all
// (§2.3.1.4). A 3xx that reaches this package means the caller gave up following redirects
// (RFC: after five hops the file MAY be treated as unavailable), so it is allow all.
package robots
