package main

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReportFrontier: `nvdp report DIR --plots` on a target-epsilon sweep
// with a gaussian variant and a baseline prints the frontier table and
// writes <task>_frontier_certified.{png,svg}; --format csv carries the
// frontier columns.
func TestReportFrontier(t *testing.T) {
	dir := t.TempDir()
	write := func(rel string, rep map[string]any) {
		d := filepath.Join(dir, rel)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "report.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cell := func(variant string, cmu, eps, acc, bdp float64) map[string]any {
		r := map[string]any{"task": "sst2", "variant": variant, "mode": "principled", "encoder": "scratch:bert-tiny", "seed": 1,
			"utility": map[string]any{"accuracy": acc}, "seconds": 60.0,
			"collapse": map[string]any{"metric": "accuracy", "chance": 0.5092}}
		if variant != "baseline" {
			r["c_mu"] = cmu
			r["privacy"] = map[string]any{"mode": "principled", "order": 1.1, "delta": 1e-5, "rd_max": eps / 2, "rd_mean": eps / 8,
				"bdp_epsilon": bdp, "invalid_pairs": 0, "pairs": 12,
				"certified": map[string]any{"label": "certified", "order": 1.1, "delta": 1e-5, "rd_certified": eps / 2, "epsilon": eps,
					"bdp_epsilon_certified": eps, "finite": true}}
		}
		return r
	}
	write("sst2/baseline/seed=1", cell("baseline", 0, 0, 0.9, 0))
	write("sst2/gaussian/epsilon=4/seed=1", cell("gaussian", 1, 4, 0.7, 4.4))
	write("sst2/gaussian/epsilon=16/seed=1", cell("gaussian", 2, 16, 0.8, 17))
	plots := filepath.Join(t.TempDir(), "plots")
	out, err := runCmd(newReportCmd(), dir, "--plots", "--plots-dir", plots)
	if err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	for _, w := range []string{"Certified privacy-utility frontier (dev Accuracy; figure sst2_frontier_certified)",
		"| Gaussian mechanism | 16 | – | 1 | 80.0 | 16.00 | 8 | C=2 | 8 | 17.00 | 60 | yes |",
		"| Non-private baseline | – | – | 1 | 90.0 | – | – | – | – | – | 60 | – |",
		"Chance level (majority class, report.json collapse): 50.9."} {
		if !strings.Contains(out, w) {
			t.Errorf("report output lacks %q:\n%s", w, out)
		}
	}
	for _, ext := range []string{"png", "svg"} {
		if st, err := os.Stat(filepath.Join(plots, "sst2_frontier_certified."+ext)); err != nil || st.Size() < 2000 {
			t.Errorf("sst2_frontier_certified.%s: %v", ext, err)
		}
	}
	csvOut := filepath.Join(t.TempDir(), "t.csv")
	if out, err := runCmd(newReportCmd(), dir, "--format", "csv", "--out", csvOut); err != nil {
		t.Fatalf("report csv: %v\n%s", err, out)
	}
	f, err := os.Open(csvOut)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 || recs[0][26] != "target_epsilon" || strings.Join(recs[3][26:], ",") != "16,C,2,60,0,0.5092,true" {
		t.Errorf("CSV %v", recs)
	}
}

// TestReportOutFile: a bad --format is refused before any file is written
// (it used to leave an empty --out behind), and --out into a directory that
// does not exist yet creates it and writes the tables whole.
func TestReportOutFile(t *testing.T) {
	dir := t.TempDir()
	d := filepath.Join(dir, "sst2", "baseline", "seed=1")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	rep := `{"task": "sst2", "variant": "baseline", "mode": "principled", "encoder": "scratch:bert-tiny", "seed": 1,
		"utility": {"accuracy": 0.9}, "seconds": 60, "collapse": {"metric": "accuracy", "chance": 0.5092}}`
	if err := os.WriteFile(filepath.Join(d, "report.json"), []byte(rep), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, format, out string
		wantErr, wantFile string // wantFile: a line the written file must hold ("" = no file)
	}{
		{"bad format", "xml", "bad/t.xml", `--format "xml": want md, csv or json`, ""},
		{"new directory, md", "md", "new/sub/t.md", "", "| Non-private baseline | – | 1 | 90.0 |"},
		{"new directory, json", "json", "new2/t.json", "", `"group": "Non-private baseline"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), tc.out)
			msg, err := runCmd(newReportCmd(), dir, "--format", tc.format, "--out", out)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if _, err := os.Stat(filepath.Dir(out)); !os.IsNotExist(err) {
					t.Errorf("a refused --format created %s (stat: %v)", filepath.Dir(out), err)
				}
				return
			}
			if err != nil {
				t.Fatalf("report: %v\n%s", err, msg)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), tc.wantFile) {
				t.Errorf("%s lacks %q:\n%s", out, tc.wantFile, b)
			}
			ents, err := os.ReadDir(filepath.Dir(out))
			if err != nil || len(ents) != 1 {
				t.Errorf("directory of --out holds %v (%v), want the one file", ents, err)
			}
		})
	}
}

// TestReportPartialSweep: `nvdp report` over a sweep whose sweep.json lists
// a cell without report.json fails naming the cell and --allow-partial;
// with --allow-partial it writes the tables with the cell named above them.
func TestReportPartialSweep(t *testing.T) {
	dir := t.TempDir()
	d := filepath.Join(dir, "sst2", "baseline", "seed=1")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	rep := `{"task": "sst2", "variant": "baseline", "mode": "principled", "encoder": "scratch:bert-tiny", "seed": 1, "utility": {"accuracy": 0.9}}`
	man := `{"cells": [{"id": "sst2/baseline/seed=1", "status": "done"}, {"id": "sst2/baseline/seed=2", "status": "failed"}]}`
	for p, s := range map[string]string{filepath.Join(d, "report.json"): rep, filepath.Join(dir, "sweep.json"): man} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
		wantOut string
	}{
		{"refused", nil, "1 cell without report.json: sst2/baseline/seed=2 (failed); finish the sweep, or report the others as a partial sweep (--allow-partial reports them)", ""},
		{"allowed", []string{"--allow-partial"}, "", "Partial sweep: 1 cell of its sweep.json without report.json, left out: sst2/baseline/seed=2 (failed)."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "t.md")
			_, err := runCmd(newReportCmd(), append([]string{dir, "--out", out}, tc.args...)...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(out)
			if err != nil || !strings.Contains(string(b), tc.wantOut) {
				t.Errorf("tables (%v) lack %q:\n%s", err, tc.wantOut, b)
			}
		})
	}
}
