package glue

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const realGLUE = "/work/shared/data/glue"

func needGLUE(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(realGLUE); err != nil {
		t.Skipf("%s not available", realGLUE)
	}
}

func mustTask(t *testing.T, name string) *Task {
	t.Helper()
	task, err := LookupTask(name)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func TestLookupTask(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"sst2", "sst2"}, {"SST-2", "sst2"}, {"sst-2", "sst2"}, {"MRPC", "mrpc"}, {"rte", "rte"},
		{"STS-B", "stsb"}, {"sts-b", "stsb"}, {"stsb", "stsb"}, {"QNLI", "qnli"},
	} {
		task, err := LookupTask(c.in)
		if err != nil || task.Name != c.want {
			t.Errorf("LookupTask(%q) = %v, %v; want %s", c.in, task, err, c.want)
		}
	}
	_, err := LookupTask("cola")
	if err == nil || !strings.Contains(err.Error(), "mrpc, qnli, rte, sst2, stsb") {
		t.Errorf("LookupTask(cola) error %v should list the valid names", err)
	}
	// Returned tasks are copies.
	a := mustTask(t, "sst2")
	a.MaxSeqLen = 7
	if b := mustTask(t, "sst2"); b.MaxSeqLen != 512 {
		t.Errorf("LookupTask returned a shared Task")
	}
	if m := mustTask(t, "mrpc"); m.Metric != "f1" || m.MaxSeqLen != 128 {
		t.Errorf("mrpc metric %s maxlen %d", m.Metric, m.MaxSeqLen)
	}
	if s := mustTask(t, "stsb"); !s.IsRegression || s.NumLabels != 1 || s.Metric != "spearmanr" {
		t.Errorf("stsb %+v", s)
	}
}

// TestLoadReal checks row counts against /work/shared/data/SOURCES.md and spot-checks rows.
func TestLoadReal(t *testing.T) {
	needGLUE(t)
	cases := []struct {
		task, split string
		rows        int
		labelled    bool
	}{
		{"sst2", "train", 67349, true}, {"sst2", "dev", 872, true}, {"sst2", "test", 1821, false},
		{"mrpc", "train", 3668, true}, {"mrpc", "dev", 408, true}, {"mrpc", "test", 1725, false},
		{"rte", "train", 2490, true}, {"rte", "dev", 277, true}, {"rte", "test", 3000, false},
		{"stsb", "train", 5749, true}, {"stsb", "dev", 1500, true}, {"stsb", "test", 1379, false},
		{"qnli", "dev", 5463, true}, {"qnli", "test", 5463, false},
	}
	for _, c := range cases {
		if testing.Short() && c.task == "sst2" && c.split == "train" {
			continue
		}
		task := mustTask(t, c.task)
		ds, err := Load(realGLUE, task, c.split, LoadOptions{})
		if err != nil {
			t.Errorf("%s/%s: %v", c.task, c.split, err)
			continue
		}
		if len(ds.Examples) != c.rows || ds.Labelled != c.labelled || ds.Skipped != 0 {
			t.Errorf("%s/%s: %d rows labelled=%v skipped=%d, want %d labelled=%v", c.task, c.split, len(ds.Examples), ds.Labelled, ds.Skipped, c.rows, c.labelled)
		}
		for i, e := range ds.Examples {
			if e.TextA == "" || (task.IsPair() && e.TextB == "") || e.HasLabel != c.labelled {
				t.Errorf("%s/%s row %d (line %d): empty text or label flag: %+v", c.task, c.split, i, e.Line, e)
				break
			}
		}
		if c.split == "test" {
			for i, e := range ds.Examples {
				if e.Index != i {
					t.Errorf("%s/test: row %d has index %d", c.task, i, e.Index)
					break
				}
			}
		}
	}
}

