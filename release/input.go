package release

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/nvdp-project/nvdp/internal/excerpt"
)

// MaxLineBytes bounds one input line of a [TextReader] to 16 MiB: the memory one text may take
// before it is truncated to max-seq-len tokens.
const MaxLineBytes = 16 << 20

// TextReader reads the texts of an input stream one at a time, in bounded memory. The input is
// plain lines, read by [NewLineReader]; a column of a tab-separated file with a header, read by
// [NewTSVReader]; or a string field of JSON lines, read by [NewJSONLReader].
//
// Line ends are "\n" or "\r\n", and a UTF-8 byte order mark at the start is dropped. Every text is
// checked by [CheckText] as it is read. Errors name the input and the line and never quote a text.
type TextReader struct {
	name    string
	sc      *bufio.Scanner
	line    int                               // lines read
	pending *string                           // a line read ahead (the first line of JSON lines)
	text    func(line string) (string, error) // the text of a data line
	closer  io.Closer                         // the file of OpenInput, or nil
}

func newScanner(r io.Reader) *bufio.Scanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	return sc
}

// next returns the next line (without its end) or io.EOF.
func (t *TextReader) next() (string, error) {
	if t.pending != nil {
		s := *t.pending
		t.pending = nil
		t.line++
		return s, nil
	}
	if !t.sc.Scan() {
		err := t.sc.Err()
		switch {
		case errors.Is(err, bufio.ErrTooLong):
			return "", fmt.Errorf("%s:%d: line longer than %d bytes", t.name, t.line+1, MaxLineBytes)
		case err != nil:
			return "", fmt.Errorf("%s:%d: %w", t.name, t.line+1, err)
		}
		return "", io.EOF
	}
	t.line++
	s := t.sc.Text()
	if t.line == 1 {
		s = strings.TrimPrefix(s, "\ufeff")
	}
	return s, nil
}

// Next returns the next text and its 1-based line number in the input, or io.EOF after the last.
// Errors name the input and the line: a malformed line, a text [CheckText] rejects, a line longer
// than [MaxLineBytes], or a read error.
func (t *TextReader) Next() (text string, line int, err error) {
	s, err := t.next()
	if err != nil {
		return "", 0, err
	}
	text, err = t.text(s)
	if err == nil {
		err = CheckText(text)
	}
	if err != nil {
		return "", 0, fmt.Errorf("%s:%d: %w", t.name, t.line, err)
	}
	return text, t.line, nil
}

// Close closes the file [OpenInput] opened; it does nothing for a reader of another stream.
func (t *TextReader) Close() error {
	if t.closer == nil {
		return nil
	}
	return t.closer.Close()
}

// Name returns the input's name, as errors give it.
func (t *TextReader) Name() string { return t.name }

// NewLineReader returns a reader of one text per line of r. Every line is a text, so an empty line
// is an error. name names r in errors.
func NewLineReader(r io.Reader, name string) *TextReader {
	return &TextReader{name: name, sc: newScanner(r), text: func(s string) (string, error) { return s, nil }}
}

// NewTSVReader returns a reader of the column named column of a tab-separated file with a header
// line and no quoting, as GLUE's files. The header is read now.
//
// The errors name the input and line 1: no header, a duplicate column name, or no column named
// column, listing the columns. Later, Next returns an error for a row whose number of fields is not
// the header's.
func NewTSVReader(r io.Reader, name, column string) (*TextReader, error) {
	t := &TextReader{name: name, sc: newScanner(r)}
	header, err := t.next()
	if err == io.EOF {
		return nil, fmt.Errorf("%s: empty input (no header line)", name)
	}
	if err != nil {
		return nil, err
	}
	cols := strings.Split(header, "\t")
	at := -1
	seen := map[string]int{}
	for i, c := range cols {
		if j, dup := seen[c]; dup {
			return nil, fmt.Errorf("%s:1: duplicate column %s (columns %d and %d)", name, excerpt.Quote(c), j+1, i+1)
		}
		seen[c] = i
		if c == column {
			at = i
		}
	}
	if at < 0 {
		return nil, fmt.Errorf("%s:1: header has no column %s (columns: %s)", name, excerpt.Quote(column), excerpt.List(cols, 10))
	}
	t.text = func(s string) (string, error) {
		fields := strings.Split(s, "\t")
		if len(fields) != len(cols) {
			return "", fmt.Errorf("want %d tab-separated fields as the header, got %d", len(cols), len(fields))
		}
		return fields[at], nil
	}
	return t, nil
}

// NewJSONLReader returns a reader of the string field named field of JSON lines, one object per
// line; other fields are ignored. The first line is read and checked now. The errors name the input
// and the line: no lines, a line that is not a JSON object, no field named field, or a field that is
// not a string.
func NewJSONLReader(r io.Reader, name, field string) (*TextReader, error) {
	t := &TextReader{name: name, sc: newScanner(r)}
	t.text = func(s string) (string, error) {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(s), &obj); err != nil || obj == nil {
			if err == nil {
				err = errors.New("null")
			}
			return "", fmt.Errorf("not a JSON object: %w", err)
		}
		raw, ok := obj[field]
		if !ok {
			return "", fmt.Errorf("no field %s", excerpt.Quote(field))
		}
		var text string
		if err := json.Unmarshal(raw, &text); err != nil || string(raw) == "null" {
			return "", fmt.Errorf("field %s is not a string", excerpt.Quote(field))
		}
		return text, nil
	}
	first, err := t.next()
	if err == io.EOF {
		return nil, fmt.Errorf("%s: empty input (no JSON lines)", name)
	}
	if err != nil {
		return nil, err
	}
	if _, err := t.text(first); err != nil {
		return nil, fmt.Errorf("%s:1: %w", name, err)
	}
	t.pending, t.line = &first, 0 // Next returns it as line 1
	return t, nil
}

// NewTextReader returns the reader of r that column and field choose: the
// column of a tab-separated file ([NewTSVReader]) when column is not empty,
// else the field of JSON lines ([NewJSONLReader]) when field is not empty,
// else plain lines ([NewLineReader]). A caller gives at most one of them.
//
// Its errors are those of the reader chosen.
func NewTextReader(r io.Reader, name, column, field string) (*TextReader, error) {
	switch {
	case column != "":
		return NewTSVReader(r, name, column)
	case field != "":
		return NewJSONLReader(r, name, field)
	}
	return NewLineReader(r, name), nil
}

// OpenInput opens the input at path and returns its reader, [NewTextReader]'s choice by column and
// field: path names a file, or is "-" for stdin, which errors name "stdin". The reader's Close
// closes the file.
//
// Its errors are those of opening the file and of the reader chosen.
func OpenInput(path string, stdin io.Reader, column, field string) (*TextReader, error) {
	if path == "-" {
		return NewTextReader(stdin, "stdin", column, field)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	t, err := NewTextReader(f, path, column, field)
	if err != nil {
		f.Close()
		return nil, err
	}
	t.closer = f
	return t, nil
}
