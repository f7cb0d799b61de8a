package crawler

import (
	"encoding/json"
	"fmt"
	"strings"
)

// CrawlSettings are the settings of a crawl shared by several workers: the Settings a store
// keeps, less --hosts-config (a file on one worker's machine, which may hold its secrets), and
// --allow-private-networks (the network scope, which a store keeps as its seeds' blocks). The
// first worker given seeds stores them in Redis when it creates the crawl; every worker that
// joins runs with them (docs/fleet.md "The crawl's settings").
type CrawlSettings struct {
	Settings
	AllowPrivate bool `json:"allow_private_networks,omitempty"`
}

// CrawlSettings returns the crawl's settings c holds.
func (c *Config) CrawlSettings() CrawlSettings {
	s := c.Settings
	s.HostsConfig = ""
	return CrawlSettings{Settings: s, AllowPrivate: c.AllowPrivate}
}

// Flags returns the settings as command-line flags, in a fixed order.
func (s CrawlSettings) Flags() []Setting {
	var out []Setting
	for _, f := range s.Settings.Flags() {
		if f.Flag != "hosts-config" {
			out = append(out, f)
		}
	}
	return append(out, boolSetting("allow-private-networks", s.AllowPrivate))
}

// Diff returns the settings in which now differs from s, in Flags order: Was is s's.
func (s CrawlSettings) Diff(now CrawlSettings) []Change { return diffFlags(s.Flags(), now.Flags()) }

// CrawlSettingsName is the crawl-wide value (SharedSettings.Settle) that holds a shared crawl's
// settings, as EncodeCrawlSettings makes them.
const CrawlSettingsName = "settings"

// SeededName is the crawl-wide value a worker sets once its seeds are in the shared crawl: a
// worker given none waits for it (the crawl holds nothing to crawl before).
const SeededName = "seeded"

// maxCrawlSettings bounds the settings record read from Redis, in bytes: far above what any
// command line gives (its filters are the bulk), low enough to hold in memory.
const maxCrawlSettings = 1 << 20

// EncodeCrawlSettings returns s as the shared crawl stores it.
func EncodeCrawlSettings(s CrawlSettings) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// DecodeCrawlSettings reads a settings record from Redis, which anyone who can write to it
// may have made: it fails, naming what is wrong, on a record over maxCrawlSettings, one that is
// not the JSON EncodeCrawlSettings makes (a pattern that does not compile included), and one
// whose values a command line could not give (those Config.ValidateGiven refuses).
func DecodeCrawlSettings(v string) (CrawlSettings, error) {
	var s CrawlSettings
	if len(v) > maxCrawlSettings {
		return s, fmt.Errorf("bad settings record: %d bytes, more than %d", len(v), maxCrawlSettings)
	}
	dec := json.NewDecoder(strings.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return CrawlSettings{}, fmt.Errorf("bad settings record: %w", err)
	}
	if dec.More() {
		return CrawlSettings{}, fmt.Errorf("bad settings record: data after the record")
	}
	if s.HostsConfig != "" {
		return CrawlSettings{}, fmt.Errorf("bad settings record: it names a --hosts-config, which belongs to each worker")
	}
	cfg := Defaults()
	cfg.Dir = "-" // ValidateGiven wants one; the record has none
	cfg.Settings = s.Settings
	if err := cfg.ValidateGiven(); err != nil {
		return CrawlSettings{}, fmt.Errorf("bad settings record: %w", err)
	}
	return s, nil
}

// checkCrawlSettings refuses a worker whose settings are not its shared crawl's. A worker given
// seeds stores its own when the crawl has none (it creates the crawl; Settle: the first one
// wins); one given none takes the crawl as it finds it: a crawl started before its settings
// were kept has none, and then each worker's are its own. The command line has already taken
// the crawl's settings for the flags it was not given (crawl run), so a difference here is a
// flag given another value, or a program's Config.
func (c *Crawler) checkCrawlSettings() error {
	mine := c.cfg.CrawlSettings()
	var v string
	var ok bool
	var err error
	if len(c.cfg.Seeds) > 0 {
		v, err = c.shared.Settle(CrawlSettingsName, EncodeCrawlSettings(mine))
		ok = err == nil
	} else {
		v, ok, err = c.shared.Value(CrawlSettingsName)
	}
	if err != nil || !ok {
		return err
	}
	crawl, err := DecodeCrawlSettings(v)
	if err != nil {
		_, name := c.shared.Where()
		return fmt.Errorf("shared crawl %q: %w", name, err)
	}
	if d := crawl.Diff(mine); len(d) > 0 {
		return &SettingsConflict{Changes: d}
	}
	return nil
}

// SettingsConflict is returned (by OpenWith) for a worker whose settings differ from those of
// the shared crawl it joins. It wraps ErrUsage.
type SettingsConflict struct {
	Changes []Change // Was: the crawl's; Now: this worker's
}

func (e *SettingsConflict) Error() string {
	parts := make([]string, len(e.Changes))
	for i, ch := range e.Changes {
		parts[i] = fmt.Sprintf("%s, not %s", ch.Was, ch.Now)
	}
	return fmt.Sprintf("the shared crawl was started with %s: its settings belong to the crawl; leave these flags out to take the crawl's, or start another crawl (--crawl NAME)",
		strings.Join(parts, "; "))
}

func (e *SettingsConflict) Unwrap() error { return ErrUsage }