func TestLoadRealSpotChecks(t *testing.T) {
	needGLUE(t)
	ds, err := Load(realGLUE, mustTask(t, "mrpc"), "train", LoadOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	e := ds.Examples[0] // BOM header; quotes kept verbatim
	if e.Label != 1 || !strings.HasPrefix(e.TextA, "Amrozi accused his brother , whom he called \" the witness \"") ||
		!strings.HasPrefix(e.TextB, "Referring to him as only \" the witness \"") || len(ds.Examples) != 2 || ds.Examples[1].Label != 0 {
		t.Errorf("mrpc train row 0: %+v", e)
	}
	rte, err := Load(realGLUE, mustTask(t, "rte"), "dev", LoadOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r := rte.Examples[0]; r.Label != 1 || r.Index != 0 || r.TextB != "Christopher Reeve had an accident." {
		t.Errorf("rte dev row 0: %+v", r)
	}
	st, err := Load(realGLUE, mustTask(t, "stsb"), "test", LoadOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if s := st.Examples[0]; s.TextA != "A girl is styling her hair." || s.TextB != "A girl is brushing her hair." || s.HasLabel {
		t.Errorf("stsb test row 0: %+v", s)
	}
	dev, err := Load(realGLUE, mustTask(t, "stsb"), "dev", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := 5.0, 0.0
	for _, e := range dev.Examples {
		lo, hi = math.Min(lo, float64(e.Score)), math.Max(hi, float64(e.Score))
	}
	if lo != 0 || hi != 5 {
		t.Errorf("stsb dev score range [%g, %g], want [0, 5]", lo, hi)
	}
	// Label balance sanity: SST-2 dev has 444 positive of 872.
	sst, _ := Load(realGLUE, mustTask(t, "sst2"), "dev", LoadOptions{})
	pos := 0
	for _, e := range sst.Examples {
		pos += e.Label
	}
	if pos != 444 {
		t.Errorf("sst2 dev positives = %d, want 444", pos)
	}
}

func TestMissingSplit(t *testing.T) {
	needGLUE(t)
	_, err := Load(realGLUE, mustTask(t, "qnli"), "train", LoadOptions{})
	if err == nil || !errors.Is(err, ErrMissingSplit) || !strings.Contains(err.Error(), filepath.Join(realGLUE, "QNLI", "train.tsv")) {
		t.Errorf("QNLI train error = %v", err)
	}
	if _, err := Load(realGLUE, mustTask(t, "rte"), "validation", LoadOptions{Limit: 1}); err != nil {
		t.Errorf("validation alias: %v", err)
	}
	if _, err := Load(realGLUE, mustTask(t, "rte"), "eval", LoadOptions{}); err == nil {
		t.Error("unknown split accepted")
	}
}

// TestMissingGLUEDir: a GLUE directory that does not exist is named as such
// (it was reported as a missing training split, suggesting training elsewhere).
func TestMissingGLUEDir(t *testing.T) {
	task := mustTask(t, "sst2")
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	cases := []struct{ dir, want string }{
		{"/nonexistent/glue", "no GLUE directory: /nonexistent/glue does not exist"},
		{"", "no GLUE directory given"},
		{file, "is not a directory"},
	}
	for _, c := range cases {
		for _, split := range []string{"train", "dev", "test"} {
			_, err := Load(c.dir, task, split, LoadOptions{})
			if err == nil || !errors.Is(err, ErrNoDir) || errors.Is(err, ErrMissingSplit) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Load(%q, %s): error %v, want ErrNoDir containing %q", c.dir, split, err, c.want)
			}
			if _, err := CheckSplit(c.dir, task, split); !errors.Is(err, ErrNoDir) {
				t.Errorf("CheckSplit(%q, %s): error %v, want ErrNoDir", c.dir, split, err)
			}
		}
	}
	// The directory exists, the task's file does not: ErrMissingSplit, naming the file.
	dir := writeFixture(t, "SST-2", "dev", "sentence\tlabel\na\t1\n")
	_, err := CheckSplit(dir, task, "train")
	if want := filepath.Join(dir, "SST-2", "train.tsv"); !errors.Is(err, ErrMissingSplit) || errors.Is(err, ErrNoDir) || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckSplit(train): error %v, want ErrMissingSplit naming %s", err, want)
	}
	if p, err := CheckSplit(dir, task, "validation"); err != nil || p != filepath.Join(dir, "SST-2", "dev.tsv") {
		t.Errorf("CheckSplit(validation) = %q, %v", p, err)
	}
	if _, err := CheckSplit(dir, task, "eval"); err == nil || !strings.Contains(err.Error(), "unknown split") {
		t.Errorf("CheckSplit(eval): %v", err)
	}
}

// TestErrorExcerpts: errors quote at most a short excerpt of the file, however
// long the offending line or field (a CR-only file printed itself whole).
func TestErrorExcerpts(t *testing.T) {
	long := strings.Repeat("a very long sentence ", 500)
	var cr strings.Builder
	cr.WriteString("sentence\tlabel\r")
	for range 2000 {
		cr.WriteString(long[:200] + "\t1\r")
	}
	var manyColumns string
	for i := range 3000 {
		manyColumns += fmt.Sprintf("c%d\t", i)
	}
	cases := []struct{ name, task, split, content, want string }{
		{"CR-only file", "sst2", "train", cr.String(), "carriage return"},
		{"long header", "sst2", "dev", long + "\tlabel\na\t1\n", "header has no \"sentence\" column"},
		{"many columns", "sst2", "dev", manyColumns + "label\n", "header has no \"sentence\" column"},
		{"long label", "sst2", "dev", "sentence\tlabel\na\t" + long + "\n", "bad label"},
		{"long index", "qnli", "test", "index\tquestion\tsentence\n" + long + "\tq\ts\n", "bad index"},
		{"long score", "stsb", "dev", "index\tsentence1\tsentence2\tscore\n0\ta\tb\t" + long + "\n", "bad score"},
	}
	for _, c := range cases {
		task := mustTask(t, c.task)
		dir := writeFixture(t, task.Dir, c.split, c.content)
		_, err := Load(dir, task, c.split, LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
			continue
		}
		if n := len(err.Error()) - len(dir); n > 400 {
			t.Errorf("%s: error of %d bytes quotes too much: %.300s...", c.name, n, err)
		}
	}
}

func writeFixture(t *testing.T, taskDir, split, content string) string {
	t.Helper()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, taskDir), 0o755)
	if err := os.WriteFile(filepath.Join(dir, taskDir, split+".tsv"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// fixtures are small GLUE files, good and malformed, with the error each must give (also the
// seed corpus of FuzzRead).
type fixture struct {
	name, task, split, content string
	wantErr                    string // substring; "" = no error
	skipped, rows              int    // under SkipBadRows; skipped < 0: the error stays
}

var fixtures = []fixture{
	{"ok with BOM and CRLF", "mrpc", "dev", "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\r\n1\t1\t2\ta \"b\tc\r\n0\t3\t4\td\te\r\n", "", 0, 2},
	{"stray quote no quoting", "sst2", "train", "sentence\tlabel\n\"it 's fine\t1\nbad \" one\t0\n", "", 0, 2},
	{"extra column", "sst2", "train", "sentence\tlabel\ngood\t1\nx\ty\t0\n", ":3: want 2 tab-separated columns, got 3", 1, 1},
	{"missing column", "rte", "dev", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\ta\tnot_entailment\n", ":3: want 4", 1, 1},
	{"bad label", "rte", "train", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailed\n1\ta\tb\tnot_entailment\n", ":2: bad label \"entailed\"", 1, 1},
	{"bad sst2 label", "sst2", "dev", "sentence\tlabel\nok\t2\n", ":2: bad label \"2\"", 1, 0},
	{"bad score", "stsb", "dev", "index\tsentence1\tsentence2\tscore\n0\ta\tb\t5.5\n1\ta\tb\t2.5\n", ":2: bad score \"5.5\"", 1, 1},
	{"nan score", "stsb", "dev", "index\tsentence1\tsentence2\tscore\n0\ta\tb\tNaN\n", "bad score", 1, 0},
	{"bad index", "qnli", "test", "index\tquestion\tsentence\nx\tq\ts\n", ":2: bad index", 1, 0},
	{"blank line", "sst2", "train", "sentence\tlabel\na\t1\n\nb\t0\n", ":3: want 2", 1, 2},
	{"no label column in dev", "sst2", "dev", "sentence\n a\n", "needs the label column \"label\"", -1, 0},
	{"no text column", "qnli", "dev", "index\tquestion\tlabel\n0\tq\tentailment\n", "header has no \"sentence\" column", -1, 0},
	{"empty file", "sst2", "dev", "", "empty file", -1, 0},
	// Duplicate header names picked the last column silently.
	{"duplicate column", "sst2", "dev", "sentence\tlabel\tlabel\na\t1\t0\n", ":1: duplicate column \"label\" (columns 2 and 3)", -1, 0},
	{"duplicate column after trimming", "rte", "dev", "index\tsentence1\tsentence2\tlabel\t sentence1\n0\ta\tb\tentailment\tc\n", ":1: duplicate column \"sentence1\" (columns 2 and 5)", -1, 0},
	{"duplicate unused column", "sst2", "train", "x\tsentence\tx\tlabel\n1\ta\t2\t1\n", ":1: duplicate column \"x\"", -1, 0},
	// A header-only split was an empty dataset (a dev file failed after an epoch).
	{"header only", "sst2", "dev", "sentence\tlabel\n", "no data rows", -1, 0},
	{"header only without newline", "rte", "test", "index\tsentence1\tsentence2", "no data rows", -1, 0},
	{"old Mac line ends", "sst2", "train", "sentence\tlabel\ra\t1\rb\t0\r", ":1: carriage return", -1, 0},
}

func TestMalformedFixtures(t *testing.T) {
	cases := fixtures

	for _, c := range cases {
		task := mustTask(t, c.task)
		dir := writeFixture(t, task.Dir, c.split, c.content)
		path := filepath.Join(dir, task.Dir, c.split+".tsv")
		ds, err := Load(dir, task, c.split, LoadOptions{})
		if c.wantErr == "" {
			if err != nil || len(ds.Examples) != c.rows {
				t.Errorf("%s: err %v rows %v", c.name, err, ds)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v, want %q naming %s", c.name, err, c.wantErr, path)
		}
		if c.skipped < 0 {
			continue
		}
		ds, err = Load(dir, task, c.split, LoadOptions{SkipBadRows: true})
		if c.rows == 0 { // every row skipped: no usable rows is an error too
			if err == nil || !strings.Contains(err.Error(), "no usable rows") || !strings.Contains(err.Error(), path) {
				t.Errorf("%s with SkipBadRows: error %v, want \"no usable rows\" naming %s", c.name, err, path)
			}
			continue
		}
		if err != nil || ds.Skipped != c.skipped || len(ds.Examples) != c.rows || len(ds.SkipErrors) != c.skipped {
			t.Errorf("%s with SkipBadRows: err %v skipped %d rows %d, want %d / %d", c.name, err, ds.Skipped, len(ds.Examples), c.skipped, c.rows)
		}
	}
	// Quotes kept verbatim; CRLF stripped; index falls back to the row number.
	task := mustTask(t, "mrpc")
	dir := writeFixture(t, "MRPC", "dev", cases[0].content)
	ds, _ := Load(dir, task, "dev", LoadOptions{})
	if e := ds.Examples[0]; e.TextA != "a \"b" || e.TextB != "c" || e.Label != 1 || e.Index != 0 || e.Line != 2 || ds.Examples[1].Index != 1 {
		t.Errorf("fixture row: %+v", e)
	}
	// Skipped rows keep their row number for later indices.
	dir = writeFixture(t, "SST-2", "train", "sentence\tlabel\na\tx\nb\t1\n")
	ds, _ = Load(dir, mustTask(t, "sst2"), "train", LoadOptions{SkipBadRows: true})
	if len(ds.Examples) != 1 || ds.Examples[0].Index != 1 || ds.Examples[0].Line != 3 {
		t.Errorf("after a skipped row: %+v", ds.Examples)
	}
}

func approx(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestMetricsHandComputed(t *testing.T) {
	p := []int{1, 1, 0, 0, 1, 0, 1, 0}
	l := []int{1, 0, 0, 1, 1, 0, 1, 1}
	// TP=3 (0,4,6) FP=1 (1) FN=2 (3,7) TN=2 (2,5)
	acc, _ := Accuracy(p, l)
	f1, _ := F1(p, l)
	mcc, _ := Matthews(p, l)
	if acc != 5.0/8 {
		t.Errorf("accuracy %v, want 0.625", acc)
	}
	if !approx(f1, 6.0/9, 1e-15) { // 2*3 / (6+1+2)
		t.Errorf("f1 %v, want %v", f1, 6.0/9)
	}
	wantMCC := (3.0*2 - 1.0*2) / math.Sqrt(4*5*3*4) // (TP*TN-FP*FN)/sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN))
	if !approx(mcc, wantMCC, 1e-15) {
		t.Errorf("mcc %v, want %v", mcc, wantMCC)
	}
	if f, _ := F1([]int{0, 0}, []int{0, 0}); f != 0 {
		t.Errorf("F1 without positives = %v", f)
	}
	if m, _ := Matthews([]int{1, 1, 1}, []int{0, 1, 1}); m != 0 {
		t.Errorf("MCC with constant preds = %v, want 0", m)
	}
	if m, _ := Matthews([]int{0, 1, 0, 1}, []int{1, 0, 1, 0}); !approx(m, -1, 1e-15) {
		t.Errorf("MCC all wrong = %v, want -1", m)
	}
	if _, err := Accuracy([]int{1}, []int{1, 0}); err == nil {
		t.Error("length mismatch accepted")
	}
	if _, err := F1(nil, nil); err == nil {
		t.Error("empty input accepted")
	}
}

func TestCorrelations(t *testing.T) {
	x := []float64{1, 2, 3, 4, 5}
	y := []float64{2, 4, 5, 4, 5}
	// Hand: mx=3, my=4; dx=-2..2; dy=-2,0,1,0,1; sxy=4+0+0+0+2=6; sxx=10; syy=6.
	r, _ := Pearson(x, y)
	if want := 6 / math.Sqrt(60); !approx(r, want, 1e-15) {
		t.Errorf("pearson %v, want %v", r, want)
	}
	// Ranks with ties: y -> 1, 2.5, 4.5, 2.5, 4.5
	ry := Ranks(y)
	for i, w := range []float64{1, 2.5, 4.5, 2.5, 4.5} {
		if ry[i] != w {
			t.Fatalf("ranks %v", ry)
		}
	}
	// Spearman = pearson(1..5, ranks): d = -2,-1.5,.5,-1.5,.5 ; sxy = 4+0+0+... computed:
	// dx=-2,-1,0,1,2 ; dry=-2,-.5,1.5,-.5,1.5 ; sxy=4+.5+0-.5+3=7 ; sxx=10 ; syy=4+.25+2.25+.25+2.25=9
	s, _ := Spearman(x, y)
	if want := 7 / math.Sqrt(90); !approx(s, want, 1e-15) {
		t.Errorf("spearman %v, want %v", s, want)
	}
	if s, _ := Spearman([]float64{1, 2, 3}, []float64{10, 100, 1000}); s != 1 {
		t.Errorf("monotone spearman %v", s)
	}
	if r, _ := Pearson([]float64{1, 1}, []float64{1, 2}); !math.IsNaN(r) {
		t.Errorf("constant pearson %v, want NaN", r)
	}
	if _, err := Pearson([]float64{1, math.NaN()}, []float64{1, 2}); err == nil {
		t.Error("NaN accepted")
	}
}

func TestCompute(t *testing.T) {
	m, err := Compute(mustTask(t, "mrpc"), []float64{1, 1, 0, 0}, []float64{1, 0, 0, 1})
	if err != nil || m["accuracy"] != 0.5 || m["f1"] != 0.5 || len(m) != 2 {
		t.Errorf("mrpc compute %v %v", m, err)
	}
	v, name, _ := SelectionMetric(mustTask(t, "mrpc"), []float64{1, 1, 0, 0}, []float64{1, 1, 0, 1})
	if name != "f1" || !approx(v, 0.8, 1e-15) {
		t.Errorf("mrpc selection %s=%v, want f1=0.8", name, v)
	}
	m, err = Compute(mustTask(t, "stsb"), []float64{1, 2, 3, 4, 5}, []float64{2, 4, 5, 4, 5})
	if err != nil || !approx(m["pearson"], 6/math.Sqrt(60), 1e-15) || !approx(m["spearmanr"], 7/math.Sqrt(90), 1e-15) {
		t.Errorf("stsb compute %v %v", m, err)
	}
	v, name, _ = SelectionMetric(mustTask(t, "stsb"), []float64{1, 2, 3, 4, 5}, []float64{2, 4, 5, 4, 5})
	if name != "spearmanr" || v != m["spearmanr"] {
		t.Errorf("stsb selection %s=%v", name, v)
	}
	v, name, _ = SelectionMetric(mustTask(t, "rte"), []float64{0, 1, 1}, []float64{0, 1, 0})
	if name != "accuracy" || !approx(v, 2.0/3, 1e-15) {
		t.Errorf("rte selection %s=%v", name, v)
	}
	if _, err := Compute(mustTask(t, "sst2"), []float64{0.5}, []float64{1}); err == nil {
		t.Error("non-integral class accepted")
	}
	if _, err := Compute(mustTask(t, "sst2"), []float64{2}, []float64{1}); err == nil {
		t.Error("class 2 accepted for a binary task")
	}
	if got := Argmax([]float32{0.1, 0.9, 2, -1, 3, 3}, 2); got[0] != 1 || got[1] != 0 || got[2] != 0 {
		t.Errorf("argmax %v", got)
	}
}

func TestWritePredictions(t *testing.T) {
	var b bytes.Buffer
	if err := WritePredictions(&b, mustTask(t, "rte"), []int{0, 1, 2}, []float64{0, 1, 0}); err != nil {
		t.Fatal(err)
	}
	if want := "index\tprediction\n0\tentailment\n1\tnot_entailment\n2\tentailment\n"; b.String() != want {
		t.Errorf("rte:\n%q\nwant\n%q", b.String(), want)
	}
	b.Reset()
	WritePredictions(&b, mustTask(t, "stsb"), []int{5, 6}, []float64{3.14159, -0.2})
	if want := "index\tprediction\n5\t3.142\n6\t-0.200\n"; b.String() != want {
		t.Errorf("stsb: %q", b.String())
	}
	b.Reset()
	WritePredictions(&b, mustTask(t, "sst2"), []int{0}, []float64{1})
	if b.String() != "index\tprediction\n0\t1\n" {
		t.Errorf("sst2: %q", b.String())
	}
	if err := WritePredictions(&b, mustTask(t, "qnli"), []int{0}, []float64{2}); err == nil {
		t.Error("class 2 accepted")
	}
	if err := WritePredictions(&b, mustTask(t, "stsb"), []int{0}, []float64{math.NaN()}); err == nil {
		t.Error("NaN accepted")
	}
	if err := WritePredictions(&b, mustTask(t, "sst2"), []int{0, 1}, []float64{1}); err == nil {
		t.Error("length mismatch accepted")
	}
}

func makeZip(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, content := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(content))
	}
	zw.Close()
	return buf.Bytes()
}

func TestDownloadZip(t *testing.T) {
	rte := makeZip(t, map[string]string{
		"RTE/train.tsv": "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\tc\td\tnot_entailment\n",
		"RTE/dev.tsv":   "index\tsentence1\tsentence2\tlabel\n0\te\tf\tentailment\n",
		"RTE/test.tsv":  "index\tsentence1\tsentence2\n0\tg\th\n",
	})
	qnliNoTest := makeZip(t, map[string]string{"QNLI/train.tsv": "x", "QNLI/dev.tsv": "y"})
	evil := makeZip(t, map[string]string{"SST-2/../../evil.tsv": "x"})
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits[r.URL.Path]++
		switch r.URL.Path {
		case "/glue/RTE.zip":
			w.Write(rte)
		case "/glue/QNLIv2.zip":
			w.Write(qnliNoTest)
		case "/glue/SST-2.zip":
			w.Write(evil)
		case "/glue/STS-B.zip":
			w.Write([]byte("not a zip"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	cache := t.TempDir()
	ctx := context.Background()
	if err := Download(ctx, srv.URL+"/glue", "rte", cache); err != nil {
		t.Fatal(err)
	}
	ds, err := Load(cache, mustTask(t, "rte"), "train", LoadOptions{})
	if err != nil || len(ds.Examples) != 2 || ds.Examples[1].Label != 1 {
		t.Fatalf("load downloaded rte: %v %v", ds, err)
	}
	if err := Download(ctx, srv.URL+"/glue", "RTE", cache); err != nil || hits["/glue/RTE.zip"] != 1 {
		t.Errorf("second download should be a no-op: err %v hits %d", err, hits["/glue/RTE.zip"])
	}
	for _, c := range []struct{ task, want string }{
		{"qnli", "no test.tsv"},
		{"sst2", "escapes"},
		{"stsb", "zip"},
		{"mrpc", "404"},
		{"cola", "unknown task"},
	} {
		err := Download(ctx, srv.URL+"/glue", c.task, cache)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("download %s: error %v, want %q", c.task, err, c.want)
		}
	}
	// Failed downloads leave no task directory and no partial directory behind.
	entries, _ := os.ReadDir(cache)
	if len(entries) != 1 || entries[0].Name() != "RTE" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("cache holds %v, want only RTE", names)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(cache), "evil.tsv")); err == nil {
		t.Error("zip-slip entry was written")
	}
}

// TestDownloadMRPC serves the original MSR files and checks that the formatted train/dev/test
// match the GLUE files byte for byte.
func TestDownloadMRPC(t *testing.T) {
	needGLUE(t)
	orig := filepath.Join(realGLUE, "MRPC", "original")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := filepath.Base(r.URL.Path)
		if name == "mrpc_dev_ids.tsv" {
			name = "dev_ids.tsv"
		}
		http.ServeFile(w, r, filepath.Join(orig, name))
	}))
	defer srv.Close()
	cache := t.TempDir()
	if err := Download(context.Background(), srv.URL, "mrpc", cache); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"train", "dev", "test"} {
		got, _ := os.ReadFile(filepath.Join(cache, "MRPC", s+".tsv"))
		want, _ := os.ReadFile(filepath.Join(realGLUE, "MRPC", s+".tsv"))
		if !bytes.Equal(got, want) {
			t.Errorf("MRPC %s.tsv differs from the GLUE file (%d vs %d bytes)", s, len(got), len(want))
		}
	}
}
