package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/attack"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/release"
)

// learnedFixtures writes an inversion and an attribute report of the model
// in dir (variant gaussian, certified epsilon eps) under root/attacks/name.
func learnedFixtures(t *testing.T, root, name, dir string, eps float64) {
	t.Helper()
	setup := attack.Setup{Model: release.ModelInfo{Dir: dir, Task: "sst2", Variant: nvib.ModelGaussian},
		Certified: &privacy.Guarantee{Epsilon: jsonfloat.Float(eps), Delta: 1e-5}}
	inv := &attack.InvertReport{Setup: setup, Results: []attack.InvertResult{
		{Features: attack.FeaturesNone, Decoder: attack.DecoderMajority, TokenScores: attack.TokenScores{Accuracy: 0.04, F1: 0.05}},
		{Features: attack.FeaturesRelease, Decoder: attack.DecoderNearest, TokenScores: attack.TokenScores{Accuracy: 0.01, F1: 0.1},
			AccuracyCI: [2]float64{0.005, 0.015}, F1CI: [2]float64{0.09, 0.11}, Shuffled: attack.TokenScores{Accuracy: 0.007, F1: 0.096}},
		{Features: attack.FeaturesEncoder, Decoder: attack.DecoderNearest, TokenScores: attack.TokenScores{Accuracy: 0.5, F1: 0.51}},
		{Features: attack.FeaturesRelease, Decoder: attack.ModelMLP, TokenScores: attack.TokenScores{Accuracy: 0.02, F1: 0.19},
			AccuracyCI: [2]float64{0.018, 0.022}, F1CI: [2]float64{0.18, 0.2}, Shuffled: attack.TokenScores{Accuracy: 0.02, F1: 0.191}},
		{Features: attack.FeaturesEncoder, Decoder: attack.ModelMLP, TokenScores: attack.TokenScores{Accuracy: 0.58, F1: 0.57}},
	}}
	attr := &attack.AttributeReport{Setup: setup, Property: attack.Property{Name: attack.PropertyName}, CertifiedAUC: attack.CertifiedAUC(eps, 1e-5),
		Results: []attack.AttributeResult{
			{Features: attack.FeaturesNone, Classifier: attack.ClassifierMajority, Accuracy: 0.94, AUC: 0.5},
			{Features: attack.FeaturesRelease, Classifier: attack.ModelLinear, Accuracy: 0.93, AccuracyCI: [2]float64{0.92, 0.95}, AUC: 0.6, AUCCI: [2]float64{0.52, 0.68}},
			{Features: attack.FeaturesEncoder, Classifier: attack.ModelLinear, Accuracy: 0.95, AUC: 0.7},
		}}
	sub := filepath.Join(root, "attacks", name)
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for file, r := range map[string]any{attack.InvertFile: inv, "attack_attribute_name.json": attr} {
		if err := atomicfile.WriteJSON(filepath.Join(sub, file), r); err != nil {
			t.Fatal(err)
		}
	}
}

