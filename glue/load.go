package glue

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nvdp-project/nvdp/internal/excerpt"
)

// Example is one row of a GLUE split.
type Example struct {
	// Index is the row's `index` column where the file has one, as all test splits, RTE, QNLI and
	// STS-B do, and otherwise the 0-based data-row number. GLUE submissions are keyed by it.
	Index int
	// TextA and TextB are the task's text fields; TextB is "" for single-sentence tasks.
	TextA, TextB string
	// Label is the class index for classification tasks; see Task.LabelNames. It is 0 for STS-B and
	// for unlabelled rows.
	Label int
	// Score is the STS-B similarity score in [0, 5]; 0 for other tasks.
	Score float32
	// HasLabel is false for test splits, whose GLUE labels are hidden.
	HasLabel bool
	// Line is the 1-based line number in the file, where the header is line 1.
	Line int
}

// Target returns the training target: the class index as float64, or the STS-B score.
func (e Example) Target(t *Task) float64 {
	if t.IsRegression {
		return float64(e.Score)
	}
	return float64(e.Label)
}

// LoadOptions controls Load.
type LoadOptions struct {
	// SkipBadRows skips malformed rows, with a wrong column count or a bad label or index, and
	// counts them in Dataset.Skipped instead of failing.
	SkipBadRows bool
	// Limit keeps only the first Limit examples; 0 keeps all.
	Limit int
}

// Dataset is a loaded split.
type Dataset struct {
	Task     *Task
	Split    string // train, dev or test
	Path     string
	Examples []Example
	// Skipped counts the malformed rows skipped under SkipBadRows. SkipErrors holds the first few
	// of their errors, as "file:line: reason".
	Skipped    int
	SkipErrors []string
	// Labelled is true when the file has the label column.
	Labelled bool
}

// Targets returns every example's [Example.Target], in order.
func (d *Dataset) Targets() []float64 {
	out := make([]float64, len(d.Examples))
	for i, e := range d.Examples {
		out[i] = e.Target(d.Task)
	}
	return out
}

// Indices returns every example's Index, in order.
func (d *Dataset) Indices() []int {
	out := make([]int, len(d.Examples))
	for i, e := range d.Examples {
		out[i] = e.Index
	}
	return out
}

// ErrMissingSplit is wrapped by [Load] and [CheckSplit] when the GLUE directory exists but the
// split's file does not. A model trained elsewhere may still be evaluated here.
var ErrMissingSplit = errors.New("split not found")

// ErrNoDir is wrapped by Load and CheckSplit when the GLUE directory itself is not given,
// does not exist or is not a directory.
var ErrNoDir = errors.New("no GLUE directory")

// SplitPath returns glueDir/<Task.Dir>/<split>.tsv; split "validation" means dev.
func SplitPath(glueDir string, task *Task, split string) (string, string, error) {
	s := strings.ToLower(split)
	if s == "validation" {
		s = "dev"
	}
	if s != "train" && s != "dev" && s != "test" {
		return "", "", fmt.Errorf("glue: unknown split %q (valid: train, dev, test)", split)
	}
	return filepath.Join(glueDir, task.Dir, s+".tsv"), s, nil
}

// CheckSplit returns the path of a split's file, as [SplitPath] gives it, after checking that the
// GLUE directory and the file exist, so that callers can fail before any work.
//
// It returns an error for an unknown split; an error wrapping [ErrNoDir] when glueDir is "", does
// not exist or is not a directory; and an error wrapping [ErrMissingSplit], naming the file, when
// the directory exists but the file does not.
func CheckSplit(glueDir string, task *Task, split string) (string, error) {
	path, _, err := SplitPath(glueDir, task, split)
	if err != nil {
		return "", err
	}
	if glueDir == "" {
		return "", fmt.Errorf("glue: %w given", ErrNoDir)
	}
	st, err := os.Stat(glueDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("glue: %w: %s does not exist", ErrNoDir, glueDir)
	case err != nil:
		return "", fmt.Errorf("glue: %w: %w", ErrNoDir, err)
	case !st.IsDir():
		return "", fmt.Errorf("glue: %w: %s is not a directory", ErrNoDir, glueDir)
	}
	if st, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("glue %s: %w: %s does not exist (expected the GLUE layout %s/{train,dev,test}.tsv)",
			task.Name, ErrMissingSplit, path, filepath.Join(glueDir, task.Dir))
	} else if err == nil && st.IsDir() {
		return "", fmt.Errorf("glue %s: %s is a directory, not a TSV file", task.Name, path)
	}
	return path, nil
}

