package option

import (
	"fmt"
	"slices"
	"strings"
)

// CombinationError is the error of inputs given together that do not
// combine, or of an input that needs another: "keys and keys_in_ledger:
// give one". Options are the inputs by their JSON keys, as [Error.Option];
// Format holds one %s for each of them, in order, where its name goes.
// Error writes the JSON keys, and a program writes its own names for them
// (a command line's flags) with [CombinationError.With].
type CombinationError struct {
	Options []string
	Format  string
}

// Combination returns a [*CombinationError] of format, whose %s verbs name
// options in order.
func Combination(format string, options ...string) error {
	return &CombinationError{Options: options, Format: format}
}

// Escape returns s as literal text in a Combination format, its % doubled:
// a path, a name or another error spliced into the message.
func Escape(s string) string { return strings.ReplaceAll(s, "%", "%%") }

func (e *CombinationError) Error() string { return e.With(func(o string) string { return o }) }

// With returns the message with each option named by name(option).
func (e *CombinationError) With(name func(option string) string) string {
	args := make([]any, len(e.Options))
	for i, o := range e.Options {
		args[i] = name(o)
	}
	return fmt.Sprintf(e.Format, args...)
}

// Given reports whether the option of JSON key name was set explicitly,
// as by a flag given on a command line, rather than left at its default.
// A library whose checks depend on what was given (which inputs combine,
// which defaults apply) takes one; a nil Given means none was given.
type Given func(name string) bool

// GivenNames is the Given of exactly names: a caller that sets options in
// code rather than from flags says which it set.
func GivenNames(names ...string) Given {
	return func(n string) bool { return slices.Contains(names, n) }
}

// Has reports whether name was given; false for a nil g.
func (g Given) Has(name string) bool { return g != nil && g(name) }

// Any returns the first of names that was given, and whether one was.
func (g Given) Any(names ...string) (string, bool) {
	for _, n := range names {
		if g.Has(n) {
			return n, true
		}
	}
	return "", false
}
