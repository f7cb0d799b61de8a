package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/crawl-project/crawl/fetch"
	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/urlnorm"
	"github.com/crawl-project/crawl/storage"
)

func init() {
	commands["check"] = command{summary: "check a stopped crawl's store for damage (its pages, its records and its frontier)", run: checkCmd}
	commands["salvage"] = command{summary: "copy what is readable of a damaged store into a new one", run: salvageCmd}
}

const checkSynopsis = `usage: crawl check --data DIR

Walks the pages of DIR/crawl.db, reading the file without trusting it (every page within the
file and reached once, of the right type, its elements within it, keys in order, free pages
apart from those in use), then decodes every stored page and the crawl's records, then runs
the frontier's check (every URL in one state, queues and counts agreeing). Opens a store any
other command refuses as damaged. Exit 0 if all pass, 1 with the problems listed if not.`

// maxProblems is how many problems crawl check lists.
const maxProblems = 20

func checkCmd(args []string, stdout, stderr io.Writer) int {
	flags := newFlags("check", checkSynopsis)
	dir := flags.String("data", "", "data directory of the crawl")
	pos, code, ok := flags.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if *dir == "" || len(pos) > 0 {
		fmt.Fprintln(stderr, strings.SplitN(checkSynopsis, "\n", 2)[0])
		return exitUsage
	}
	db, ok := openStopped("crawl check", *dir, stderr, true)
	if !ok {
		return exitRuntime
	}
	defer db.Close()
	problems, total, err := db.Check(maxProblems)
	if err == nil && total == 0 {
		problems, total, err = db.CheckPages(maxProblems)
	}
	if err == nil && total == 0 {
		if err = crawler.CheckRecords(db); err == nil {
			err = checkStored(db)
		}
		if errors.Is(err, storage.ErrDamaged) {
			problems, total, err = []string{err.Error()}, 1, nil
		}
	}
	if err == nil && total == 0 {
		var fr *frontier.Frontier
		if fr, err = frontier.Open(db, nil); err == nil {
			err = fr.Check()
		}
		if errors.Is(err, frontier.ErrCorrupt) || errors.Is(err, storage.ErrDamaged) {
			problems, total, err = []string{err.Error()}, 1, nil
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "crawl check: %v\n", err)
		damageHint(stderr, *dir, err)
		return exitRuntime
	}
	if total == 0 {
		fmt.Fprintf(stdout, "crawl check: %s passes the checks of its pages, its records and its frontier\n", db.Path())
		return exitOK
	}
	fmt.Fprintf(stdout, "crawl check: %s is damaged: %d %s\n", db.Path(), total, plural(total, "problem", "problems"))
	for _, p := range problems {
		fmt.Fprintf(stdout, "  %s\n", p)
	}
	if total > len(problems) {
		fmt.Fprintf(stdout, "  … and %d more\n", total-len(problems))
	}
	fmt.Fprintf(stdout, "crawl salvage --data %s --to NEWDIR copies what is readable into a new store\n", *dir)
	return exitRuntime
}

const salvageSynopsis = `usage: crawl salvage --data DIR --to NEWDIR

Copies every record of DIR/crawl.db that can be read (pages, bodies, the frontier's URLs and
queues, host state) into a new store in NEWDIR, reading the file page by page without trusting
it, passing over the damaged parts, and says what was lost. DIR is only read. Pages whose
metadata or body does not decode, and crawl records that do not, are left out. Then it repairs the new store's frontier from its URL records: a
queued URL whose queue entry was lost is queued again, a fetched URL whose page was lost is
queued to be fetched again, and the counts are recomputed. A URL whose record was lost is
recorded again where the store still names it: fetched if a page of it is stored, queued if its
queue entry is left and a stored page links to it (a queue entry holds only a fingerprint of its
URL). The store takes the name NEWDIR/crawl.db only when all that is done: a salvage that is
killed leaves none. crawl run --data NEWDIR then resumes the crawl, and its pages export as
usual.`

func salvageCmd(args []string, stdout, stderr io.Writer) int {
	flags := newFlags("salvage", salvageSynopsis)
	dir := flags.String("data", "", "data directory of the damaged crawl (only read)")
	to := flags.String("to", "", "data directory of the new store (must hold no store)")
	pos, code, ok := flags.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if *dir == "" || *to == "" || len(pos) > 0 {
		fmt.Fprintln(stderr, strings.SplitN(salvageSynopsis, "\n", 2)[0])
		return exitUsage
	}
	db, ok := openStopped("crawl salvage", *dir, stderr, true)
	if !ok {
		return exitRuntime
	}
	defer db.Close()
	var rs frontier.RepairStats
	var c frontier.Counts
	frontierFailed := false
	st, err := db.Salvage(*to, func(db *storage.DB) (err error) {
		rs, c, err = repairSalvaged(db, stdout)
		frontierFailed = err != nil
		return err
	})
	if err != nil {
		fmt.Fprintf(stderr, "crawl salvage: %v\n", err)
		if frontierFailed {
			fmt.Fprintf(stderr, "crawl salvage: %s is damaged past what salvage mends: nothing was written to %s\n", db.Path(), *to)
		}
		return exitRuntime
	}
	fmt.Fprintf(stdout, "crawl salvage: %d records in %d buckets copied from %s into %s/%s\n", st.Keys, st.Buckets, db.Path(), *to, storage.FileName)
	if st.Lost > 0 {
		fmt.Fprintf(stdout, "%d damaged %s passed over; the records there are lost:\n", st.Lost, plural(st.Lost, "place", "places"))
		for _, d := range st.Damage {
			fmt.Fprintf(stdout, "  %s\n", d)
		}
	}
	if st.BodiesLost > 0 {
		fmt.Fprintf(stdout, "%d %s lost their body or rendered DOM and were left out\n", st.BodiesLost, plural(st.BodiesLost, "page", "pages"))
	}
	if rs.Changed() {
		fmt.Fprintf(stdout, "frontier repaired from its URL records: %s\n", repairSummary(rs))
	}
	dir2 := *to
	if c.Queued > 0 {
		fmt.Fprintf(stdout, "crawl check --data %s passes; crawl run --data %s resumes the crawl (%d %s queued)\n", dir2, dir2, c.Queued, plural(c.Queued, "URL", "URLs"))
		return exitOK
	}
	fmt.Fprintf(stdout, "crawl check --data %s passes, but no URL is left queued (%d fetched, %d failed, %d excluded): crawl run --data %s resumes nothing; "+
		"crawl run --data %s URL… queues again what the store has not seen, and crawl export --data %s writes the pages kept\n",
		dir2, c.Fetched, c.Failed, c.Excluded, dir2, dir2, dir2)
	return exitOK
}

