// Package option holds what the options types of nvdp's libraries, such as
// model.Options and mlm.Options, share.
//
// [Auto] marks an option whose default depends on other options; each
// type's Resolve derives it, and an explicit value, 0 included, is never
// replaced. [Error] is the invalid-option error that names the option by its
// JSON key, so that a program maps it to its own names, as cmd/nvdp does to
// its flags, and no library names a flag.
package option

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// Auto returns the value of a float option whose default depends on other
// options until its type's Resolve derives it. It is NaN, which no valid
// value of such an option is. Options files write it as JSON null.
func Auto() float64 { return math.NaN() }

// IsAuto reports whether the float option v is [Auto], that is NaN.
func IsAuto(v float64) bool { return math.IsNaN(v) }

// Resolve sets the float option *v to def when it is [Auto], and keeps any
// given value, 0 included. It is the one step of every options type's
// Resolve.
func Resolve(v *float64, def float64) {
	if IsAuto(*v) {
		*v = def
	}
}

// AutoInt, -1, is [Auto] for an integer option whose valid values are
// counts, >= 0. Options files write it as JSON null.
const AutoInt = -1

// Error is an invalid option. Option is its name as the options file spells
// it, the JSON key such as "c_mu" or "batch_size"; Value is the value given,
// or nil for none to show; Reason says what is wrong. Programs map Option to
// their own names, as the CLI does to its flags, and the options that Reason
// names, Mentions, too; see [Error.ReasonWith].
type Error struct {
	Option string
	Value  any
	Reason string
	// Mentions are the other options Reason names ("... or
	// hand_set_clipping"), spelt as Option is; each occurs in Reason as a
	// whole word.
	Mentions []string
	// Err is the error Reason was written from, where there is one
	// ([Wrap]): errors.Is and errors.As see it.
	Err error
}

func (e *Error) Error() string {
	return e.Option + FormatValue(e.Value) + ": " + e.Reason
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// Wrap returns an [*Error] for option whose Reason is err's message and
// whose Err is err, or nil for a nil err: the error of an input, such as a
// file that does not read, whose cause a program still tests for.
func Wrap(option string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Option: option, Reason: err.Error(), Err: err}
}

// ReasonWith returns Reason with each whole-word occurrence of a mentioned
// option, one of Mentions, replaced by rename(option), a program's name for
// it, such as the CLI's "--hand-set-clipping". A mention that is part of a
// longer name, as target_epsilon in target_epsilons, is left alone.
func (e *Error) ReasonWith(rename func(option string) string) string {
	r := e.Reason
	for _, m := range e.Mentions {
		if m == "" {
			continue
		}
		var b strings.Builder
		for {
			i := indexWord(r, m)
			if i < 0 {
				break
			}
			b.WriteString(r[:i])
			b.WriteString(rename(m))
			r = r[i+len(m):]
		}
		b.WriteString(r)
		r = b.String()
	}
	return r
}

// indexWord is the index of the first occurrence of w in s that is a whole
// word (not preceded or followed by a letter, digit or underscore), or -1.
func indexWord(s, w string) int {
	for off := 0; ; {
		i := strings.Index(s[off:], w)
		if i < 0 {
			return -1
		}
		i += off
		if (i == 0 || !nameByte(s[i-1])) && (i+len(w) == len(s) || !nameByte(s[i+len(w)])) {
			return i
		}
		off = i + 1
	}
}

func nameByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// Errorf returns an [*Error] for option with value and the reason format,
// args. A nil value means none to show.
func Errorf(option string, value any, format string, args ...any) error {
	return &Error{Option: option, Value: value, Reason: fmt.Sprintf(format, args...)}
}

// MentionErrorf is [Errorf] for a reason that names other options. mentions
// are their names as the reason writes them, kept in Error.Mentions, so that
// a program gives them its own names too.
func MentionErrorf(mentions []string, option string, value any, format string, args ...any) error {
	return &Error{Option: option, Value: value, Reason: fmt.Sprintf(format, args...), Mentions: mentions}
}

// Shown is a value that an [Error] shows as it is, unquoted, where a
// string would be quoted: a path, as a message that names files writes
// it. [Show] makes one.
type Shown struct{ s string }

// Show returns s as a [Shown] value.
func Show(s string) Shown { return Shown{s} }

func (v Shown) String() string { return v.s }

// FormatValue writes an [Error]'s value as it follows the option's name: " "
// and the value, with strings and values of string types quoted, or "" for
// nil.
func FormatValue(v any) string {
	if v == nil {
		return ""
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.String {
		return " " + strconv.Quote(rv.String())
	}
	return fmt.Sprint(" ", v)
}
