// Package termsafe makes text that a server controls safe to put in front of a user: on a
// terminal, in a log line, in a table. Escape writes every control character (C0, DEL, C1),
// every character that reorders or breaks the displayed text (bidirectional overrides and
// isolates, line and paragraph separators) and every byte that is not UTF-8 as a visible
// escape (\x1b, \u202e), and leaves the rest as it is. Its output is for reading, not for
// parsing back: a backslash already in the text is not escaped.
package termsafe
