package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/storage"
)

// applyStored sets every crawl setting that args did not name to the value stored in the
// store in dir by its earlier runs (crawler.Settings), so a resume without flags crawls as
// the first run did. A store without one (new, or made before settings were kept) changes
// nothing. It returns the names of the flags it set.
func applyStored(fs *flag.FlagSet, dir string) (map[string]bool, error) {
	if !storeExists(dir) {
		return nil, nil
	}
	stored, ok, err := crawler.ReadSettings(dir)
	if err != nil || !ok {
		return nil, err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	applied := map[string]bool{}
	for _, s := range stored.Flags() {
		if given[s.Flag] {
			continue
		}
		for _, v := range s.Values {
			if err := fs.Set(s.Flag, v); err != nil {
				return nil, storedDamage(dir, fmt.Sprintf("its stored setting --%s %q: %v", s.Flag, v, err))
			}
		}
		applied[s.Flag] = true
	}
	return applied, nil
}

// checkStored returns an error wrapping storage.ErrDamaged if the settings stored in db by
// earlier runs, taken alone, make no valid crawl (they were valid when stored).
func checkStored(db *storage.DB) error {
	stored, ok, err := crawler.StoredSettings(db)
	if err != nil || !ok {
		return err
	}
	fs := flag.NewFlagSet("stored", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg := crawlFlags(fs)
	for _, s := range stored.Flags() {
		if fs.Lookup(s.Flag) == nil {
			continue // not a crawl setting crawlFlags knows (network, hosts file…)
		}
		for _, v := range s.Values {
			if err := fs.Set(s.Flag, v); err != nil {
				return db.Damage(fmt.Sprintf("its stored setting --%s %q: %v", s.Flag, v, err))
			}
		}
	}
	if err := cfg.ValidateGiven(); err != nil {
		return db.Damage("its stored settings make no valid crawl: " + err.Error())
	}
	return nil
}

// storedDamage is storage.ErrDamaged for the store in dir: settings its earlier runs stored,
// which were valid when stored, are not.
func storedDamage(dir, what string) error {
	return fmt.Errorf("%s: %w (%s)", filepath.Join(dir, storage.FileName), storage.ErrDamaged, what)
}

// flagNames matches the flags an error message names.
var flagNames = regexp.MustCompile(`--([a-z][a-z0-9-]*)`)

// fromStore reports whether the validation error err names only flags that applied set from
// the store (none the command line gave): the stored settings alone are invalid.
func fromStore(err error, applied map[string]bool) bool {
	names := flagNames.FindAllStringSubmatch(err.Error(), -1)
	for _, m := range names {
		if !applied[m[1]] {
			return false
		}
	}
	return len(names) > 0
}

// flagGiven reports whether the command line named the flag.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// printChanges says, one line each, which stored settings this run changed, and in one more
// line what that did to the URLs already seen.
func printChanges(w io.Writer, changes []crawler.Change, rev frontier.Revised) {
	for _, ch := range changes {
		fmt.Fprintf(w, "crawl: %s instead of %s as stored; kept for later runs\n", ch.Now, ch.Was)
	}
	var parts []string
	if n := sum(rev.RequeuedExcluded); n > 0 {
		parts = append(parts, fmt.Sprintf("re-queued %d excluded %s (%s)", n, plural(n, "URL", "URLs"), byReason(rev.RequeuedExcluded)))
	}
	if n := sum(rev.RequeuedFailed); n > 0 {
		parts = append(parts, fmt.Sprintf("re-queued %d failed %s (%s)", n, plural(n, "URL", "URLs"), byReason(rev.RequeuedFailed)))
	}
	if n := sum(rev.Excluded); n > 0 {
		parts = append(parts, fmt.Sprintf("excluded %d queued %s (%s)", n, plural(n, "URL", "URLs"), byReason(rev.Excluded)))
	}
	if n := rev.Revisited; n > 0 {
		parts = append(parts, fmt.Sprintf("revisiting %d fetched %s", n, plural(n, "page", "pages")))
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "crawl: %s\n", strings.Join(parts, "; "))
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// byReason is m as "reason n, reason n", reasons sorted.
func byReason(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v != 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
