// Package docnames holds one test: every Go name written as code in the project's references
// (README.md and docs/*.md) exists in the code, so a reference cannot go on naming what was
// renamed or removed. It has no code of its own.
package docnames