// The learned attacks' reports under a directory are found by name, placed
// by the cell of their model and turned into one point per attacker and
// metric with its references; the tables (md, csv, json) carry them, and
// the figures beside the frontier are written, PNG and SVG.
func TestLearnedAttacks(t *testing.T) {
	root := t.TempDir()
	cellDir := filepath.Join(root, "sst2", "gaussian", "epsilon=8", "seed=2")
	learnedFixtures(t, root, "a", cellDir, 8)
	learnedFixtures(t, root, "b", filepath.Join(root, "elsewhere"), 32)
	if err := os.WriteFile(filepath.Join(root, "attacks", "other.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	cells := []*runCell{{Dir: cellDir, Task: "sst2", Variant: nvib.ModelGaussian, Seed: 2, TargetEpsilon: 8}}
	pts, err := loadLearned(root, cells)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		attack, attacker, metric string
		seed                     uint64
		target, cert             float64
		release, lo, encoder     float64
		chance, bound            float64
	}
	nan := math.NaN()
	auc8, auc32 := attack.CertifiedAUC(8, 1e-5), attack.CertifiedAUC(32, 1e-5)
	// Invert first, then by certified epsilon; within a report in its result order.
	wants := []want{
		{"invert", "nn", metricTokenF1, 2, 8, 8, 0.1, 0.09, 0.51, 0.096, nan},
		{"invert", "nn", metricAccuracy, 2, 8, 8, 0.01, 0.005, 0.5, 0.04, nan},
		{"invert", "mlp", metricTokenF1, 2, 8, 8, 0.19, 0.18, 0.57, 0.191, nan},
		{"invert", "mlp", metricAccuracy, 2, 8, 8, 0.02, 0.018, 0.58, 0.04, nan},
		{"invert", "nn", metricTokenF1, 0, 0, 32, 0.1, 0.09, 0.51, 0.096, nan},
		{"invert", "nn", metricAccuracy, 0, 0, 32, 0.01, 0.005, 0.5, 0.04, nan},
		{"invert", "mlp", metricTokenF1, 0, 0, 32, 0.19, 0.18, 0.57, 0.191, nan},
		{"invert", "mlp", metricAccuracy, 0, 0, 32, 0.02, 0.018, 0.58, 0.04, nan},
		{"attribute", "linear", metricAUC, 2, 8, 8, 0.6, 0.52, 0.7, 0.5, auc8},
		{"attribute", "linear", metricAccuracy, 2, 8, 8, 0.93, 0.92, 0.95, 0.94, nan},
		{"attribute", "linear", metricAUC, 0, 0, 32, 0.6, 0.52, 0.7, 0.5, auc32},
		{"attribute", "linear", metricAccuracy, 0, 0, 32, 0.93, 0.92, 0.95, 0.94, nan},
	}
	if len(pts) != len(wants) {
		t.Fatalf("%d points, want %d: %+v", len(pts), len(wants), pts)
	}
	same := func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }
	for i, w := range wants {
		p := pts[i]
		if p.Attack != w.attack || p.Attacker != w.attacker || p.Metric != w.metric || p.Seed != w.seed || p.TargetEpsilon != w.target ||
			float64(p.Certified) != w.cert || p.Release != w.release || p.ReleaseCI[0] != w.lo || float64(p.Encoder) != w.encoder ||
			!same(p.Chance(), w.chance) || !same(float64(p.Bound), w.bound) || p.Task != "sst2" || p.Variant != nvib.ModelGaussian {
			t.Errorf("point %d: %+v (chance %g), want %+v", i, p, p.Chance(), w)
		}
	}
	if auc8 >= auc32 || auc32 > 1 || auc8 <= 0.9 {
		t.Errorf("certified AUC %g at epsilon 8, %g at 32", auc8, auc32)
	}

	tb := &Tables{Tasks: []*taskTable{{Task: "sst2"}}, Learned: pts}
	var js struct {
		Learned []struct {
			Attack, Metric     string
			Shuffled, Majority jsonfloat.Float
		} `json:"learned_attacks"`
	}
	md, recs := tableOutputs(t, tb, &js)
	for _, w := range []string{
		"| Gaussian mechanism | 8 | 8 | 2 | mlp | 0.190 [0.180, 0.200] | 0.570 | 0.191 | 0.020 [0.018, 0.022] | 0.580 | 0.040 |",
		"| Gaussian mechanism | – | 32 | 0 | nn | 0.100 [0.090, 0.110] | 0.510 | 0.096 | 0.010 [0.005, 0.015] | 0.500 | 0.040 |",
		"| Gaussian mechanism | 8 | 8 | 2 | linear | 0.600 [0.520, 0.680] | 0.700 | 0.500 | " + fmt.Sprintf("%.3f", auc8) + " | 0.930 [0.920, 0.950] | 0.950 | 0.940 |",
		"figure sst2_frontier_invert", "figure sst2_frontier_attribute", "of the property name",
	} {
		if !strings.Contains(md, w) {
			t.Errorf("markdown lacks %q\n%s", w, md)
		}
	}
	if len(recs) != 1+len(pts) || len(recs[0]) != 33+len(learnedCSVHeader) {
		t.Fatalf("%d CSV lines of %d columns", len(recs), len(recs[0]))
	}
	if h := strings.Join(recs[0][33:36], ","); h != "attack,attack_property,attack_seed" {
		t.Errorf("CSV attack header %s", h)
	}
	line := recs[9] // the attribute's AUC at epsilon 8
	if got := strings.Join(append([]string{line[0], line[1], line[22], line[26]}, line[33:45]...), ","); got !=
		"sst2,gaussian,8,8,attribute,name,2,linear,auc,0.6,0.52,0.68,0.7,NaN,0.5,"+strconv.FormatFloat(auc8, 'g', -1, 64) {
		t.Errorf("CSV attribute line %s", got)
	}
	if line[2] != "" || line[7] != "" || !strings.HasSuffix(line[45], "attack_attribute_name.json") {
		t.Errorf("CSV attribute line %q", line)
	}

	if len(js.Learned) != len(pts) || js.Learned[8].Metric != metricAUC || !math.IsNaN(float64(js.Learned[8].Shuffled)) || js.Learned[8].Majority != 0.5 {
		t.Errorf("JSON learned attacks %+v", js.Learned)
	}

	dir := t.TempDir()
	for _, a := range []string{attack.AttackInvert, attack.AttackAttribute} {
		files, err := plotLearnedFrontier(&taskTable{Task: "sst2"}, a, pts, filepath.Join(dir, a))
		if err != nil || len(files) != 2 {
			t.Fatalf("%s plots %v: %v", a, files, err)
		}
		for _, f := range files {
			if st, err := os.Stat(f); err != nil || st.Size() == 0 {
				t.Errorf("%s: %v", f, err)
			}
		}
		if files, err := plotLearnedFrontier(&taskTable{Task: "mrpc"}, a, pts, filepath.Join(dir, "none")); err != nil || len(files) != 0 {
			t.Errorf("%s: a task without points: %v, %v", a, files, err)
		}
	}
	if _, err := plotLearnedFrontier(&taskTable{Task: "sst2"}, attack.AttackDistinguish, pts, filepath.Join(dir, "x")); err == nil {
		t.Error("the distinguishing attack is not a learned one")
	}
	files, err := WritePlots(tb, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"sst2_frontier_invert.png", "sst2_frontier_attribute.svg"} {
		if !strings.Contains(strings.Join(files, " "), w) {
			t.Errorf("WritePlots wrote %v, not %s", files, w)
		}
	}

	bad := filepath.Join(root, "attacks", "c")
	if err := os.MkdirAll(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, "attack_invert_broken.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadLearned(root, cells); err == nil || !strings.Contains(err.Error(), "attack_invert_broken.json") {
		t.Errorf("a broken report: %v", err)
	}
}

