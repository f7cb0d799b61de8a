// Package fetch performs one HTTP hop for the crawler and extracts the links
// of what it fetched.
//
// Client.Get sends one GET and never follows redirects: a 3xx comes back as
// a Response whose Location is already resolved and normalized, so the crawl
// loop can pass every hop through scope, robots and the target host's
// limiter. The body is decoded (gzip, deflate, br) by this package rather
// than by net/http, because net/http only knows gzip and cannot cap the
// decoded size: a response is never allowed to grow past Config.MaxBody
// decoded bytes, so a compression bomb costs about MaxBody of memory.
// Failures are *Error values with a coarse Kind the retry policy can act on.
//
// Resolver looks host names up for the Client's dials (and for whoever else in
// the crawl needs an address): once per name per TTL, concurrent lookups of a
// name shared, each bounded by a timeout, so a slow DNS answer holds back only
// its own host. It asks the system resolver or one DNS server given by address
// (github.com/miekg/dns speaks the protocol; net.Resolver does not tell TTLs).
// Config.DialControl still sees every address dialled.
//
// ExtractRequisites is pure too: what a browser loads to show an HTML page or a stylesheet
// (stylesheets, scripts, images, icons, fonts, media), for a crawl that keeps pages whole.
// It walks the HTML with golang.org/x/net/html's tokenizer, a second pass that only a crawl
// asking for requisites pays, and reads CSS with internal/cssref.
//
// ExtractLinks is pure: bytes and headers in, links and robots directives
// (meta robots, X-Robots-Tag) out. The links, <base> and <meta> it needs are
// all start tags, so it finds them in one pass over the bytes, which splits
// them into tags, comments and raw text by the rules of golang.org/x/net/html's
// tokenizer (and is tested against it), instead of building a DOM with
// goquery: a DOM of a page with a million links would cost hundreds of
// megabytes where the pass needs a few kilobytes beyond the links it returns.
package fetch
