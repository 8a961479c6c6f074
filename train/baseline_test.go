package train

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadBaseline(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stored := `{"task":"sst2","variant":"baseline","split":"dev","metric":"accuracy","values":[0.80,0.81,0.83],"seeds":[1,2,3],"command":"nvdp run --seed S"}`
	run := `{"task":"sst2","variant":"baseline","utility":{"accuracy":0.812,"loss":0.4}}`
	for _, tc := range []struct {
		name, body, task string
		source           string
		mean, sd         float64
		err              string
	}{
		{"stored.json", stored, "sst2", "stored", 0.8133333333333334, 0.015275252316519468, ""},
		{"run.json", run, "sst2", "run", 0.812, 0, ""},
		{"task.json", stored, "mrpc", "", 0, 0, `task "sst2", want "mrpc"`},
		{"variant.json", strings.Replace(run, `"baseline"`, `"nvdp-clipped"`, 1), "sst2", "", 0, 0, `variant "nvdp-clipped"`},
		{"metric.json", strings.Replace(stored, `"accuracy"`, `"f1"`, 1), "sst2", "", 0, 0, `metric "f1"`},
		{"seeds.json", strings.Replace(stored, `[1,2,3]`, `[1,2]`, 1), "sst2", "", 0, 0, "2 seeds for 3 values"},
		{"empty.json", strings.Replace(strings.Replace(stored, `[0.80,0.81,0.83]`, `[]`, 1), `[1,2,3]`, `[]`, 1), "sst2", "", 0, 0, "no values"},
		{"nometric.json", `{"task":"sst2","variant":"baseline","utility":{"loss":0.4}}`, "sst2", "", 0, 0, `utility has no "accuracy"`},
		{"neither.json", `{"task":"sst2"}`, "sst2", "", 0, 0, "neither a stored baseline"},
		{"trunc.json", stored[:40], "sst2", "", 0, 0, "unexpected end of JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := LoadBaseline(write(tc.name, tc.body), tc.task)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), tc.name) {
					t.Fatalf("err = %v, want one naming the file and %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Source != tc.source || math.Abs(c.Mean-tc.mean) > 1e-12 || math.Abs(c.SD-tc.sd) > 1e-12 {
				t.Fatalf("got %+v, want source %s mean %v sd %v", c, tc.source, tc.mean, tc.sd)
			}
		})
	}
	if _, err := LoadBaseline(filepath.Join(dir, "missing.json"), "sst2"); err == nil {
		t.Fatal("missing file: no error")
	}
}

// TestRunPipelineBaselineFirst: a bad baseline file stops the pipeline
// before any work (no model directory is written).
func TestRunPipelineBaselineFirst(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "b.json")
	if err := os.WriteFile(bad, []byte(`{"task":"mrpc","variant":"baseline","metric":"f1","values":[0.8],"seeds":[1]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	glueDir, vocab := synthGlue(t, 16, 8)
	po := DefaultPipelineOptions()
	po.Train, po.Baseline = synthOptions(t, glueDir, vocab, out), bad
	_, err := RunPipeline(t.Context(), TextPipeline(), po, nil)
	if err == nil || !strings.Contains(err.Error(), `task "mrpc", want "sst2"`) {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("%s written before the baseline was checked (%v)", out, err)
	}
}

// TestLoadBaselineNonFinite: a baseline run report's utility is read with
// the report's own decoder: "NaN" (written now) and null (before) are NaN,
// rejected by name (before: null read as 0, a baseline of 0; "NaN" failed
// to decode).
func TestLoadBaselineNonFinite(t *testing.T) {
	for _, v := range []string{`"NaN"`, "null"} {
		p := filepath.Join(t.TempDir(), "report.json")
		if err := os.WriteFile(p, []byte(`{"task":"sst2","variant":"baseline","utility":{"accuracy":`+v+`}}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadBaseline(p, "sst2"); err == nil || !strings.Contains(err.Error(), "value 0 is NaN") {
			t.Errorf("accuracy %s: error %v", v, err)
		}
	}
}
