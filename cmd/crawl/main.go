// Command crawl is a polite web crawler: run a crawl from a seed file, resume an interrupted
// one, check robots.txt, export what was fetched. See README.md.
package main

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
)

// Exit codes, documented in README.md.
const (
	exitOK          = 0
	exitRuntime     = 1
	exitUsage       = 2
	exitInterrupted = 130
)

// command is one subcommand: it parses its own flags from args and returns an exit code.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// commands is filled by each subcommand's file in an init function, so each file stands alone.
var commands = map[string]command{}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	stderr = &plainErrors{w: stderr}
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help", "-help":
		usage(stdout)
		return exitOK
	case "help":
		if len(args) == 1 {
			usage(stdout)
			return exitOK
		}
		if cmd, ok := commands[args[1]]; ok {
			return cmd.run([]string{"-h"}, stdout, stderr)
		}
		fmt.Fprintf(stderr, "crawl help: unknown command %q%s (%s)\n", args[1], didYouMean(args[1], commandNames(), ""), commandList())
		return exitUsage
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, versionLine())
		return exitOK
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "crawl: unknown command %q%s (%s; crawl help lists them)\n", args[0], didYouMean(args[0], append(commandNames(), "help", "version"), ""), commandList())
		return exitUsage
	}
	return cmd.run(args[1:], stdout, stderr)
}

func commandNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// commandList is "commands: a, b, c".
func commandList() string { return "commands: " + strings.Join(commandNames(), ", ") }

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: crawl COMMAND [flags]\n\ncommands:")
	for _, n := range commandNames() {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "  %-8s %s\n", "help", "crawl help COMMAND (or crawl COMMAND -h) shows a command's flags")
	fmt.Fprintf(w, "  %-8s %s\n", "version", "print the version and the Go version it was built with")
}

// version is the release this binary is, set at build time with
// -ldflags "-X main.version=v1.2.3"; "" means: take it from the module's build information.
var version = ""

// versionLine is "crawl VERSION (GO VERSION OS/ARCH)", VERSION being the release, or the
// module version and VCS revision Go recorded in the binary, or "devel".
func versionLine() string {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok && v == "" {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		} else {
			v = "devel"
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" && len(s.Value) >= 12 {
					v += " " + s.Value[:12]
				}
			}
		}
	}
	return fmt.Sprintf("crawl %s (%s %s/%s)", cmp.Or(v, "devel"), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// plainErrors passes what a command writes to stderr on, with the package names that the
// library packages put before their errors (Go's convention, "storage: open …") taken out:
// the user runs crawl, not its packages. Each Write is one message or log line.
type plainErrors struct{ w io.Writer }

// Unwrap returns the writer p writes to, so that whether stderr is a terminal, and its
// width, can be asked of the file underneath.
func (p *plainErrors) Unwrap() io.Writer { return p.w }

// underlyingFile returns the *os.File that w writes to, looking through writers that wrap
// another (an Unwrap() io.Writer method), or nil if there is none.
func underlyingFile(w io.Writer) *os.File {
	for range 8 { // a wrapper that wraps itself must not loop forever
		switch v := w.(type) {
		case *os.File:
			return v
		case interface{ Unwrap() io.Writer }:
			w = v.Unwrap()
		default:
			return nil
		}
	}
	return nil
}

var packagePrefix = regexp.MustCompile(`\b(storage|frontier|fetch|urlnorm|hostlimit|export|metrics|crawler|robots|retry|aimd|netguard|report|fleet): `)

func (p *plainErrors) Write(b []byte) (int, error) {
	locs := packagePrefix.FindAllIndex(b, -1)
	if len(locs) == 0 {
		return p.w.Write(b)
	}
	out := make([]byte, 0, len(b))
	last := 0
	for _, l := range locs {
		if bytes.HasSuffix(b[:l[0]], []byte("crawl ")) { // "crawl export: …" names a command
			continue
		}
		out = append(out, b[last:l[0]]...)
		last = l[1]
	}
	out = append(out, b[last:]...)
	if _, err := p.w.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}