// Load reads one split of a task from a GLUE directory, from glueDir/<Task.Dir>/<split>.tsv.
//
// Files are read as plain TSV: lines are split on tabs with no quote handling, since the texts
// contain stray '"' characters. A UTF-8 BOM before the header is ignored, as MRPC has one. LF and
// CRLF line ends are accepted, and columns are found by header name. train and dev must have the
// label column; test files normally do not, and their rows get HasLabel false.
//
// [CheckSplit] gives the errors for the GLUE directory and the file's existence. Load also returns
// an error for an empty file; a header with a duplicate column name after trimming spaces, without
// a needed column, or with a bare carriage return, as in CR-only "old Mac" line ends; a file with
// no data rows; and a malformed row, with a wrong column count or a bad label, score or index,
// unless opts.SkipBadRows is set, in which case only a file whose every row is malformed is an
// error. Every error names the file, and the line as file:line, and quotes at most a short excerpt
// of it.
func Load(glueDir string, task *Task, split string, opts LoadOptions) (*Dataset, error) {
	path, err := CheckSplit(glueDir, task, split)
	if err != nil {
		return nil, err
	}
	_, s, _ := SplitPath(glueDir, task, split)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("glue %s: %w", task.Name, err)
	}
	defer f.Close()
	return Read(f, path, task, s, opts)
}

// Read parses a GLUE TSV stream; name is used in error messages. [Load] describes the format and
// the errors.
func Read(r io.Reader, name string, task *Task, split string, opts LoadOptions) (*Dataset, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	ds := &Dataset{Task: task, Split: split, Path: name}
	cols, colIdx, err := readHeader(br, name)
	if err != nil {
		return nil, err
	}
	c, err := findColumns(name, task, split, cols, colIdx)
	if err != nil {
		return nil, err
	}
	ds.Labelled = c.hasLabel
	rows, err := readRows(br, name, task, c, opts, ds)
	if err != nil {
		return nil, err
	}
	switch {
	case rows == 0:
		return nil, fmt.Errorf("%s: no data rows (the file holds only the header)", name)
	case len(ds.Examples) == 0:
		return nil, fmt.Errorf("%s: no usable rows: all %d data rows are malformed (first: %s)", name, ds.Skipped, ds.SkipErrors[0])
	}
	return ds, nil
}

