// Package option holds what the options types of nvdp's libraries
// (train.Options, mlm.Options) share: the Auto marker of an option whose
// default depends on other options (each type's Resolve derives it; an
// explicit value, 0 included, is never replaced), and Error, the
// invalid-option error that names the option by its JSON key, so that a
// program maps it to its own names (cmd/nvdp to its flags) and no library
// names a flag.
package option

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
)

// Auto is the value of a float option whose default depends on other
// options until its type's Resolve derives it: NaN, which no valid value of
// such an option is. Options files write it as JSON null.
func Auto() float64 { return math.NaN() }

// IsAuto reports whether the float option v is Auto (NaN).
func IsAuto(v float64) bool { return math.IsNaN(v) }

// Resolve sets the float option *v to def when it is Auto, and keeps any
// given value, 0 included: the one step of every options type's Resolve.
func Resolve(v *float64, def float64) {
	if IsAuto(*v) {
		*v = def
	}
}

// AutoInt is Auto for an integer option whose valid values are counts
// (>= 0): -1. Options files write it as JSON null.
const AutoInt = -1

// Error is an invalid option: Option is its name as the options file spells
// it (the JSON key, e.g. "c_mu", "batch_size"), Value the value given (nil:
// none to show), Reason what is wrong. Programs map Option to their own
// names (the CLI to its flags).
type Error struct {
	Option string
	Value  any
	Reason string
}

func (e *Error) Error() string {
	return e.Option + FormatValue(e.Value) + ": " + e.Reason
}

// Errorf returns an *Error for option with value (nil: none to show) and
// the reason format, args.
func Errorf(option string, value any, format string, args ...any) error {
	return &Error{Option: option, Value: value, Reason: fmt.Sprintf(format, args...)}
}

// FormatValue writes an Error's value as it follows the option's name: " "
// + the value (strings, and values of string types, quoted), "" for nil.
func FormatValue(v any) string {
	if v == nil {
		return ""
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.String {
		return " " + strconv.Quote(rv.String())
	}
	return fmt.Sprint(" ", v)
}
