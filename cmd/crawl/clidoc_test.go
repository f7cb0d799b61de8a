package main

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"
)

var updateCLI = flag.Bool("update", false, "rewrite docs/cli.md's command reference from the commands' help")

// cliMarker starts the part of docs/cli.md that TestCLIReference writes.
const cliMarker = "<!-- Generated from `crawl help COMMAND` by `go test ./cmd/crawl -run TestCLIReference -update`: do not edit below. -->\n"

// cliReference is what docs/cli.md holds below cliMarker: each command's help, as printed.
func cliReference(t *testing.T) string {
	var b strings.Builder
	for _, name := range commandNames() {
		var out, errOut bytes.Buffer
		if code := dispatch([]string{"help", name}, &out, &errOut); code != exitOK {
			t.Fatalf("crawl help %s: exit %d: %s", name, code, errOut.String())
		}
		b.WriteString("\n## crawl " + name + "\n\n" + commands[name].summary + "\n\n```text\n" + out.String() + "```\n")
	}
	return b.String()
}

// TestCLIReference fails when docs/cli.md and the commands' help disagree: every flag of every
// command is in the reference, written as help writes it.
func TestCLIReference(t *testing.T) {
	const path = "../../docs/cli.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	head, _, ok := strings.Cut(string(doc), cliMarker)
	if !ok {
		t.Fatalf("%s has no line %q", path, strings.TrimSpace(cliMarker))
	}
	want := head + cliMarker + cliReference(t)
	if *updateCLI {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if string(doc) != want {
		t.Errorf("%s disagrees with crawl help; run go test ./cmd/crawl -run TestCLIReference -update and read the diff", path)
	}
}
