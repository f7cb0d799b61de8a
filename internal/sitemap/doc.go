// Package sitemap reads sitemap files (sitemaps.org protocol 0.9): a <urlset> of page URLs
// with their <lastmod>, or a <sitemapindex> of further sitemaps. Parse is pure: bytes in,
// entries out. A gzip-compressed file (by its magic bytes, whatever its Content-Type) is
// decompressed first. The protocol's limits are enforced: at most MaxURLs entries and
// MaxBytes uncompressed bytes per file; Parse keeps what came before the limit and says so
// with an error wrapping ErrTooBig, so the caller can record why the rest was cut. Sniff tells
// the kind from the root element alone, so that a caller can choose how many entries to read
// (Limits.URLs) before paying for the parse.
package sitemap
