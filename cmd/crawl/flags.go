package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/crawl-project/crawl/storage"
)

// cmdFlags is the flag set of one command, with the synopsis its help starts with.
type cmdFlags struct {
	*flag.FlagSet
	synopsis string
}

// newFlags returns the flag set of `crawl NAME`. It prints nothing itself: parse reports
// errors in one line and prints the help (synopsis, then the flags) on -h.
func newFlags(name, synopsis string) *cmdFlags {
	fs := flag.NewFlagSet("crawl "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &cmdFlags{fs, synopsis}
}

// parse parses args, flags and positional arguments in any order ("--" ends the flags), and
// returns the positional ones. ok is false when the command should exit with code: exitOK
// after -h or --help printed the help to stdout, exitUsage after a bad flag printed one line
// naming it and the form it takes.
func (fs *cmdFlags) parse(args []string, stdout, stderr io.Writer) (pos []string, code int, ok bool) {
	if f := fs.Lookup("data"); f != nil {
		if _, done := f.Value.(dataDirValue); !done {
			f.Value = dataDirValue{f.Value}
		}
	}
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fs.help(stdout)
			return nil, exitOK, false
		}
		if err != nil {
			fmt.Fprintf(stderr, "%s: %s (crawl help %s lists the flags)\n", fs.Name(), flagError(fs.FlagSet, err), strings.TrimPrefix(fs.Name(), "crawl "))
			return nil, exitUsage, false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, exitOK, true
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), exitOK, true
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// help writes the synopsis and the flags with their defaults to w, each flag written as it is
// typed (--name VALUE) and its text indented below it.
func (fs *cmdFlags) help(w io.Writer) {
	fmt.Fprintf(w, "%s\n\nflags:\n", strings.TrimRight(fs.synopsis, "\n"))
	fs.VisitAll(func(f *flag.Flag) {
		if d, ok := f.Value.(dataDirValue); ok {
			g := *f
			g.Value, f = d.Value, &g
		}
		name, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		switch {
		case isZeroDefault(f):
		case name == "string":
			usage += fmt.Sprintf(" (default %q)", f.DefValue)
		default:
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "%s\n    \t%s\n", line, strings.ReplaceAll(usage, "\n", "\n    \t"))
	})
}

// isZeroDefault reports whether f's default is its type's zero value, which help leaves out.
func isZeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "0s", "[]":
		return true
	}
	return false
}

var (
	reUndefined = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	reNeedsArg  = regexp.MustCompile(`^flag needs an argument: -+(.*)$`)
	reBadValue  = regexp.MustCompile(`^invalid (?:boolean )?value (".*") for (?:flag )?-+([^:]+): (.*)$`)
)

// flagError rewrites an error of the flag package as "--name VALUE: what it takes".
func flagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if m := reUndefined.FindStringSubmatch(msg); m != nil {
		name, _, _ := strings.Cut(m[1], "=")
		return fmt.Sprintf("unknown flag --%s%s", m[1], didYouMean(name, namesOfFlags(fs), "--"))
	}
	if m := reNeedsArg.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("--%s needs a value: %s", m[1], flagForm(fs.Lookup(m[1])))
	}
	if m := reBadValue.FindStringSubmatch(msg); m != nil {
		why := m[3]
		if strings.HasPrefix(why, "--"+m[2]+" ") {
			return why // it names the flag already (crawler's errors do)
		}
		if why == "parse error" || why == "value out of range" {
			why = flagForm(fs.Lookup(m[2]))
			if m[3] == "value out of range" {
				why = "out of range: " + why
			}
		}
		return fmt.Sprintf("--%s %s: %s", m[2], m[1], why)
	}
	return msg
}

// flagForm says what values f takes, from its type.
func flagForm(f *flag.Flag) string {
	if f == nil {
		return "see the flags"
	}
	if form, ok := f.Value.(interface{ form() string }); ok {
		return form.form()
	}
	switch typ, _ := flag.UnquoteUsage(f); typ {
	case "int", "uint":
		return "want a whole number"
	case "float":
		return "want a number"
	case "":
		return "want true or false"
	default:
		return "want a value"
	}
}

// dataDirValue is a --data flag: it refuses a file, which is never a data directory, and
// names the directory to give when the file is a store (DIR/crawl.db).
type dataDirValue struct{ flag.Value }

func (v dataDirValue) Set(s string) error {
	if fi, err := os.Stat(s); err == nil && !fi.IsDir() {
		if filepath.Base(s) == storage.FileName {
			return fmt.Errorf("is the store file; --data names the directory that holds it: --data %s", filepath.Dir(s))
		}
		return errors.New("is a file; --data names a crawl's data directory")
	}
	return v.Value.Set(s)
}

// durationValue is a duration flag: Go's form ("30s", "1m30s") or a bare number of seconds.
type durationValue time.Duration

func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var((*durationValue)(p), name, usage)
}

func (d *durationValue) String() string { return time.Duration(*d).String() }
func (d *durationValue) form() string {
	return "want a duration such as 30s, 5m or 1h30m (a bare number is seconds)"
}
func (d *durationValue) Set(s string) error {
	v, err := parseDuration(s)
	if err != nil {
		return errors.New(d.form())
	}
	*d = durationValue(v)
	return nil
}

// parseDuration reads "1m30s" as time.ParseDuration does, and a bare number ("5", "0.5") as
// seconds.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > float64(math.MaxInt64)/float64(time.Second) {
			return 0, errors.New("out of range")
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	return time.ParseDuration(s)
}

// sizeValue is a byte-count flag that takes units: "10485760", "10M", "10MB", "10MiB".
type sizeValue int64

func sizeVar(fs *flag.FlagSet, p *int64, name string, value int64, usage string) {
	*p = value
	fs.Var((*sizeValue)(p), name, usage)
}

func (v *sizeValue) String() string { return strconv.FormatInt(int64(*v), 10) }
func (v *sizeValue) form() string   { return sizeForm }
func (v *sizeValue) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*v = sizeValue(n)
	return nil
}

const sizeForm = "want a positive number of bytes, e.g. 10485760, 10M or 10MB (K, M, G: powers of 1024)"

// parseSize reads a positive byte count with an optional K, M or G suffix (powers of 1024,
// written K, KB or KiB alike, any case).
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(strings.ToUpper(s))
	s = strings.TrimSuffix(strings.TrimSuffix(s, "B"), "I")
	mult := int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		}
		if mult > 1 {
			s = strings.TrimSpace(s[:n-1])
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 || v > (1<<62)/mult {
		return 0, errors.New(sizeForm)
	}
	return v * mult, nil
}