// readHeader reads the header line (a UTF-8 byte order mark dropped) and
// returns its columns and the index of each column name (trimmed), which
// must be unique.
func readHeader(br *bufio.Reader, name string) ([]string, map[string]int, error) {
	header, err := readLine(br)
	if err != nil && (err != io.EOF || header == "") {
		if err == io.EOF {
			return nil, nil, fmt.Errorf("%s: empty file (no header)", name)
		}
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	header = strings.TrimPrefix(header, "\ufeff")
	if i := strings.IndexByte(header, '\r'); i >= 0 {
		return nil, nil, fmt.Errorf("%s:1: carriage return not followed by a newline after %s: CR-only (old Mac) line ends are not supported; convert them to LF",
			name, excerpt.Quote(header[:i]))
	}
	cols := strings.Split(header, "\t")
	colIdx := map[string]int{}
	for i, c := range cols {
		c = strings.TrimSpace(c)
		if j, dup := colIdx[c]; dup {
			return nil, nil, fmt.Errorf("%s:1: duplicate column %s (columns %d and %d)", name, excerpt.Quote(c), j+1, i+1)
		}
		colIdx[c] = i
	}
	return cols, colIdx, nil
}

// columns are the header's number of columns and the indices of the columns
// a task reads: ib is -1 for a single-sentence task; il and ii are valid
// when hasLabel and hasIndex.
type columns struct {
	n, ia, ib, il, ii  int
	hasLabel, hasIndex bool
}

// findColumns finds the task's text columns, then its label column (which
// only the test split may lack), then the optional index column.
func findColumns(name string, task *Task, split string, cols []string, colIdx map[string]int) (columns, error) {
	need := func(field string) (int, error) {
		i, ok := colIdx[field]
		if !ok {
			return 0, fmt.Errorf("%s:1: header has no %q column (columns: %s)", name, field, excerpt.List(cols, 10))
		}
		return i, nil
	}
	c := columns{n: len(cols), ib: -1}
	var err error
	if c.ia, err = need(task.TextFields[0]); err != nil {
		return columns{}, err
	}
	if task.IsPair() {
		if c.ib, err = need(task.TextFields[1]); err != nil {
			return columns{}, err
		}
	}
	c.il, c.hasLabel = colIdx[task.LabelField]
	if !c.hasLabel && split != "test" {
		return columns{}, fmt.Errorf("%s:1: %s split needs the label column %q (columns: %s)", name, split, task.LabelField, excerpt.List(cols, 10))
	}
	c.ii, c.hasIndex = colIdx["index"]
	return c, nil
}

// readRows reads the data rows into ds (up to opts.Limit examples; a
// malformed row is an error, or skipped and counted with
// opts.SkipBadRows) and returns the number of rows read.
func readRows(br *bufio.Reader, name string, task *Task, c columns, opts LoadOptions, ds *Dataset) (int, error) {
	row, rows := 0, 0 // row: the 0-based index of the row being parsed; rows: rows read
	for lineNo := 2; ; lineNo++ {
		line, err := readLine(br)
		if err == io.EOF && line == "" {
			break
		}
		if err != nil && err != io.EOF {
			return 0, fmt.Errorf("%s:%d: %w", name, lineNo, err)
		}
		rows++
		ex, perr := parseRow(task, line, c.n, c.ia, c.ib, c.il, c.hasLabel, c.ii, c.hasIndex, row)
		if perr != nil {
			perr = fmt.Errorf("%s:%d: %w", name, lineNo, perr)
			if !opts.SkipBadRows {
				return 0, perr
			}
			ds.Skipped++
			if len(ds.SkipErrors) < 10 {
				ds.SkipErrors = append(ds.SkipErrors, perr.Error())
			}
		} else {
			ex.Line = lineNo
			ds.Examples = append(ds.Examples, ex)
			if opts.Limit > 0 && len(ds.Examples) >= opts.Limit {
				break
			}
		}
		row++
		if err == io.EOF {
			break
		}
	}
	return rows, nil
}

// readLine returns the next line without its "\n" or "\r\n".
func readLine(br *bufio.Reader) (string, error) {
	line, err := br.ReadString('\n')
	line = strings.TrimSuffix(line, "\n")
	line = strings.TrimSuffix(line, "\r")
	return line, err
}

func parseRow(task *Task, line string, ncol, ia, ib, il int, hasLabel bool, ii int, hasIndex bool, row int) (Example, error) {
	fields := strings.Split(line, "\t")
	if len(fields) != ncol {
		return Example{}, fmt.Errorf("want %d tab-separated columns, got %d", ncol, len(fields))
	}
	ex := Example{Index: row, TextA: fields[ia]}
	if ib >= 0 {
		ex.TextB = fields[ib]
	}
	if hasIndex {
		v, err := strconv.Atoi(strings.TrimSpace(fields[ii]))
		if err != nil {
			return Example{}, fmt.Errorf("bad index %s", excerpt.Quote(fields[ii]))
		}
		ex.Index = v
	}
	if !hasLabel {
		return ex, nil
	}
	raw := strings.TrimSpace(fields[il])
	ex.HasLabel = true
	if task.IsRegression {
		v, err := strconv.ParseFloat(raw, 64)
		if err != nil || math.IsNaN(v) || v < 0 || v > 5 {
			return Example{}, fmt.Errorf("bad %s %s (want a number in [0, 5])", task.LabelField, excerpt.Quote(raw))
		}
		ex.Score = float32(v)
		return ex, nil
	}
	for i, n := range task.LabelNames {
		if raw == n {
			ex.Label = i
			return ex, nil
		}
	}
	return Example{}, fmt.Errorf("bad %s %s (want one of %q)", task.LabelField, excerpt.Quote(raw), task.LabelNames)
}
