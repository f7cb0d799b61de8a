// Package export writes the pages of a crawl store out as WARC 1.1 files, as JSON Lines, as
// CSV, or as a mirror of files on disk. It only re-reads what storage holds; it never fetches.
//
// There are only a few types: a Writer per format (WARCWriter, JSONLWriter, CSVWriter,
// MirrorWriter), a Filter, Fields (values a CSS selector extracts from each HTML page, for JSON
// Lines' "fields" and the CSV's columns; ParseFields), Stores (several stores read as one), Newest
// (each URL's newest visit only, a 304 standing for the version it confirms: JSON Lines'
// --latest, the CSV's one row per URL), and Run, which streams a Source
// (storage.DB.Pages or PagesMeta have its shape) through a Filter into a Writer. Pages are handled one at a time, so memory stays flat
// whatever the size of the crawl. Writers are not safe for concurrent use: one goroutine
// feeds one Writer, in fetch order.
//
// Merge reads several stores as one Store (Stores): the workers of a crawl shared by a fleet
// each keep their own store, and an export of them all writes each URL from the store that
// fetched it last, with that store's versions of it, in one stream merged by fetch time and
// with sequence numbers renumbered to stay unique. Over one store it is that store.
//
// Every writer refuses to overwrite, unless told to replace (ReplaceOutput,
// WARCOptions.Replace): an output file (or a non-empty mirror directory) that already exists is
// an error wrapping ErrOutputExists. Every file is written under a temporary name and given its
// own only when complete (Output; a WARC series all at Close; a mirror's files one by one), so
// an export killed or failing mid-way leaves no file cut short under a final name. Run
// withdraws a WARC or mirror export that fails or whose context ends: the files it wrote are
// removed. Files are created 0666 and directories 0777, less the umask.
//
// # WARC
//
// NewWARC writes gzip-compressed WARC/1.1 files, one gzip member per record, rotated when the
// next page would take the file past WARCOptions.MaxSize: files are PREFIX-00000.warc.gz,
// PREFIX-00001.warc.gz, ... and, when the output path is a directory (existing, or ending in a
// path separator), DIR/crawl-00000.warc.gz, ...; an output path X.warc.gz is the first file
// itself, followed if need be by X-00001.warc.gz, ... A request and its response always go to the
// same file; only a page larger than MaxSize on its own makes a file exceed it. Each file
// starts with a warcinfo record; every page then becomes a request record followed by a
// response record (redirects and error statuses included), linked both ways by
// WARC-Concurrent-To and pointing at the file's warcinfo with WARC-Warcinfo-ID. A 304 that
// confirms a stored page (storage.Page.RevisitOf, a recrawl's conditional GET) is a revisit
// record instead of a response: profile server-not-modified, WARC-Refers-To-Target-URI, and
// WARC-Refers-To-Date when WARCOptions.Original finds the page; so is a 2xx with the same body
// as a stored page (storage.Page.SameAs), with profile identical-payload-digest, made by
// gowarc's ToRevisitRecord from the response (payload digest kept, payload left out).
//
// A rendered page (storage.Page.Render set) is its request and response, then its rendered
// DOM as a conversion record: WARC-Refers-To the response (or revisit) record, the document's
// WARC-Target-URI, Content-Type text/html; charset=utf-8, dated when the document was read,
// and WARC-Crawl-Render-Cut naming the cap that cut the render, if one did. A conversion, not
// a resource: the DOM is the response transformed by the crawl, and WARC 1.1 allows
// WARC-Refers-To on conversion records and forbids it on resource records (docs/formats.md,
// "Rendered pages"). A sub-resource (storage.Page.Subresource) is a request and response like
// any page, counted in Stats.Subresources.
//
// RunWARC also records robots.txt: every robots.txt response the crawl received (each redirect
// hop its own, storage.DB.RobotsFetches) becomes a request and a response record like a page's,
// with its own fetch time as WARC-Date, written after all the pages, in the order the fetches
// ended. After, not merged by time: the pages stream from the store in their own order and no
// other, so the robots.txt records (one or a few per host) are appended rather than interleaved
// by a second ordering of the whole export; a reader indexes records by URI and date anyway
// (CDX), not by position. The filters apply to them as to pages; a fetch that got no response
// (a network error) has nothing to record.
//
// Storage keeps bodies decoded (Content-Encoding removed, see storage.Page.DecodedFrom), so the
// response record holds the decoded body and an HTTP header that is correct for it: when a
// Content-Encoding was removed, the Content-Encoding header is dropped and the removed coding
// is recorded in the extension WARC header field
//
//	WARC-Crawl-Decoded: gzip
//
// (gowarc canonicalizes unknown field names, so the files spell it Warc-Crawl-Decoded; WARC
// field names are case-insensitive.)
// Transfer-Encoding is always dropped and Content-Length is set to the stored body's length,
// so WARC-Payload-Digest is the digest of the bytes a replay tool will serve. A body cut at
// --max-body gets WARC-Truncated: length. Header fields are written sorted by name (storage
// keeps an http.Header, which does not keep the order they arrived in); CR, LF and NUL inside a
// value become spaces.
//
// The records are built with github.com/nlnwa/gowarc (v1.6.0): its record builder serializes
// the WARC header, computes Content-Length, WARC-Block-Digest and WARC-Payload-Digest (sha1,
// base32) and validates each record before it is written. Its WarcFileWriter is not used: it
// runs a goroutine per writer, stamps warcinfo records with the wall clock, names files after
// the machine's host name and logs close errors instead of returning them. This package
// instead writes each built record as its own gzip member to a file it opens itself, which
// keeps file names, rotation and warcinfo dates deterministic. Tests read the files back with
// gowarc's reader under strict validation and also with a small independent parser.
//
// # JSON Lines
//
// NewJSONL writes one JSON object per page per line; SCHEMA.md describes the fields. A
// rendered page's title, text, outlinks and fields are read in its rendered DOM. The
// sub-resources of rendered pages are lines like any page's if the writer is fed them; crawl
// export feeds it PagesOnly, unless asked, and so for CSV. It keeps
// one map entry per redirect it has seen, to give a redirect's target the referrer of the
// redirect.
//
// # Mirror
//
// NewMirror writes an offline copy: for each URL the body of its latest 2xx answer (a 304
// is not a version), or, for a redirect with a usable Location, a small HTML refresh page
// sending the browser to the target's file (or to the target URL when it is not mirrored).
// Other statuses get no file (Stats.Omitted). A rendered page's file is its rendered DOM made
// inert (offlineDOM: no script, no event handler, declared UTF-8), so it reads offline as
// rendered; its sub-resources are files like any page's. Before writing, NewMirror reads the pages'
// metadata once and names every file (mirrorplan.go), so that links can point to pages
// fetched later: each http(s) URL in a link or requisite attribute of an HTML page becomes
// the relative path of the file it ends at (through redirects), any other becomes absolute.
// Only those attribute values change (mirrorhtml.go); the new values are ASCII, so a page in
// another charset keeps its bytes; a charset named only by the Content-Type header is
// declared with a <meta charset> after <head>.
//
// The mapping from URL to file name (MirrorPath, then the Content-Type's extension) is
// designed so that nothing can be written outside ROOT and no file overwrites another:
//
//   - the host directory is the host key (lowercase, default port dropped); a port becomes
//     "+PORT";
//   - the path is split on '/' before percent-decoding, so an encoded slash (%2F) stays inside
//     one name; each segment is then decoded and every byte that is unsafe in a file name on
//     Linux, macOS or Windows (control bytes, < > : " / \ | ? *, '%' itself, invalid UTF-8) is
//     written as %XX, as are "." and "..", a trailing dot or space and the first letter of a
//     Windows device name (CON, NUL, COM1, ...); an empty segment becomes "%";
//   - a URL ending in '/' is stored as .../index.html, and .../index.html (HTML both) shares
//     that file: the first fetched of the two is written;
//   - a query string becomes a suffix "~" + 10 hex digits of its SHA-256, inserted before a
//     short extension (/p.php?id=1 -> p~3c0f....php, /?q -> index~....html);
//   - a name without an extension that fits the Content-Type gets one (/a as HTML -> a.html,
//     /s?v=2 as CSS -> s~HASH.css; index.html of a non-HTML type takes the type's: index.css);
//   - a name longer than 200 bytes is cut and ends with "~" + 16 hex digits of its SHA-256
//     (the extension kept); a whole path longer than 1,000 bytes becomes HOST/%long/HASH;
//   - when a page needs a directory where an earlier page's file is (/a, then /a/b), that file
//     becomes a/index.html; when a page's name is taken (by a directory: it goes to
//     name/index.html; by a file: /a/ after that move, http and https of one URL, two spellings
//     of one name, names that differ only in case) it gets a "~" + hash-of-URL suffix. The
//     result depends only on the pages and their order, which is the store's fetch order.
//
// Every path is resolved through an os.Root opened on ROOT and checked with filepath.Rel, so
// even a bug in the mapping cannot write outside ROOT. Files get the page's fetch time as
// their modification time.
package export
