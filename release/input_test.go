package release

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// readerKinds are the three readers, by the name the tests and the fuzz target use.
var readerKinds = []string{"lines", "tsv", "jsonl"}

// newReader returns the reader of kind over data (TSV column and JSONL field "text").
func newReader(kind, data string) (*TextReader, error) {
	r := strings.NewReader(data)
	switch kind {
	case "tsv":
		return NewTSVReader(r, "in.tsv", "text")
	case "jsonl":
		return NewJSONLReader(r, "in.jsonl", "text")
	}
	return NewLineReader(r, "in.txt"), nil
}

// readAll returns every text and line of a reader, or the first error.
func readAll(t *TextReader) (texts []string, lines []int, err error) {
	for {
		s, line, err := t.Next()
		if err == io.EOF {
			return texts, lines, nil
		}
		if err != nil {
			return texts, lines, err
		}
		texts, lines = append(texts, s), append(lines, line)
	}
}

// Each reader yields the texts of its format with their line numbers, and refuses malformed input
// naming the input and the line, without quoting a text.
func TestTextReaders(t *testing.T) {
	for _, tc := range []struct {
		name, kind, data string
		texts            []string
		lines            []int
		err              string // a substring of the error (of the constructor or of Next)
	}{
		{"lines", "lines", "a b\nc d\n", []string{"a b", "c d"}, []int{1, 2}, ""},
		{"lines CRLF BOM no final newline", "lines", "\ufeffa\r\nb", []string{"a", "b"}, []int{1, 2}, ""},
		{"lines tab kept", "lines", "a\tb\n", []string{"a\tb"}, []int{1}, ""},
		{"lines empty input", "lines", "", nil, nil, ""},
		{"lines empty line", "lines", "a\n\nb\n", []string{"a"}, []int{1}, "in.txt:2: empty text"},
		{"lines blank line", "lines", "a\n \t\n", []string{"a"}, []int{1}, "in.txt:2: blank text"},
		{"lines bad UTF-8", "lines", "a\nsecret \xfe\n", []string{"a"}, []int{1}, "in.txt:2: text is not valid UTF-8"},
		{"tsv", "tsv", "id\ttext\n1\tgood movie\n2\tbad\n", []string{"good movie", "bad"}, []int{2, 3}, ""},
		{"tsv BOM CRLF", "tsv", "\ufefftext\tid\r\nx y\t1\r\n", []string{"x y"}, []int{2}, ""},
		{"tsv missing column", "tsv", "id\tsentence\n1\ta\n", nil, nil, `in.tsv:1: header has no column "text" (columns: "id" "sentence")`},
		{"tsv duplicate column", "tsv", "text\ttext\n", nil, nil, `in.tsv:1: duplicate column "text" (columns 1 and 2)`},
		{"tsv empty", "tsv", "", nil, nil, "in.tsv: empty input (no header line)"},
		{"tsv short row", "tsv", "id\ttext\n1\ta\n2\n", []string{"a"}, []int{2}, "in.tsv:3: want 2 tab-separated fields as the header, got 1"},
		{"tsv empty field", "tsv", "id\ttext\n1\t\n", nil, nil, "in.tsv:2: empty text"},
		{"jsonl", "jsonl", "{\"text\":\"a \\\"q\\\"\",\"id\":1}\n{\"id\":2,\"text\":\"b\\u00e9\"}\n", []string{`a "q"`, "b\u00e9"}, []int{1, 2}, ""},
		{"jsonl missing field first line", "jsonl", "{\"sentence\":\"a\"}\n", nil, nil, `in.jsonl:1: no field "text"`},
		{"jsonl missing field later", "jsonl", "{\"text\":\"a\"}\n{\"sentence\":\"b\"}\n", []string{"a"}, []int{1}, `in.jsonl:2: no field "text"`},
		{"jsonl bad JSON", "jsonl", "{\"text\":\"a\"}\n{\"text\":\"b\"\n", []string{"a"}, []int{1}, "in.jsonl:2: not a JSON object"},
		{"jsonl not an object", "jsonl", "[\"text\"]\n", nil, nil, "in.jsonl:1: not a JSON object"},
		{"jsonl null", "jsonl", "null\n", nil, nil, "in.jsonl:1: not a JSON object"},
		{"jsonl number field", "jsonl", "{\"text\":3}\n", nil, nil, `in.jsonl:1: field "text" is not a string`},
		{"jsonl null field", "jsonl", "{\"text\":null}\n", nil, nil, `in.jsonl:1: field "text" is not a string`},
		{"jsonl empty text", "jsonl", "{\"text\":\"a\"}\n{\"text\":\"\"}\n", []string{"a"}, []int{1}, "in.jsonl:2: empty text"},
		{"jsonl blank line", "jsonl", "{\"text\":\"a\"}\n\n", []string{"a"}, []int{1}, "in.jsonl:2: not a JSON object"},
		{"jsonl empty", "jsonl", "", nil, nil, "in.jsonl: empty input (no JSON lines)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := newReader(tc.kind, tc.data)
			var texts []string
			var lines []int
			if err == nil {
				texts, lines, err = readAll(r)
			}
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("the error quotes a text: %v", err)
			}
			if !slices.Equal(texts, tc.texts) || !slices.Equal(lines, tc.lines) {
				t.Errorf("texts %q lines %v, want %q %v", texts, lines, tc.texts, tc.lines)
			}
		})
	}
}

