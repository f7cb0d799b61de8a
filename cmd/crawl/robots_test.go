package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRobotsCmd(t *testing.T) {
	fixtures := filepath.Join("..", "..", "testdata", "robots")
	cli := filepath.Join(fixtures, "cli.txt")
	rfc := filepath.Join(fixtures, "rfc9309-5.1.txt")
	dir := t.TempDir()
	urlFile := filepath.Join(dir, "urls.txt")
	if err := os.WriteFile(urlFile, []byte("# a comment\n\nhttps://example.com/private/open/x\n  /doc.pdf  \r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.txt")

	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string // exact
		stderr string // substring ("" = must be empty)
	}{
		{
			name: "all allowed, default agent crawl",
			args: []string{"--file", cli, "https://example.com/", "https://example.com/private/x", "/doc.pdf?x=1"},
			code: exitOK,
			stdout: `allowed     https://example.com/  (no matching rule, group "User-agent: crawl")
allowed     https://example.com/private/x  (no matching rule, group "User-agent: crawl")
allowed     /doc.pdf?x=1  (no matching rule, group "User-agent: crawl")
`,
		},
		{
			name: "some disallowed",
			args: []string{"--file", cli, "https://example.com/search?q=go", "http://example.com/a/b.pdf", "https://example.com/ok"},
			code: exitRuntime,
			stdout: `disallowed  https://example.com/search?q=go  (rule "Disallow: /search" at line 7, group "User-agent: crawl")
disallowed  http://example.com/a/b.pdf  (rule "Disallow: /*.pdf$" at line 8, group "User-agent: crawl")
allowed     https://example.com/ok  (no matching rule, group "User-agent: crawl")
`,
		},
		{
			name: "other agent, full User-Agent string, flags after URLs, url-file",
			args: []string{"/private", "--agent", "OtherBot/2.0 (+https://example.com)", "--file", cli, "--url-file", urlFile},
			code: exitRuntime,
			stdout: `disallowed  /private  (rule "Disallow: /private" at line 3, group "User-agent: *")
allowed     https://example.com/private/open/x  (rule "Allow: /private/open" at line 4, group "User-agent: *")
allowed     /doc.pdf  (no matching rule, group "User-agent: *")
`,
		},
		{
			name: "no group applies; robots.txt always allowed",
			args: []string{"--file", rfc, "--agent", "foobot", "/robots.txt", "/example/page.html"},
			code: exitOK,
			stdout: `allowed     /robots.txt  (no rule applies)
allowed     /example/page.html  (rule "Allow: /example/page.html" at line 7, group "User-agent: foobot")
`,
		},
		{
			name:   "non-ASCII URL matched percent-encoded",
			args:   []string{"--file", rfc, "--agent", "barbot", "https://example.com/example/page.html?ツ"},
			code:   exitRuntime,
			stdout: "disallowed  https://example.com/example/page.html?ツ  (rule \"Disallow: /example/page.html\" at line 11, group \"User-agent: barbot, User-agent: bazbot\")\n",
		},
		{name: "missing --file", args: []string{"https://example.com/"}, code: exitUsage, stderr: "--file is required"},
		{name: "unreadable --file", args: []string{"--file", missing, "/"}, code: exitUsage, stderr: "reading --file"},
		{name: "unreadable --url-file", args: []string{"--file", cli, "--url-file", missing}, code: exitUsage, stderr: "reading --url-file"},
		{name: "no URLs", args: []string{"--file", cli}, code: exitUsage, stderr: "no URLs"},
		{name: "relative URL", args: []string{"--file", cli, "/ok", "example.com/x"}, code: exitUsage, stderr: `bad URL "example.com/x"`},
		{name: "unsupported scheme", args: []string{"--file", cli, "ftp://example.com/x"}, code: exitUsage, stderr: `bad URL "ftp://example.com/x"`},
		{name: "unparsable URL", args: []string{"--file", cli, "http://[::1"}, code: exitUsage, stderr: `bad URL "http://[::1"`},
		{name: "agent without product token", args: []string{"--file", cli, "--agent", "123bot", "/"}, code: exitUsage, stderr: "--agent"},
		{name: "unknown flag", args: []string{"--file", cli, "--nope", "/"}, code: exitUsage, stderr: "crawl robots: unknown flag --nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := dispatch(append([]string{"robots"}, tc.args...), &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit code %d, want %d; stderr: %s", code, tc.code, stderr.String())
			}
			if stdout.String() != tc.stdout {
				t.Errorf("stdout:\n%s\nwant:\n%s", stdout.String(), tc.stdout)
			}
			if tc.stderr == "" && stderr.Len() > 0 || !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr %q, want it to contain %q", stderr.String(), tc.stderr)
			}
		})
	}
}
