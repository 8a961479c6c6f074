package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/model"
)

// frontierCell is a report.json of a cell of a `--target-epsilons` sweep:
// utility, a principled audit with the certified block (eps nil: an
// unbounded clipping, certified +Inf), wall time and the collapse block.
func frontierCell(task, variant string, lambda, cmu float64, seed int, util map[string]any, rdMax, bdp float64, eps any,
	secs, chance float64) map[string]any {
	p := priv("principled", rdMax, rdMax/4, bdp, 0)
	if eps == nil {
		p["certified"] = certBlock(nil, nil, nil, false, "C_mu unbounded")
	} else {
		e := eps.(float64)
		p["certified"] = certBlock(e/2, e, e*1.05, true, "")
	}
	r := cellRep(task, variant, lambda, cmu, seed, util, p)
	if variant == "gaussian" {
		delete(r, "lambda") // a gaussian report may carry no lambda
	}
	r["seconds"] = secs
	metric := glue.MetricAccuracy
	if task == "stsb" {
		metric = glue.MetricSpearman
	}
	r["collapse"] = map[string]any{"metric": metric, "value": util[metric], "chance": chance, "at_chance": false}
	return r
}

// frontierFixtures: SST-2 with a baseline (2 seeds, chance 0.5092),
// nvdp-clipped calibrated to target epsilon 1, 4, 16, 64 (2 seeds each;
// train_options.json carries the target; epsilon 16 is dominated by 4),
// gaussian at the same targets (2 seeds each; no options file: the target
// comes from the epsilon=<E> directory; no lambda), and NVDP whose
// certified epsilon is +Inf (1 cell); STS-B (Spearman, chance 0) with a
// baseline and one cell of each private variant at epsilon 4.
func frontierFixtures(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	acc := func(v float64) map[string]any { return map[string]any{"accuracy": v} }
	const chance = 0.5092
	for i, v := range []struct{ acc, secs float64 }{{0.90, 100}, {0.92, 140}} {
		r := frontierCell("sst2", "baseline", 0, 0, i+1, acc(v.acc), 0, 0, 0.0, v.secs, chance)
		delete(r, "privacy") // the baseline has no privacy block
		writeReport(t, root, fmt.Sprintf("sst2/baseline/seed=%d", i+1), r)
	}
	type cfg struct {
		eps, cmu float64
		acc, bdp [2]float64
		rdMax    float64
		secs     [2]float64
	}
	for _, c := range []cfg{
		{1, 0.01, [2]float64{0.60, 0.64}, [2]float64{1.3, 1.5}, 0.4, [2]float64{200, 220}},
		{4, 0.05, [2]float64{0.70, 0.74}, [2]float64{4.5, 4.7}, 1.9, [2]float64{200, 220}},
		{16, 0.2, [2]float64{0.69, 0.69}, [2]float64{17, 18}, 7.9, [2]float64{200, 220}},
		{64, 0.8, [2]float64{0.80, 0.82}, [2]float64{66, 70}, 31, [2]float64{200, 220}},
	} {
		for s := 0; s < 2; s++ {
			rel := fmt.Sprintf("sst2/nvdp-clipped/epsilon=%g/lambda=1e-2/seed=%d", c.eps, s+1)
			d := writeReport(t, root, rel, frontierCell("sst2", "nvdp-clipped", 0.01, c.cmu, s+1, acc(c.acc[s]), c.rdMax, c.bdp[s], c.eps, c.secs[s], chance))
			o := model.DefaultOptions()
			o.Task, o.GlueDir, o.Encoder, o.Vocab, o.Out = "sst2", "glue", "scratch:bert-tiny", "vocab.txt", d
			o.TargetEpsilon, o.CMu, o.Calibrated = c.eps, c.cmu, true
			o.Resolve()
			if err := model.SaveOptions(d, &o); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []cfg{
		{eps: 1, cmu: 0.5, acc: [2]float64{0.55, 0.57}, bdp: [2]float64{1.1, 1.1}, rdMax: 0.4, secs: [2]float64{150, 150}},
		{eps: 4, cmu: 1, acc: [2]float64{0.75, 0.77}, bdp: [2]float64{4.4, 4.4}, rdMax: 1.9, secs: [2]float64{150, 150}},
		{eps: 16, cmu: 2, acc: [2]float64{0.78, 0.80}, bdp: [2]float64{17.6, 17.6}, rdMax: 7.9, secs: [2]float64{150, 150}},
		{eps: 64, cmu: 4, acc: [2]float64{0.79, 0.81}, bdp: [2]float64{70.4, 70.4}, rdMax: 31, secs: [2]float64{150, 150}},
	} {
		for s := 0; s < 2; s++ {
			rel := fmt.Sprintf("sst2/gaussian/epsilon=%g/seed=%d", c.eps, s+1)
			writeReport(t, root, rel, frontierCell("sst2", "gaussian", 0, c.cmu, s+1, acc(c.acc[s]), c.rdMax, c.bdp[s], c.eps, c.secs[s], chance))
		}
	}
	writeReport(t, root, "sst2/nvdp/lambda=1e-2/seed=1", frontierCell("sst2", "nvdp", 0.01, 0, 1, acc(0.85), 300, 110, nil, 180, chance))

	sp := func(v float64) map[string]any {
		return map[string]any{glue.MetricPearson: v + 0.01, glue.MetricSpearman: v}
	}
	base := frontierCell("stsb", "baseline", 0, 0, 1, sp(0.84), 0, 0, 0.0, 90, 0)
	delete(base, "privacy")
	writeReport(t, root, "stsb/baseline/seed=1", base)
	writeReport(t, root, "stsb/nvdp-clipped/epsilon=4/lambda=1e-2/seed=1", frontierCell("stsb", "nvdp-clipped", 0.01, 0.05, 1, sp(0.50), 1.9, 4.6, 4.0, 95, 0))
	writeReport(t, root, "stsb/gaussian/epsilon=4/seed=1", frontierCell("stsb", "gaussian", 0, 1, 1, sp(0.60), 1.9, 4.4, 4.0, 80, 0))
	return root
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestFrontierFromFixtures: the certified frontier of a target-epsilon
// sweep with a gaussian variant, an unclipped (+Inf certified) row and a
// baseline: the rows' means and sds, the calibrated constants, which rows
// are on each variant's certified Pareto front, the chance level, the
// markdown, CSV and JSON tables and the figures.
func TestFrontierFromFixtures(t *testing.T) {
	root := frontierFixtures(t)
	cells, err := load(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) != 2+8+8+1+3 {
		t.Fatalf("%d cells", len(cells))
	}
	for _, c := range cells {
		want := 0.0
		if i := strings.Index(c.Dir, "epsilon="); i >= 0 {
			fmt.Sscanf(c.Dir[i+len("epsilon="):], "%g", &want)
		}
		if c.TargetEpsilon != want {
			t.Errorf("%s: target epsilon %g, want %g", c.Dir, c.TargetEpsilon, want)
		}
	}
	tb := build(cells, nil)
	if len(tb.Tasks) != 2 || tb.Tasks[0].Task != "sst2" || tb.Tasks[1].Task != "stsb" {
		t.Fatalf("tasks %v", tb.Tasks)
	}
	f := tb.Tasks[0].Frontier
	if f == nil {
		t.Fatal("sst2: no frontier")
	}
	if f.AuditMode != "principled" || f.Metric != "accuracy" || fmt.Sprint(f.Series) != "[NVDP NVDP-Clipped Gaussian mechanism]" ||
		len(f.Rows) != 9 || float64(f.Chance) != 0.5092 || float64(f.EmpiricalDelta) != 1e-5 {
		t.Fatalf("frontier: mode %q metric %q series %v rows %d chance %v delta %v", f.AuditMode, f.Metric, f.Series, len(f.Rows),
			f.Chance, f.EmpiricalDelta)
	}
	// Baseline: accuracy 0.90, 0.92.
	if b := f.Baseline; b == nil || !near(b.Utility.Mean, 0.91) || !near(b.Utility.Std, math.Sqrt(0.0002)) || b.Certified != nil ||
		!near(b.WallSeconds.Mean, 120) {
		t.Errorf("baseline %+v", f.Baseline)
	}
	type want struct {
		series      string
		eps         float64
		mean, sd    float64
		bdp, bdpSD  float64
		constName   string
		constVal    float64
		wall        float64
		pareto      bool
		shown       bool
		certEpsilon float64
	}
	byKey := map[string]*frontierEntry{}
	for _, fr := range f.Rows {
		byKey[fmt.Sprintf("%s/%g", fr.Series, fr.TargetEpsilon)] = fr
	}
	for _, w := range []want{
		// accuracy 0.60, 0.64: 0.62 ± 0.0283; BDP 1.3, 1.5: 1.4 ± 0.1414; wall 200, 220: 210.
		{"NVDP-Clipped", 1, 0.62, math.Sqrt(0.0008), 1.4, math.Sqrt(0.02), "C_mu", 0.01, 210, true, true, 1},
		{"NVDP-Clipped", 4, 0.72, math.Sqrt(0.0008), 4.6, math.Sqrt(0.02), "C_mu", 0.05, 210, true, true, 4},
		// 0.69 at epsilon 16 is below 0.72 at epsilon 4: dominated.
		{"NVDP-Clipped", 16, 0.69, 0, 17.5, math.Sqrt(0.5), "C_mu", 0.2, 210, false, true, 16},
		{"NVDP-Clipped", 64, 0.81, math.Sqrt(0.0002), 68, math.Sqrt(8), "C_mu", 0.8, 210, true, true, 64},
		{"Gaussian mechanism", 1, 0.56, math.Sqrt(0.0002), 1.1, 0, "C", 0.5, 150, true, true, 1},
		{"Gaussian mechanism", 4, 0.76, math.Sqrt(0.0002), 4.4, 0, "C", 1, 150, true, true, 4},
		{"Gaussian mechanism", 16, 0.79, math.Sqrt(0.0002), 17.6, 0, "C", 2, 150, true, true, 16},
		{"Gaussian mechanism", 64, 0.80, math.Sqrt(0.0002), 70.4, 0, "C", 4, 150, true, true, 64},
	} {
		fr := byKey[fmt.Sprintf("%s/%g", w.series, w.eps)]
		if fr == nil {
			t.Errorf("no row %s epsilon %g", w.series, w.eps)
			continue
		}
		ok := fr.Seeds == 2 && near(fr.Utility.Mean, w.mean) && near(fr.Utility.Std, w.sd) && near(fr.Empirical.BDP.Mean, w.bdp) &&
			near(fr.Empirical.BDP.Std, w.bdpSD) && fr.Empirical.Label == "empirical" && fr.Constant != nil &&
			fr.Constant.Name == w.constName && fr.Constant.Value == w.constVal && near(fr.WallSeconds.Mean, w.wall) &&
			fr.Pareto == w.pareto && fr.Shown == w.shown && fr.Certified.Epsilon.Mean == w.certEpsilon &&
			fr.Certified.RD.Mean == w.certEpsilon/2 && fr.Certified.Label == "certified"
		if !ok {
			t.Errorf("%s epsilon %g: %+v (utility %+v, empirical %+v, constant %+v, certified %+v)", w.series, w.eps, fr,
				fr.Utility, fr.Empirical, fr.Constant, fr.Certified)
		}
	}
	if fr := byKey["NVDP/0"]; fr == nil || fr.Shown || fr.Pareto || !math.IsInf(fr.Certified.Epsilon.Mean, 1) {
		t.Errorf("unclipped NVDP row %+v: want not shown, +Inf certified", fr)
	}
	if f.InfiniteCells != 1 || fmt.Sprint(f.NotShown) != "[NVDP λ=1e-2: certified ε infinite (1 cell: C_mu unbounded)]" {
		t.Errorf("not shown %q, %d infinite cells", f.NotShown, f.InfiniteCells)
	}
	if g := tb.Tasks[1].Frontier; g == nil || g.Metric != glue.MetricSpearman || float64(g.Chance) != 0 || len(g.Rows) != 2 ||
		!g.Rows[0].Pareto || !g.Rows[1].Pareto || !near(g.Baseline.Utility.Mean, 0.84) {
		t.Errorf("stsb frontier %+v", g)
	}

	var md bytes.Buffer
	if err := writeMarkdown(&md, tb); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		"| Model | Target ε | λ | Seeds | Accuracy | Certified ε (δ=1e-5) | Certified RD (order 1.1) | Calibrated constant | " +
			"RD max, empirical (principled) | BDP ε_μ estimate, empirical (principled, δ=1e-5) | Wall time, s | Pareto (certified) |",
		"| Non-private baseline | – | – | 2 | 91.0 ± 1.4 | – | – | – | – | – | 120 ± 28.3 | – |",
		"| NVDP | – | 1e-2 | 1 | 85.0 | inf | inf | – | 300 | 110.00 | 180 | not shown |",
		"| NVDP-Clipped | 1 | 1e-2 | 2 | 62.0 ± 2.8 | 1.00 | 0.5 | C_mu=0.01 | 0.4 ± 0 | 1.40 ± 0.14 | 210 ± 14.1 | yes |",
		"| NVDP-Clipped | 16 | 1e-2 | 2 | 69.0 ± 0.0 | 16.00 | 8 | C_mu=0.2 | 7.9 ± 0 | 17.50 ± 0.71 | 210 ± 14.1 | no |",
		"| Gaussian mechanism | 4 | – | 2 | 76.0 ± 1.4 | 4.00 | 2 | C=1 | 1.9 ± 0 | 4.40 ± 0.00 | 150 ± 0 | yes |",
		"Chance level (majority class, report.json collapse): 50.9.",
		"Not on the frontier plot (1 cell with certified ε = inf): NVDP λ=1e-2: certified ε infinite (1 cell: C_mu unbounded).",
		"| Model | Target ε | λ | Seeds | Spearman | Certified ε (δ=1e-5) |",
		"| Gaussian mechanism | 4 | – | 1 | 60.0 | 4.00 | 2 | C=1 | 1.9 | 4.40 | 80 | yes |",
		"Chance level (constant predictor, report.json collapse): 0.0.",
		// The main table names calibrated rows by their target.
		"| NVDP-Clipped (target ε=16) | 1e-2 | 2 | 69.0 ± 0.0 |",
		"| Gaussian mechanism (target ε=64) | – | 2 | 80.0 ± 1.4 |",
	} {
		if !strings.Contains(md.String(), w) {
			t.Errorf("markdown lacks %q", w)
		}
	}
	if t.Failed() {
		t.Logf("markdown:\n%s", md.String())
	}

	var cb bytes.Buffer
	if err := writeCSV(&cb, tb); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&cb).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if h := strings.Join(recs[0][26:], ","); h != "target_epsilon,calibrated_constant,calibrated_constant_value,wall_seconds_mean,wall_seconds_std,chance,pareto_certified" {
		t.Errorf("CSV frontier header %s", h)
	}
	wantCSV := map[string]string{
		"sst2/baseline/":       ",,,120,28.284271247461902,0.5092,",
		"sst2/nvdp/":           ",,,180,0,0.5092,",
		"sst2/nvdp-clipped/1":  "1,C_mu,0.01,210,14.142135623730951,0.5092,true",
		"sst2/nvdp-clipped/16": "16,C_mu,0.2,210,14.142135623730951,0.5092,false",
		"sst2/gaussian/64":     "64,C,4,150,0,0.5092,true",
		"stsb/gaussian/4":      "4,C,1,80,0,0,true",
	}
	seen := 0
	for _, r := range recs[1:] {
		k := r[0] + "/" + r[1] + "/" + r[26]
		if w, ok := wantCSV[k]; ok {
			seen++
			if got := strings.Join(r[26:], ","); got != w {
				t.Errorf("CSV %s frontier columns %q, want %q", k, got, w)
			}
		}
	}
	// stsb has two metrics: one line each.
	if seen != 7 {
		t.Errorf("%d CSV lines checked, want 7", seen)
	}

	var jb bytes.Buffer
	if err := writeJSON(&jb, tb); err != nil {
		t.Fatal(err)
	}
	var js struct {
		Tasks []struct {
			Frontier *struct {
				Chance        *float64 `json:"chance"`
				InfiniteCells int      `json:"infinite_cells"`
				Rows          []struct {
					Series    string  `json:"series"`
					Target    float64 `json:"target_epsilon"`
					Pareto    bool    `json:"pareto_certified"`
					Certified *struct {
						Label   string `json:"label"`
						Epsilon struct {
							Mean *jsonfloat.Float `json:"mean"`
						} `json:"epsilon"`
					} `json:"certified"`
					Empirical *struct {
						Label string `json:"label"`
					} `json:"empirical"`
					Constant *calibratedConstant `json:"calibrated_constant"`
				} `json:"rows"`
			} `json:"frontier"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(jb.Bytes(), &js); err != nil {
		t.Fatalf("JSON output: %v", err)
	}
	jf := js.Tasks[0].Frontier
	if jf == nil || *jf.Chance != 0.5092 || jf.InfiniteCells != 1 || len(jf.Rows) != 9 || !math.IsInf(float64(*jf.Rows[0].Certified.Epsilon.Mean), 1) ||
		jf.Rows[3].Series != "NVDP-Clipped" || jf.Rows[3].Target != 16 || jf.Rows[3].Pareto || *jf.Rows[3].Certified.Epsilon.Mean != 16 ||
		jf.Rows[3].Certified.Label != "certified" || jf.Rows[3].Empirical.Label != "empirical" || *jf.Rows[8].Constant != (calibratedConstant{"C", 4}) {
		t.Errorf("JSON frontier: %s", jb.String())
	}

	dir := filepath.Join(root, "plots")
	files, err := WritePlots(tb, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"sst2_frontier_certified", "stsb_frontier_certified", "all_frontier_certified"} {
		for _, ext := range plotFormats {
			if !strings.Contains(strings.Join(files, " "), filepath.Join(dir, name+"."+ext)) {
				t.Errorf("WritePlots did not return %s.%s", name, ext)
			}
		}
		checkPNG(t, filepath.Join(dir, name+".png"), 0.03)
		checkSVG(t, filepath.Join(dir, name+".svg"), 30)
	}
	b, err := os.ReadFile(filepath.Join(dir, "sst2_frontier_certified.svg"))
	if err != nil {
		t.Fatal(err)
	}
	svg := string(b)
	for _, w := range []string{
		"SST-2: certified privacy-utility frontier",
		"ε (δ=1e-5), log scale",
		"NVDP-Clipped: certified ε (metric: mean ± sd over seeds); Pareto front",
		"NVDP-Clipped: empirical BDP estimate (not a guarantee)",
		"Gaussian mechanism: certified ε (metric: mean ± sd over seeds); Pareto front",
		"Gaussian mechanism: empirical BDP estimate (not a guarantee)",
		"non-private baseline (91.0, mean over 2 seeds)",
		"chance level (majority class): 50.9",
		"not shown (1 cell with certified ε = inf):",
		"NVDP λ=1e-2: certified ε infinite (1 cell: C_mu unbounded)",
	} {
		if !strings.Contains(svg, w) {
			t.Errorf("sst2 frontier SVG lacks %q", w)
		}
	}
	if strings.Contains(svg, "NVDP: certified") {
		t.Error("the unclipped NVDP row (certified +Inf) is drawn")
	}
	b, err = os.ReadFile(filepath.Join(dir, "all_frontier_certified.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.Contains(s, "SST-2: certified privacy-utility frontier") || !strings.Contains(s, "STS-B: certified privacy-utility frontier") ||
		!strings.Contains(s, "chance level (constant predictor): 0.0") {
		t.Error("the tiled frontier figure lacks a task")
	}
}

// TestFrontierOneTask: a single task with a frontier gets no tiled figure,
// and a task without certified data (old reports) no frontier at all.
func TestFrontierOneTask(t *testing.T) {
	root := t.TempDir()
	acc := func(v float64) map[string]any { return map[string]any{"accuracy": v} }
	writeReport(t, root, "rte/gaussian/epsilon=8/seed=1", frontierCell("rte", "gaussian", 0, 1, 1, acc(0.6), 2, 9, 8.0, 10, 0.52))
	writeReport(t, root, "sst2/nvdp/lambda=1e-2/seed=1", cellRep("sst2", "nvdp", 0.01, 0, 1, acc(0.8), priv("principled", 0.3, 0.02, 10.5, 0)))
	cells, err := load(root)
	if err != nil {
		t.Fatal(err)
	}
	tb := build(cells, nil)
	if tb.Tasks[0].Frontier == nil || tb.Tasks[1].Frontier != nil {
		t.Fatalf("frontiers %+v %+v", tb.Tasks[0].Frontier, tb.Tasks[1].Frontier)
	}
	// No baseline, one point: no Pareto line, no baseline line.
	f := tb.Tasks[0].Frontier
	if f.Baseline != nil || len(f.Rows) != 1 || !f.Rows[0].Pareto || f.Rows[0].Lambda != 0 {
		t.Errorf("rte frontier %+v", f)
	}
	dir := filepath.Join(root, "plots")
	files, err := WritePlots(tb, dir)
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.Join(files, " "); !strings.Contains(s, "rte_frontier_certified.png") || strings.Contains(s, "all_frontier") ||
		strings.Contains(s, "sst2_frontier") {
		t.Errorf("files %v", files)
	}
	checkPNG(t, filepath.Join(dir, "rte_frontier_certified.png"), 0.02)
	// Without a baseline the reference has no achievable curve: NaN, written
	// as jsonfloat's "NaN" (encoding/json refused the bare float64 NaN).
	var jb bytes.Buffer
	if err := writeJSON(&jb, tb); err != nil {
		t.Fatalf("JSON of a frontier without a baseline: %v", err)
	}
	if s := jb.String(); !strings.Contains(s, `"baseline_accuracy": "NaN"`) || !strings.Contains(s, `"achievable": "NaN"`) {
		t.Errorf("JSON of the reference without a baseline:\n%s", s)
	}
	if fs, err := plotFrontier(nil, filepath.Join(dir, "none")); fs != nil || err != nil {
		t.Errorf("PlotFrontier(nil) = %v, %v", fs, err)
	}
}

// TestLoadTargetEpsilonKeepsCellsApart: two cells that differ only in
// their target epsilon (C_mu fixed, the margin calibrated) are two
// configurations, not a duplicate, and two rows.
func TestLoadTargetEpsilonKeepsCellsApart(t *testing.T) {
	root := t.TempDir()
	acc := map[string]any{"accuracy": 0.7}
	for _, e := range []string{"2", "8"} {
		writeReport(t, root, "sst2/nvdp-clipped/epsilon="+e+"/lambda=1e-2/seed=1",
			cellRep("sst2", "nvdp-clipped", 0.01, 2, 1, acc, priv("principled", 0.3, 0.02, 10.5, 0)))
	}
	cells, err := load(root)
	if err != nil {
		t.Fatal(err)
	}
	tb := build(cells, nil)
	if rs := tb.Tasks[0].Rows; len(rs) != 2 || rs[0].TargetEpsilon != 2 || rs[1].TargetEpsilon != 8 || rs[1].Group() != "NVDP-Clipped (target ε=8)" {
		t.Errorf("rows %+v %+v", rs[0], rs[1])
	}
	bad := filepath.Join(t.TempDir(), "sst2/nvdp-clipped/epsilon=x/lambda=1e-2/seed=1")
	writeReport(t, filepath.Dir(bad), filepath.Base(bad), cellRep("sst2", "nvdp-clipped", 0.01, 2, 1, acc, nil))
	if _, err := readCell(bad); err == nil || !strings.Contains(err.Error(), "epsilon=x") {
		t.Errorf("bad epsilon directory: err = %v", err)
	}
}