// repairSummary lists what a repair changed, each nonzero count once.
func repairSummary(rs frontier.RepairStats) string {
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{{rs.Requeued, "queued again (queue entry lost)"}, {rs.Refetch, "to fetch again (page lost)"},
		{rs.Dropped, "unreadable, dropped"}, {rs.Moved, "moved to their own key"}, {rs.Unqueued, "queue entry unnamed"},
		{rs.Rebuilt, "queued URLs recorded again (record lost)"}, {rs.Recorded, "fetched URLs recorded again from their pages (record lost)"},
		{rs.QueuedLost, "queued URLs lost (record lost, and no stored page links to them)"},
		{rs.Orphans, "stray queue entries removed"}, {rs.ParentsLost, "parents forgotten"}, {rs.HostIDs, "host IDs restored"},
		{rs.Sequences, "sequences advanced"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	if rs.Counters {
		parts = append(parts, "counts recomputed")
	}
	if rs.KeyLost {
		parts = append(parts, "fingerprint key lost and made anew")
	}
	return strings.Join(parts, ", ")
}

// repairSalvaged repairs the frontier of the salvaged store db and checks it: the store takes
// its name only if this succeeds.
func repairSalvaged(db *storage.DB, stdout io.Writer) (frontier.RepairStats, frontier.Counts, error) {
	dropped, err := crawler.MendRecords(db)
	if err != nil {
		return frontier.RepairStats{}, frontier.Counts{}, err
	}
	for _, key := range dropped {
		fmt.Fprintf(stdout, "the crawl's %s record did not decode and was dropped\n", key)
	}
	if err := checkStored(db); errors.Is(err, storage.ErrDamaged) {
		if err := db.DeleteMeta("settings"); err != nil {
			return frontier.RepairStats{}, frontier.Counts{}, err
		}
		fmt.Fprintf(stdout, "the crawl's stored settings made no valid crawl and were dropped (%v): crawl run takes its flags' defaults\n", err)
	} else if err != nil {
		return frontier.RepairStats{}, frontier.Counts{}, err
	}
	rs, err := frontier.Repair(db, &frontier.RepairOptions{Host: pageHost, Links: pageLinks})
	if err != nil {
		return rs, frontier.Counts{}, fmt.Errorf("the new store's frontier: %w", err)
	}
	fr, err := frontier.Open(db, nil)
	if err == nil {
		err = fr.Check()
	}
	if err != nil {
		return rs, frontier.Counts{}, fmt.Errorf("the new store's frontier: %w", err)
	}
	return rs, fr.Counts(), nil
}

// pageHost is the host key of a stored page's URL, "" if it does not parse.
func pageHost(raw string) string {
	u, err := urlnorm.Parse(raw)
	if err != nil {
		return ""
	}
	return urlnorm.HostKey(u)
}

// pageLinks returns what a crawl could have queued from stored page p, as the crawler makes
// it: its links, its requisites and a redirect's target (not a sitemap's URLs). Repair takes
// only those whose fingerprint is that of a queue entry it lost the record of, so that too
// many do no harm.
func pageLinks(p *storage.Page) []frontier.Entry {
	base, err := urlnorm.Parse(p.URL)
	if err != nil {
		return nil
	}
	var es []frontier.Entry
	add := func(u *url.URL, depth, hops int, role frontier.Role) {
		u.User = nil // as the crawler: credentials are not followed
		es = append(es, frontier.Entry{URL: u.String(), Host: urlnorm.HostKey(u), Depth: depth, Hops: hops, Parent: p.URL, Role: role})
	}
	if loc := p.Header.Get("Location"); loc != "" && p.Status >= 300 && p.Status < 400 {
		if u, err := urlnorm.Resolve(base, loc); err == nil {
			add(u, p.Depth, 1, frontier.RolePage) // the hops before p are not stored
		}
	}
	for _, lk := range fetch.ExtractLinks(base, p.Header, p.ContentType, p.Body, "").Links {
		add(lk.URL, p.Depth+1, 0, frontier.RolePage)
	}
	for _, lk := range fetch.ExtractRequisites(base, p.ContentType, p.Body).Links {
		add(lk.URL, p.Depth, 0, frontier.RoleRequisite)
	}
	return es
}

// damageHint tells what to do about err when it says the store in dir is damaged.
func damageHint(w io.Writer, dir string, err error) {
	if errors.Is(err, storage.ErrDamaged) {
		fmt.Fprintf(w, "crawl: the store %s is damaged: crawl check --data %s lists the damage; crawl salvage --data %s --to NEWDIR copies what is readable into a new store\n",
			filepath.Join(dir, storage.FileName), dir, dir)
	}
}