// A line longer than MaxLineBytes is an error naming it, not an unbounded allocation.
func TestTextReaderLongLine(t *testing.T) {
	r := NewLineReader(io.MultiReader(strings.NewReader("ok\n"), strings.NewReader(strings.Repeat("x", MaxLineBytes+1))), "big.txt")
	_, _, err := readAll(r)
	if err == nil || !strings.Contains(err.Error(), "big.txt:2: line longer than") {
		t.Errorf("error %v", err)
	}
}

// FuzzTextReaders: on any input each reader either yields texts or fails with an error naming the
// input; every text it yields passes CheckText, line numbers increase, and a text of lines or TSV is
// a part of one line of the input (JSON strings may hold escaped line ends).
func FuzzTextReaders(f *testing.F) {
	for _, s := range []string{"a\nb\n", "text\tid\nx\t1\n", "{\"text\":\"a\"}\n{\"text\":\"b\"}\n", "\ufeff\r\n", "{\"text\":\"\\u0000\"}",
		"text\n\xff\n", "{\"text\":\"\\ud800\"}\n", "text\ttext\n", "a\r\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		for _, kind := range readerKinds {
			r, err := newReader(kind, data)
			if err != nil {
				if !strings.HasPrefix(err.Error(), "in.") {
					t.Fatalf("%s: error without the input's name: %v", kind, err)
				}
				continue
			}
			last := 0
			for {
				s, line, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					if !strings.HasPrefix(err.Error(), r.Name()+":") {
						t.Fatalf("%s: error without the input's name: %v", kind, err)
					}
					break
				}
				if CheckText(s) != nil || !utf8.ValidString(s) || line <= last {
					t.Fatalf("%s: text %q at line %d (after %d)", kind, s, line, last)
				}
				if kind != "jsonl" && (!strings.Contains(data, s) || strings.Contains(s, "\n")) {
					t.Fatalf("%s: text %q is not a line of the input", kind, s)
				}
				last = line
			}
		}
	})
}

// TestNewTextReader: the column chooses the TSV reader, else the field the
// JSON-lines reader, else plain lines; each reads the first text of its input.
func TestNewTextReader(t *testing.T) {
	for _, c := range []struct {
		name, in, column, field, want string
	}{
		{"tsv", "sentence\tlabel\na b\t1\n", "sentence", "", "a b"},
		{"jsonl", `{"text": "c d"}` + "\n", "", "text", "c d"},
		{"lines", "e f\n", "", "", "e f"},
		{"lines, not a column", "sentence\tlabel\n", "", "", "sentence\tlabel"},
	} {
		r, err := NewTextReader(strings.NewReader(c.in), c.name, c.column, c.field)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got, _, err := r.Next(); err != nil || got != c.want {
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}
