package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/crawl-project/crawl/robots"
)

func init() {
	commands["robots"] = command{summary: "check URLs against a robots.txt file, as the crawler would", run: robotsCmd}
}

const robotsUsage = `usage: crawl robots --file ROBOTS.txt [--agent TOKEN] [--url-file F] URL...

Prints one line per URL, in the order given:

  allowed     URL  (rule "Allow: /a" at line 4, group "User-agent: crawl")
  disallowed  URL  (rule "Disallow: /a/b" at line 5, group "User-agent: crawl")
  allowed     URL  (no matching rule, group "User-agent: *")
  allowed     URL  (no rule applies)

URL is an absolute http(s) URL or a path starting with "/". Exit status: 0 if every URL is
allowed, 1 if any is disallowed, 2 on a usage error (nothing is printed to stdout then).
Flags and URLs may be mixed.`

// robotsCmd tests URLs against a robots.txt file with the same code (robots.Parse and
// Robots.TestURL) the crawler uses on every URL it fetches.
func robotsCmd(args []string, stdout, stderr io.Writer) int {
	flags := newFlags("robots", robotsUsage)
	fs := flags.FlagSet
	file := fs.String("file", "", "robots.txt `FILE` to test against (required)")
	agent := fs.String("agent", "crawl", "the crawler's product `TOKEN`; a full User-Agent string is reduced to its token")
	urlFile := fs.String("url-file", "", "also read URLs from `F`, one per line; blank lines and lines starting with # are skipped")
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "crawl robots: "+format+"\n", a...)
		return exitUsage
	}

	raw, code, ok := flags.parse(args, stdout, stderr)
	if !ok {
		return code
	}

	if *file == "" {
		return fail("--file is required")
	}
	token := robots.AgentToken(*agent)
	if token == "" {
		return fail("--agent %q has no product token (letters, '_' and '-')", *agent)
	}
	body, err := os.ReadFile(*file)
	if err != nil {
		return fail("reading --file: %v", err)
	}
	if *urlFile != "" {
		more, err := readURLFile(*urlFile)
		if err != nil {
			return fail("reading --url-file: %v", err)
		}
		raw = append(raw, more...)
	}
	if len(raw) == 0 {
		return fail("no URLs to test")
	}
	urls := make([]*url.URL, len(raw))
	for i, s := range raw {
		u, err := parseTestURL(s)
		if err != nil {
			return fail("bad URL %q: %v", s, err)
		}
		urls[i] = u
	}

	r := robots.Parse(body)
	code = exitOK
	for i, u := range urls {
		v := r.TestURL(token, u)
		word := "allowed"
		if !v.Allowed {
			word, code = "disallowed", exitRuntime
		}
		fmt.Fprintf(stdout, "%-10s  %s  (%s)\n", word, raw[i], explain(v))
	}
	return code
}

// explain says why a verdict was reached, in the words of the robots.txt file.
func explain(v robots.Verdict) string {
	switch {
	case v.Rule != "":
		return fmt.Sprintf("rule %q at line %d, group %q", v.Rule, v.Line, v.Group)
	case v.Group != "":
		return fmt.Sprintf("no matching rule, group %q", v.Group)
	default:
		return "no rule applies"
	}
}

// parseTestURL accepts an absolute http or https URL, or a path (with query) starting with "/".
func parseTestURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, errors.Unwrap(err) // *url.Error repeats the URL, which the caller prints
	}
	switch {
	case (u.Scheme == "http" || u.Scheme == "https") && u.Host != "":
		return u, nil
	case u.Scheme == "" && u.Host == "" && strings.HasPrefix(s, "/"):
		return u, nil
	}
	return nil, errors.New("want an absolute http(s) URL or a path starting with /")
}

func readURLFile(name string) ([]string, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var urls []string
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			urls = append(urls, line)
		}
	}
	return urls, nil
}
