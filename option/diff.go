package option

import (
	"fmt"
	"math"
	"reflect"
	"strings"
)

// Difference is an option whose value differs between two values of one
// options type, as [Differences] finds them: its name as the options file
// spells it, the JSON key as in Error.Option, and its two values.
type Difference struct {
	Option       string
	Saved, Given any
}

// Differences returns the options whose values differ between saved and
// given, two values of one struct type or pointers to them, in the order of
// the type's fields. A program compares a run's saved options with those it
// is asked to resume with, and maps Option to its own names.
//
// Every exported field with a JSON key is compared; "-" has none, and an
// untagged field is named by its Go name. Fields are compared by value:
// pointers by what they point to, with nil equal only to nil; structs field
// by field; slices and maps element by element; and NaN, as in [Auto] or a
// target's NoTarget, is equal to NaN.
//
// It panics, as a programmer error, when saved and given are not of one
// struct type.
func Differences(saved, given any) []Difference {
	a, b := reflect.Indirect(reflect.ValueOf(saved)), reflect.Indirect(reflect.ValueOf(given))
	if a.Kind() != reflect.Struct || a.Type() != b.Type() {
		panic(fmt.Sprintf("option.Differences: %T and %T are not one struct type", saved, given))
	}
	var out []Difference
	t := a.Type()
	for i := range t.NumField() {
		key, ok := fieldKey(t.Field(i))
		if ok && !equal(a.Field(i), b.Field(i)) {
			out = append(out, Difference{Option: key, Saved: a.Field(i).Interface(), Given: b.Field(i).Interface()})
		}
	}
	return out
}

// Keys returns the option names of the options type of v, a struct or a
// pointer to one, in the order of its fields: the JSON keys of its
// exported fields, an untagged field by its Go name, none for "-" (as
// [Differences] compares them). It panics, as a programmer error, for
// another type.
func Keys(v any) []string {
	t := reflect.Indirect(reflect.ValueOf(v)).Type()
	if t.Kind() != reflect.Struct {
		panic(fmt.Sprintf("option.Keys: %T is not a struct", v))
	}
	var out []string
	for i := range t.NumField() {
		if key, ok := fieldKey(t.Field(i)); ok {
			out = append(out, key)
		}
	}
	return out
}

// fieldKey is the option name of the field f, and false for an
// unexported field or one tagged "-".
func fieldKey(f reflect.StructField) (string, bool) {
	if !f.IsExported() {
		return "", false
	}
	key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	switch key {
	case "-":
		return "", false
	case "":
		return f.Name, true
	}
	return key, true
}

// equal reports whether a and b (of one type) hold the same value, NaN
// equal to NaN (Differences).
func equal(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.Float32, reflect.Float64:
		x, y := a.Float(), b.Float()
		return x == y || math.IsNaN(x) && math.IsNaN(y)
	case reflect.Complex64, reflect.Complex128:
		return a.Complex() == b.Complex()
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	case reflect.String:
		return a.String() == b.String()
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		if a.Kind() == reflect.Interface && a.Elem().Type() != b.Elem().Type() {
			return false
		}
		return equal(a.Elem(), b.Elem())
	case reflect.Struct:
		for i := range a.NumField() {
			if !equal(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !equal(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.Len() != b.Len() {
			return false
		}
		for it := a.MapRange(); it.Next(); {
			v := b.MapIndex(it.Key())
			if !v.IsValid() || !equal(it.Value(), v) {
				return false
			}
		}
		return true
	}
	// Func, Chan, UnsafePointer: the same one.
	return a.Pointer() == b.Pointer()
}