// A point whose numbers are not finite (a pair that is not mean-only has no
// Gaussian-mechanism epsilon; a report without clip constants no certified
// one) is written to the JSON tables as jsonfloat's "NaN", not refused.
func TestDistinguishPointJSON(t *testing.T) {
	pt := distinguishPoint{attackModel: attackModel{Task: "sst2", Certified: jsonfloat.Float(math.NaN())}, Kind: attack.PairRandom,
		LowerBound: 1.5, Gaussian: jsonfloat.Float(math.NaN()), Pair: jsonfloat.Float(math.Inf(1))}
	var b bytes.Buffer
	if err := writeJSON(&b, &Tables{Distinguish: []distinguishPoint{pt}}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`"Certified": "NaN"`, `"Gaussian": "NaN"`, `"Pair": "Infinity"`, `"LowerBound": 1.5`} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("JSON lacks %s:\n%s", w, b.String())
		}
	}
}

// tableOutputs are the markdown and the CSV records (one width for every
// line, or the test fails) of tb; its JSON is decoded into js.
func tableOutputs(t *testing.T, tb *Tables, js any) (string, [][]string) {
	t.Helper()
	var md strings.Builder
	if err := writeMarkdown(&md, tb); err != nil {
		t.Fatal(err)
	}
	var cb bytes.Buffer
	if err := writeCSV(&cb, tb); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&cb).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var jb bytes.Buffer
	if err := writeJSON(&jb, tb); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(jb.Bytes(), js); err != nil {
		t.Fatal(err)
	}
	return md.String(), recs
}
