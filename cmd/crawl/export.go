package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/crawl-project/crawl/internal/export"
	"github.com/crawl-project/crawl/internal/learnedfile"
	"github.com/crawl-project/crawl/internal/termsafe"
	"github.com/crawl-project/crawl/storage"
)

// exportLockTimeout is how long export waits for the store's lock before it reports that a
// crawl is using it.
const exportLockTimeout = 200 * time.Millisecond

func init() {
	commands["export"] = command{summary: "write the fetched pages as WARC, JSON Lines, CSV or a mirror", run: exportCmd}
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

const exportUsage = "usage: crawl export --data DIR [--data DIR2 ...] --format warc|jsonl|csv|mirror|learned --out PATH [--latest] [--no-body] [--text] [--subresources] [--field NAME=SELECTOR ...] [--host H] [--status CODES] [--since DATE|TIME] [--warc-max-size BYTES] [--convert-links=false] [--force]"

func exportCmd(args []string, stdout, stderr io.Writer) int {
	cf := newFlags("export", exportUsage+"\n\nWrites what was fetched, re-reading the store; it never fetches, and overwrites only with --force.\nWith several --data (the stores of the workers of a shared crawl), each URL comes from the store that fetched it last.")
	flags := cf.FlagSet
	var dirs stringList
	flags.Var(&dirs, "data", "data directory of the crawl (read only); repeat it to export the stores of several workers as one")
	format := flags.String("format", "", "output format: warc, jsonl, csv, mirror, or learned (each host's learned politeness, for crawl run --learned-from FILE)")
	out := flags.String("out", "", "warc: X.warc.gz (then X-00001.warc.gz … if it must split), a prefix (PREFIX-00000.warc.gz, ...) or a directory; jsonl, csv, learned: file, or - for stdout; mirror: empty or new directory")
	latest := flags.Bool("latest", false, "jsonl: one line per URL, its newest visit (a 304 stands for the version it confirms); csv is one row per URL always")
	noBody := flags.Bool("no-body", false, "jsonl: leave the bodies out")
	text := flags.Bool("text", false, "jsonl: add each HTML page's visible text")
	subresources := flags.Bool("subresources", false, "jsonl, csv: also write what a browser fetched to render pages (scripts, styles, images, API calls), a line or row each, marked \"subresource\": true in jsonl (warc and mirror always hold them)")
	var fieldSpecs stringList
	flags.Var(&fieldSpecs, "field", "jsonl, csv: extract NAME=SELECTOR from each HTML page (CSS; the first match's text, whitespace collapsed); NAME[]=SELECTOR for every match, as an array; SELECTOR@ATTR for an attribute (repeatable)")
	var hosts stringList
	flags.Var(&hosts, "host", "only pages of this host: every port of it, or host:port for one (repeatable, or a comma separated list)")
	status := flags.String("status", "", "only these statuses: codes, classes or ranges, e.g. 200,301 or 2xx or 400-499")
	since := flags.String("since", "", "only pages fetched at or after this date (2024-05-01) or time (2024-05-01T14:30 local, or RFC 3339)")
	convertLinks := flags.Bool("convert-links", true, "mirror: rewrite links between mirrored files to relative paths and other links to absolute URLs, so the mirror browses offline (false: write bodies as stored)")
	force := flags.Bool("force", false, "replace an existing output: the new one is written under a temporary name and replaces the old one only once complete (warc, jsonl, csv, learned)")
	maxSize := flags.String("warc-max-size", strconv.Itoa(export.DefaultWARCMaxSize), "warc: start a new file before one grows past this many bytes (suffixes K, M, G: powers of 1024)")
	pos, code, ok := cf.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	usageErr := func(msg string) int {
		if msg != "" {
			fmt.Fprintf(stderr, "crawl export: %s\n", msg)
		}
		fmt.Fprintln(stderr, exportUsage)
		return exitUsage
	}
	if len(dirs) == 0 || slices.Contains(dirs, "") || *out == "" || *format == "" || len(pos) > 0 {
		return usageErr("")
	}
	if a, b, dup := sameDirs(dirs); dup {
		return usageErr(fmt.Sprintf("--data %s and --data %s are the same store", a, b))
	}
	switch *format {
	case "warc", "jsonl", "csv", "mirror", "learned":
	default:
		return usageErr(fmt.Sprintf("unknown format %q", *format))
	}
	switch {
	case !*latest:
	case *format == "warc":
		return usageErr("--latest applies to --format jsonl (and csv, one row per URL always): a WARC keeps every visit, the unchanged ones as revisit records")
	case *format == "mirror":
		return usageErr("--latest applies to --format jsonl (and csv, one row per URL always): the mirror holds each URL's newest version already")
	case *format == "learned":
		return usageErr("--latest applies to pages, not to --format learned")
	}
	if *noBody && *format != "jsonl" {
		return usageErr("--no-body applies to --format jsonl only")
	}
	if *text && *format != "jsonl" {
		return usageErr("--text applies to --format jsonl only")
	}
	if *out == "-" && *format != "jsonl" && *format != "csv" && *format != "learned" {
		return usageErr("--out - (stdout) applies to --format jsonl, csv and learned only")
	}
	if *force && *format == "mirror" {
		return usageErr("--force applies to files, not to --format mirror: remove the directory, or export to a new one")
	}
	if *format == "learned" && (*status != "" || *since != "") {
		return usageErr("--status and --since apply to pages, not to --format learned")
	}
	if *subresources && *format != "jsonl" && *format != "csv" {
		return usageErr("--subresources applies to --format jsonl and csv only: a WARC and a mirror always hold the sub-resources of rendered pages")
	}
	if len(fieldSpecs) > 0 && *format != "jsonl" && *format != "csv" {
		return usageErr("--field applies to --format jsonl and csv only")
	}
	fields, err := export.ParseFields(fieldSpecs)
	if err != nil {
		return usageErr("--field " + strings.TrimPrefix(err.Error(), export.ErrBadField.Error()+": "))
	}
	if *format == "csv" {
		if _, err := export.NewCSV(io.Discard, fields, nil); err != nil { // a name the CSV cannot take
			return usageErr("--field " + strings.TrimPrefix(err.Error(), export.ErrBadField.Error()+": "))
		}
	}
	var sinceT time.Time
	if *since != "" {
		t, err := parseSince(*since)
		if err != nil {
			return usageErr(fmt.Sprintf("--since %q: want a date (2024-05-01), a local time (2024-05-01T14:30 or 2024-05-01 14:30:00) or RFC 3339 (2024-05-01T14:30:00Z)", *since))
		}
		sinceT = t
	}
	filter, err := export.NewFilter(hosts, *status, sinceT)
	if err != nil {
		return usageErr(err.Error())
	}
	maxBytes, err := parseSize(*maxSize)
	if err != nil {
		return usageErr(fmt.Sprintf("--warc-max-size: %v", err))
	}

	stores := make([]export.Store, len(dirs))
	learned := make([]learnedfile.Source, len(dirs))
	for i, dir := range dirs {
		db, ok := openStopped("crawl export", dir, stderr, false)
		if !ok {
			return exitRuntime
		}
		defer db.Close()
		stores[i], learned[i] = db, db
	}
	if *format == "learned" {
		return exportLearned(learned, filter, *out, *force, stdout, stderr)
	}
	db, err := export.Merge(stores...)
	if err != nil {
		fmt.Fprintf(stderr, "crawl export: %v\n", err)
		return exitRuntime
	}

	ctx, stop := exportContext()
	defer stop()
	var (
		w   export.Writer
		src export.Source = db.Pages
		dst               = *out
		jf  *export.Output
		// newest, for one line or row per URL (--latest, csv), counts what it left out.
		newest *export.Newest
		// subLeft counts the sub-resources of rendered pages a jsonl or csv export leaves out.
		subLeft int64
	)
	switch *format {
	case "warc":
		w, err = export.NewWARC(*out, &export.WARCOptions{MaxSize: maxBytes, Date: time.Now(), Original: db.PageMeta, Replace: *force})
	case "mirror":
		w, err = export.NewMirror(*out, db.PagesMeta, &export.MirrorOptions{Filter: filter, KeepLinks: !*convertLinks})
	case "jsonl", "csv":
		full := func(p *storage.Page) (*storage.Page, error) { // HTML only, for title, fields and the like
			f, err := db.Page(p.Seq)
			if errors.Is(err, storage.ErrNotFound) {
				err = fmt.Errorf("%w (a page listed but not found): %w", storage.ErrDamaged, err) // keys out of order
			}
			return f, err
		}
		get := db.Page
		var meta export.Source = db.PagesMeta
		if *noBody || *format == "csv" {
			src, get = db.PagesMeta, db.PageMeta
		}
		if !*subresources {
			src, meta = export.PagesOnly(src, &subLeft), export.PagesOnly(meta, nil)
		}
		if *latest || *format == "csv" {
			newest = export.NewNewest(ctx, meta, src, get)
			src = newest.Pages
		}
		jw := stdout
		if *out == "-" {
			dst = "stdout"
		} else {
			if jf, err = createOutput(*out, *force); err == nil {
				jw = jf
			}
		}
		switch {
		case err != nil:
		case *format == "csv":
			w, err = export.NewCSV(jw, fields, &export.CSVOptions{Full: full})
		case *noBody:
			w = export.NewJSONL(jw, &export.JSONLOptions{NoBody: true, Full: full, Text: *text, Fields: fields})
		default:
			w = export.NewJSONL(jw, &export.JSONLOptions{Text: *text, Fields: fields})
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "crawl export: %v\n", err)
		existsHint(stderr, err, *format)
		return exitRuntime
	}

	start := time.Now()
	var st export.Stats
	if ww, ok := w.(*export.WARCWriter); ok {
		st, err = export.RunWARC(ctx, src, db.RobotsFetches, ww, filter)
	} else {
		st, err = export.Run(ctx, src, w, filter)
	}
	if jf != nil { // complete: the file gets its name; failed or interrupted: removed
		if err == nil {
			err = jf.Commit()
		} else {
			jf.Abort()
		}
	}
	omitted := ""
	if newest != nil {
		if n := newest.Older(); n > 0 {
			omitted += fmt.Sprintf(", %d earlier %s of the same URLs", n, plural(int(n), "visit", "visits"))
		}
		if n := newest.Folded(); n > 0 {
			omitted += fmt.Sprintf(", %d 304 Not Modified written as the %s", n, plural(int(n), "version it confirms", "versions they confirm"))
		}
	}
	if subLeft > 0 {
		omitted += fmt.Sprintf(", %d %s of rendered pages (--subresources writes them)", subLeft, plural(int(subLeft), "sub-resource", "sub-resources"))
	}
	switch {
	case st.Omitted > 0 && *format == "csv":
		omitted += fmt.Sprintf(", %d without a row (not HTML)", st.Omitted)
	case st.Omitted > 0:
		omitted = fmt.Sprintf(", %d without a file (error statuses, older versions)", st.Omitted)
	}
	switch ww, ok := w.(*export.WARCWriter); {
	case err != nil && dst != "stdout": // an export that did not finish removed its files
		dst = "nothing (removed)"
	case ok:
		dst = filesList(ww.Files())
	case *format == "mirror":
		dst = fmt.Sprintf("%d %s under %s", st.Files, plural(st.Files, "file", "files"), dst)
	}
	robots := ""
	if st.Robots > 0 {
		robots = fmt.Sprintf(" and %d robots.txt %s", st.Robots, plural(int(st.Robots), "fetch", "fetches"))
	}
	superseded := ""
	if n := db.Superseded(); n > 0 {
		superseded = fmt.Sprintf(", %d %s of URLs another store fetched later", n, plural(int(n), "fetch", "fetches"))
	}
	subs := ""
	if st.Subresources > 0 {
		subs = fmt.Sprintf(", %d %s of rendered pages", st.Subresources, plural(int(st.Subresources), "sub-resource", "sub-resources"))
	}
	fmt.Fprintf(stderr, "crawl export: %d pages%s%s written (%d filtered out%s%s) to %s, %s, %.1fs\n",
		st.Pages, subs, robots, st.Skipped, omitted, superseded, dst, formatBytes(st.Bytes), time.Since(start).Seconds())
	if st.Flattened > 0 {
		fmt.Fprintf(stderr, "crawl export: %d HTML %s nested deeper than the HTML parser's 512 elements, read with the elements past depth 256 (32 where that was not enough) flattened into their ancestors, so title, text and fields are as near as that gives%s: %s\n",
			st.Flattened, plural(int(st.Flattened), "page", "pages"), flattenedNote(*format), urlsList(st.FlattenedURLs, st.Flattened))
	}
	switch {
	case err != nil && ctx.Err() != nil: // a signal after the export finished changes nothing
		switch {
		case dst == "stdout":
			fmt.Fprintln(stderr, "crawl export: interrupted; the output is incomplete")
		case *force:
			fmt.Fprintf(stderr, "crawl export: interrupted; %s is as it was: run the export again\n", termsafe.Escape(*out))
		default:
			fmt.Fprintf(stderr, "crawl export: interrupted; nothing was left under %s: run the export again\n", termsafe.Escape(*out))
		}
		return exitInterrupted
	case err != nil:
		fmt.Fprintf(stderr, "crawl export: %v\n", err)
		existsHint(stderr, err, *format)
		for _, d := range dirs {
			if strings.Contains(err.Error(), d) {
				damageHint(stderr, d, err)
				break
			}
		}
		return exitRuntime
	}
	return exitOK
}

// exportLearned writes the learned politeness of the stores' hosts that filter keeps to out.
func exportLearned(srcs []learnedfile.Source, filter *export.Filter, out string, force bool, stdout, stderr io.Writer) int {
	w, dst := stdout, "stdout"
	var f *export.Output
	if out != "-" {
		var err error
		if f, err = createOutput(out, force); err != nil {
			fmt.Fprintf(stderr, "crawl export: %v\n", err)
			existsHint(stderr, err, "learned")
			return exitRuntime
		}
		w, dst = f, out
	}
	n, err := learnedfile.Write(w, filter.MatchHost, srcs...)
	if f != nil {
		if err == nil {
			err = f.Commit()
		} else {
			f.Abort()
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "crawl export: %v\n", err)
		return exitRuntime
	}
	fmt.Fprintf(stderr, "crawl export: the learned politeness of %d %s written to %s\n", n, plural(n, "host", "hosts"), dst)
	return exitOK
}

// exportContext is the context of an export: done on SIGINT or SIGTERM. Tests replace it.
var exportContext = func() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// createOutput starts the output file out: a new one, or with force one that replaces out.
func createOutput(out string, force bool) (*export.Output, error) {
	if force {
		return export.ReplaceOutput(out)
	}
	return export.CreateOutput(out)
}

// existsHint says how to replace an output that exists, if err says one does.
func existsHint(stderr io.Writer, err error, format string) {
	if !errors.Is(err, export.ErrOutputExists) {
		return
	}
	if format == "mirror" {
		fmt.Fprintln(stderr, "crawl export: a mirror goes to a new or empty directory: remove it, or name another")
	} else {
		fmt.Fprintln(stderr, "crawl export: --force replaces it")
	}
}

// flattenedNote says where the output marks a flattened page.
func flattenedNote(format string) string {
	if format == "jsonl" {
		return `; each line says "nesting_flattened_at"`
	}
	return ""
}

// urlsList names urls, escaped for a terminal, and how many of n it leaves out.
func urlsList(urls []string, n int64) string {
	esc := make([]string, len(urls))
	for i, u := range urls {
		esc[i] = termsafe.Escape(u)
	}
	s := strings.Join(esc, ", ")
	if more := n - int64(len(urls)); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

// sameDirs reports the first two of dirs that are one directory (the same store given twice).
func sameDirs(dirs []string) (a, b string, same bool) {
	for i := range dirs {
		fi, err := os.Stat(dirs[i])
		if err != nil {
			continue // openStopped reports it
		}
		for _, d := range dirs[:i] {
			if fj, err := os.Stat(d); err == nil && os.SameFile(fi, fj) {
				return d, dirs[i], true
			}
		}
	}
	return "", "", false
}

// filesList names files: "a" for one, "N files: a, b, c" for a few, "N files: a … z" for many.
func filesList(files []string) string {
	switch {
	case len(files) == 1:
		return files[0]
	case len(files) <= 5:
		return fmt.Sprintf("%d files: %s", len(files), strings.Join(files, ", "))
	default:
		return fmt.Sprintf("%d files: %s … %s", len(files), files[0], files[len(files)-1])
	}
}

// sinceLayouts are the forms --since takes, tried in order; those without a zone are local time.
var sinceLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02T15:04", "2006-01-02 15:04", time.DateOnly}

// parseSince reads --since: RFC 3339, or a date or date and time in local time.
func parseSince(s string) (time.Time, error) {
	var err error
	for _, layout := range sinceLayouts {
		var t time.Time
		if t, err = time.ParseInLocation(layout, strings.TrimSpace(s), time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, err
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
