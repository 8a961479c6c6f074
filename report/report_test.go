package report

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/sweep"
	"github.com/nvdp-project/nvdp/train"
)

// writeReport writes a hand-made report.json (as train.RunPipeline) into root/rel.
func writeReport(t *testing.T, root, rel string, rep map[string]any) string {
	t.Helper()
	dir := filepath.Join(root, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, train.ReportFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func priv(mode string, rdMax, rdMean, eps any, invalid int) map[string]any {
	return map[string]any{"mode": mode, "order": 1.1, "delta": 1e-5, "rd_max": rdMax, "rd_mean": rdMean, "bdp_epsilon": eps,
		"invalid_pairs": invalid, "pairs": 12, "full": map[string]any{"histogram": map[string]any{
			"edges": []float64{0, 0.1, 0.2, 0.3}, "counts": []int{3, 5, 4}}}}
}

func cellRep(task, variant string, lambda, cmu float64, seed int, util map[string]any, p map[string]any) map[string]any {
	r := map[string]any{"task": task, "variant": variant, "mode": "principled", "encoder": "scratch:bert-tiny", "lambda": lambda,
		"seed": seed, "utility": util, "utility_split": "dev", "privacy": p}
	if cmu > 0 {
		r["c_mu"] = cmu
	}
	return r
}

// fixtures: SST-2 with a baseline (2 seeds), NVDP at 1e-2 (2 seeds) and 1 (1 seed, an undefined
// bound), NVDP-Clipped C_mu 2 at 1e-2 (2 seeds, one with a reference audit), a grid cell;
// MRPC with two metrics.
func fixtures(t *testing.T) string {
	root := t.TempDir()
	acc := func(v float64) map[string]any { return map[string]any{"accuracy": v} }
	writeReport(t, root, "sst2/baseline/seed=1", cellRep("sst2", "baseline", 0, 0, 1, acc(0.90), nil))
	writeReport(t, root, "sst2/baseline/seed=2", cellRep("sst2", "baseline", 0, 0, 2, acc(0.92), nil))
	writeReport(t, root, "sst2/nvdp/lambda=1e-2/seed=1", cellRep("sst2", "nvdp", 0.01, 0, 1, acc(0.80), priv("principled", 0.30, 0.02, 10.5, 0)))
	writeReport(t, root, "sst2/nvdp/lambda=1e-2/seed=2", cellRep("sst2", "nvdp", 0.01, 0, 2, acc(0.84), priv("principled", 0.34, 0.04, 10.7, 0)))
	writeReport(t, root, "sst2/nvdp/lambda=1/seed=1", cellRep("sst2", "nvdp", 1, 0, 1, acc(0.50), priv("principled", 1234.5, 7.5, nil, 3)))
	d := writeReport(t, root, "sst2/nvdp-clipped/lambda=1e-2/seed=1", cellRep("sst2", "nvdp-clipped", 0.01, 2, 1, acc(0.83), priv("principled", 0.013, 0.001, 10.6, 0)))
	writeReport(t, root, "sst2/nvdp-clipped/lambda=1e-2/seed=2", cellRep("sst2", "nvdp-clipped", 0.01, 2, 2, acc(0.81), priv("principled", 0.017, 0.003, 10.8, 0)))
	ref, _ := json.Marshal(map[string]any{"mode": "reference", "rd_max": 2.5, "rd_mean": 0.5, "bdp_epsilon": 11.25, "invalid_pairs": 0, "pairs": 4})
	if err := os.WriteFile(filepath.Join(d, sweep.AuditFile(privacy.ModeReference)), ref, 0o644); err != nil {
		t.Fatal(err)
	}
	writeReport(t, root, "sst2/cmu-grid/c_mu=8/lambda=1e-2/seed=1", cellRep("sst2", "nvdp-clipped", 0.01, 8, 1, acc(0.99), priv("principled", 5, 1, 20, 0)))
	writeReport(t, root, "mrpc/nvdp/lambda=1e-3/seed=1", cellRep("mrpc", "nvdp", 0.001, 0, 1,
		map[string]any{"accuracy": 0.75, "f1": 0.85}, priv("principled", 0.89, 0.06, 10.95, 0)))
	writeReport(t, root, "mrpc/nvdp/lambda=1e-1/seed=1", cellRep("mrpc", "nvdp", 0.1, 0, 1,
		map[string]any{"accuracy": 0.70, "f1": 0.86}, priv("principled", 0.04, 0.01, 10.5, 0)))
	return root
}

func TestStat(t *testing.T) {
	for _, c := range []struct {
		in         []float64
		mean, std  float64
		n          int
		stdIsNaN   bool
		meanIsNaN  bool
		meanIsPInf bool
	}{
		{in: []float64{0.80, 0.84}, mean: 0.82, std: math.Sqrt(0.0008), n: 2},
		{in: []float64{1, 2, 3, 4}, mean: 2.5, std: math.Sqrt(5.0 / 3), n: 4},
		{in: []float64{7}, mean: 7, std: 0, n: 1},
		{in: []float64{1, math.NaN(), 3}, mean: 2, std: math.Sqrt2, n: 2},
		{in: []float64{1, math.Inf(1)}, n: 2, meanIsPInf: true, stdIsNaN: true},
		{in: nil, meanIsNaN: true, stdIsNaN: true},
	} {
		s := newStat(c.in)
		ok := s.N == c.n &&
			(c.meanIsNaN && math.IsNaN(s.Mean) || c.meanIsPInf && math.IsInf(s.Mean, 1) || math.Abs(s.Mean-c.mean) < 1e-12) &&
			(c.stdIsNaN && math.IsNaN(s.Std) || math.Abs(s.Std-c.std) < 1e-12)
		if !ok {
			t.Errorf("NewStat(%v) = %+v, want mean %v std %v n %d", c.in, s, c.mean, c.std, c.n)
		}
	}
}

func TestTablesFromFixtures(t *testing.T) {
	root := fixtures(t)
	cells, err := load(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) != 10 {
		t.Fatalf("%d cells, want 10", len(cells))
	}
	tb := build(cells, nil)
	if fmt.Sprint(tb.AuditModes) != "[principled reference]" {
		t.Errorf("audit modes %v", tb.AuditModes)
	}
	var md bytes.Buffer
	if err := writeMarkdown(&md, tb); err != nil {
		t.Fatal(err)
	}
	got := md.String()
	for _, want := range []string{
		"9 cells (+ 1 C_mu grid cells); encoder scratch:bert-tiny; training mode principled.",
		"C_mu grid (nvdp-clipped; selection on dev Accuracy):",
		"| NVDP-Clipped (C_mu=8) | 1e-2 | 1 | 99.0 | 20.00 | 5 / 1 | – | – |",
		"### MRPC (Accuracy / F1)",
		"| NVDP | 1e-3 | 1 | 75.0 | 85.0 | 10.95 | 0.89 / 0.06 | – | – |",
		"### SST-2 (Accuracy)",
		"| Model | λ | Seeds | Accuracy | BDP ε_μ estimate (principled) | RD max / avg, empirical (principled) | BDP ε_μ estimate (reference) | RD max / avg, empirical (reference) | Certified RD (audit order) | Certified ε |",
		// Old reports carry no certified block: the certified columns are "–".
		"| NVDP | 1e-2 | 2 | 82.0 ± 2.8 | 10.60 ± 0.14 | 0.32 ± 0.0283 / 0.03 ± 0.0141 | – | – | – | – |",
		"| Task | Metric | Model | λ | Score | BDP ε_μ estimate | RD max (empirical) | Certified RD (audit order) | Certified ε |",
		"Which number is which: **RD max / avg (empirical)**",
		"| Non-private baseline | – | 2 | 91.0 ± 1.4 | – | – | – | – |",
		// accuracy 0.80, 0.84: mean 82.0, sample std 2.83; rd_max 0.30, 0.34: 0.32 ± 0.0283.
		"| NVDP | 1e-2 | 2 | 82.0 ± 2.8 | 10.60 ± 0.14 | 0.32 ± 0.0283 / 0.03 ± 0.0141 | – | – |",
		// Undefined BDP (null with invalid pairs) is inf, not 0.
		"| NVDP | 1 | 1 | 50.0 | inf | 1234 / 7.5 (3 invalid pairs) | – | – |",
		"| NVDP-Clipped (C_mu=2) | 1e-2 | 2 | 82.0 ± 1.4 | 10.70 ± 0.14 | 0.015 ± 0.00283 / 0.002 ± 0.00141 | 11.25 | 2.5 / 0.5 |",
		// Table 1: per model, the best lambda (SST-2 NVDP: 1e-2; MRPC NVDP by F1: 1e-1).
		"| SST-2 | Accuracy | NVDP | 1e-2 | 82.0 ± 2.8 | 10.60 ± 0.14 | 0.32 ± 0.0283 |",
		"| SST-2 | Accuracy | NVDP-Clipped (C_mu=2) | 1e-2 | 82.0 ± 1.4 | 10.70 ± 0.14 | 0.015 ± 0.00283 |",
		"| SST-2 | Accuracy | NVDP-Clipped (C_mu=2) | 1e-2 | 82.0 ± 1.4 | 11.25 | 2.5 |",
		"| MRPC | Accuracy | NVDP | 1e-1 | 70.0 | 10.50 | 0.04 |",
		"| MRPC | F1 | NVDP | 1e-1 | 86.0 | 10.50 | 0.04 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	if strings.Contains(got, "| SST-2 | Accuracy | NVDP-Clipped (C_mu=8)") || strings.Count(got, "C_mu=8") != 1 {
		t.Errorf("grid cell leaked into the main table or Table 1:\n%s", got)
	}
	if t.Failed() {
		t.Logf("markdown:\n%s", got)
	}

	var cb bytes.Buffer
	if err := writeCSV(&cb, tb); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&cb).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	// Header + MRPC 2 rows x 2 metrics + SST-2: baseline 1 + nvdp 2 + clipped 2 (two audit modes) + grid 1 = 11.
	if len(recs) != 11 || recs[10][17] != "true" || recs[1][17] != "false" {
		t.Fatalf("%d CSV records (want 11): %v", len(recs), recs)
	}
	for _, r := range recs[1:] {
		if len(r) != 33 || strings.Join(r[18:26], "") != "" {
			t.Errorf("CSV record %v: want 33 columns, the 8 certified ones empty (old reports)", r)
		}
	}
	found := false
	for _, r := range recs {
		if r[0] == "sst2" && r[1] == "nvdp" && r[4] == "0.01" {
			found = true
			if r[7] != "0.8200000000000001" && r[7] != "0.82" {
				t.Errorf("utility mean %s", r[7])
			}
			if r[12] != "0.32" && r[12] != "0.32000000000000006" {
				t.Errorf("rd_max mean %s", r[12])
			}
		}
	}
	if !found {
		t.Error("CSV lacks the sst2 nvdp 0.01 row")
	}

	var jb bytes.Buffer
	if err := writeJSON(&jb, tb); err != nil {
		t.Fatal(err)
	}
	var js struct {
		Tasks []struct {
			Task string `json:"task"`
			Rows []struct {
				Variant string `json:"variant"`
				Lambda  float64
				Privacy map[string]struct {
					BDP struct {
						Mean *jsonfloat.Float `json:"mean"`
					} `json:"bdp_epsilon"`
				} `json:"privacy"`
			} `json:"rows"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(jb.Bytes(), &js); err != nil {
		t.Fatalf("JSON output: %v", err)
	}
	if len(js.Tasks) != 2 || js.Tasks[1].Task != "sst2" || len(js.Tasks[1].Rows) != 4 {
		t.Fatalf("JSON tasks %+v", js.Tasks)
	}
	if m := js.Tasks[1].Rows[2].Privacy["principled"].BDP.Mean; m == nil || !math.IsInf(float64(*m), 1) || !strings.Contains(jb.String(), `"Infinity"`) {
		t.Errorf("undefined BDP should be \"Infinity\" in JSON, got %v", m)
	}
}

func TestParetoFront(t *testing.T) {
	for _, c := range []struct {
		name string
		in   []tradeoffPoint
		want string
	}{
		{"dominated removed", []tradeoffPoint{{X: 1, Y: 50}, {X: 2, Y: 80}, {X: 3, Y: 70}, {X: 0.5, Y: 40}, {X: 4, Y: 90}},
			"[{0.5 40} {1 50} {2 80} {4 90}]"},
		{"equal x keeps the higher y", []tradeoffPoint{{X: 1, Y: 50}, {X: 1, Y: 60}}, "[{1 60}]"},
		{"non-finite ignored", []tradeoffPoint{{X: math.Inf(1), Y: 99}, {X: 1, Y: math.NaN()}, {X: 2, Y: 3}}, "[{2 3}]"},
		{"empty", nil, "[]"},
	} {
		var got []string
		for _, p := range paretoFront(c.in) {
			got = append(got, fmt.Sprintf("{%g %g}", p.X, p.Y))
		}
		if s := "[" + strings.Join(got, " ") + "]"; s != c.want {
			t.Errorf("%s: front %s, want %s", c.name, s, c.want)
		}
	}
}

// checkPNG decodes a PNG and requires at least minFrac of its pixels to be
// non-white (axes, text, markers, bars).
func checkPNG(t *testing.T, path string, minFrac float64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b := img.Bounds()
	if b.Dx() < 300 || b.Dy() < 200 {
		t.Errorf("%s: %dx%d pixels", path, b.Dx(), b.Dy())
	}
	ink, colours := 0, map[[3]uint32]bool{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r < 0xf000 || g < 0xf000 || bl < 0xf000 {
				ink++
				colours[[3]uint32{r >> 12, g >> 12, bl >> 12}] = true
			}
		}
	}
	if frac := float64(ink) / float64(b.Dx()*b.Dy()); frac < minFrac {
		t.Errorf("%s: %.4f of the pixels drawn, want >= %v", path, frac, minFrac)
	}
	if len(colours) < 3 {
		t.Errorf("%s: only %d colours", path, len(colours))
	}
}

func checkSVG(t *testing.T, path string, minPaths int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.HasPrefix(strings.TrimSpace(s), "<?xml") || !strings.Contains(s, "<svg") {
		t.Fatalf("%s: not an SVG", path)
	}
	if n := strings.Count(s, "<path"); n < minPaths {
		t.Errorf("%s: %d <path> elements, want >= %d", path, n, minPaths)
	}
	if !strings.Contains(s, "<text") && !strings.Contains(s, "font") {
		t.Errorf("%s: no text (title, labels)", path)
	}
}

func TestPlotsFromFixtures(t *testing.T) {
	root := fixtures(t)
	cells, err := load(root)
	if err != nil {
		t.Fatal(err)
	}
	tb := build(cells, nil)
	dir := filepath.Join(root, "plots")
	files, err := WritePlots(tb, dir)
	if err != nil {
		t.Fatal(err)
	}
	// sst2: 2 modes x 2 x-axes trade-offs; mrpc: principled x 2; histograms: sst2 nvdp, clipped (principled), mrpc nvdp.
	// Curves need metrics.jsonl, which the fixtures lack.
	want := []string{"sst2_tradeoff_principled_rd_max", "sst2_tradeoff_reference_bdp_epsilon", "mrpc_tradeoff_principled_rd_max",
		"sst2_nvdp_hist_principled", "sst2_nvdp-clipped_c_mu2_hist_principled", "mrpc_nvdp_hist_principled"}
	if len(files) != 2*9 {
		t.Errorf("%d files: %v", len(files), files)
	}
	for _, w := range want {
		checkPNG(t, filepath.Join(dir, w+".png"), 0.02)
		checkSVG(t, filepath.Join(dir, w+".svg"), 10)
	}
	// NVDP at lambda 1 has invalid pairs: no finite worst case on either axis
	// (its rd_max over the finite pairs, 1234, is not drawn as if it were one);
	// the legend names it instead of dropping it silently. The clipped rows are drawn.
	for _, file := range []string{"sst2_tradeoff_principled_bdp_epsilon", "sst2_tradeoff_principled_rd_max"} {
		b, err := os.ReadFile(filepath.Join(dir, file+".svg"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "bound infinite: NVDP λ=1") || strings.Contains(string(b), "bound infinite: NVDP-Clipped") {
			t.Errorf("%s: the legend should name NVDP λ=1, and only it, as not shown", file)
		}
	}
	if x := privacyValue(&auditStats{RDMax: stat{Mean: 1234}, InvalidPairs: 3}, "rd_max"); !math.IsInf(x, 1) {
		t.Errorf("rd_max with invalid pairs plotted at %g, want +Inf", x)
	}
}

// synthGlue writes synthetic SST-2 and RTE splits whose label is carried by
// one sentiment word, and a WordPiece vocab; returns (glueDir, vocab).
func synthGlue(t *testing.T, nTrain, nDev int) (string, string) {
	t.Helper()
	dir := t.TempDir()
	pos, neg := []string{"good", "great", "fine"}, []string{"bad", "awful", "poor"}
	filler := []string{"the", "movie", "is", "very", "a", "plot", "and", "acting"}
	vocab := append([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}, append(append(pos, neg...), filler...)...)
	vpath := filepath.Join(dir, "vocab.txt")
	if err := os.WriteFile(vpath, []byte(strings.Join(vocab, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	sent := func(label int) string {
		n := 2 + rng.IntN(6)
		w := make([]string, n)
		for i := range w {
			w[i] = filler[rng.IntN(len(filler))]
		}
		src := neg
		if label == 1 {
			src = pos
		}
		w[rng.IntN(n)] = src[rng.IntN(len(src))]
		return strings.Join(w, " ")
	}
	write := func(task, split, content string) {
		d := filepath.Join(dir, "glue", task)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, split+".tsv"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, sp := range []struct {
		name string
		n    int
	}{{"train", nTrain}, {"dev", nDev}} {
		var sst, rte strings.Builder
		sst.WriteString("sentence\tlabel\n")
		rte.WriteString("index\tsentence1\tsentence2\tlabel\n")
		for i := 0; i < sp.n; i++ {
			l := rng.IntN(2)
			fmt.Fprintf(&sst, "%s\t%d\n", sent(l), l)
			names := []string{"not_entailment", "entailment"}
			fmt.Fprintf(&rte, "%d\t%s\t%s\t%s\n", i, sent(rng.IntN(2)), sent(l), names[l])
		}
		write("SST-2", sp.name, sst.String())
		write("RTE", sp.name, rte.String())
	}
	return filepath.Join(dir, "glue"), vpath
}

// TestSweepEndToEnd is the CI sweep: 2 tasks (SST-2, RTE; synthetic data),
// baseline + NVDP-Clipped, 2 lambdas, 2 seeds, a tiny scratch encoder (hidden
// 32, 1 layer), trained, evaluated and audited in process (principled, plus a
// reference audit), then the report tables and plots; a second sweep does no work.
func TestSweepEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 12 tiny models")
	}
	glueDir, vocab := synthGlue(t, 64, 24)
	enc, err := encoder.Preset("bert-tiny")
	if err != nil {
		t.Fatal(err)
	}
	enc.HiddenSize, enc.NumHiddenLayers, enc.NumAttentionHeads, enc.IntermediateSize, enc.MaxPositionEmbeddings = 32, 1, 2, 64, 32
	out := filepath.Join(t.TempDir(), "sweep")
	bt := model.DefaultOptions()
	bt.GlueDir, bt.Encoder, bt.Vocab, bt.ScratchConfig = glueDir, "scratch:bert-tiny", vocab, &enc
	bt.Epochs, bt.BatchSize, bt.EvalBatchSize, bt.LR, bt.MaxSeqLen, bt.TrainLimit, bt.DevLimit, bt.Patience = 2, 16, 16, 3e-3, 24, 64, 24, 0
	bt.HandSetClipping = true // the clipped cells at the per-task constants, no target
	base := train.DefaultPipelineOptions()
	base.Train, base.EvalSeed = bt, 5
	so := sweep.Options{
		Base:  base,
		Tasks: []string{"sst2", "rte"}, Variants: []string{"baseline", "nvdp-clipped"}, Lambdas: []float64{1e-2, 1},
		Seeds: []uint64{1, 2}, Out: out, ExtraAuditModes: []privacy.Mode{privacy.ModeReference},
	}
	res, err := sweep.Run(context.Background(), so)
	if err != nil {
		t.Fatal(err)
	}
	if res.Ran != 12 {
		t.Fatalf("ran %d cells, want 12", res.Ran)
	}
	res, err = sweep.Run(context.Background(), so)
	if err != nil || res.Ran != 0 {
		t.Fatalf("second sweep: ran %d, err %v", res.Ran, err)
	}

	cells, err := load(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) != 12 {
		t.Fatalf("%d cells loaded", len(cells))
	}
	tb := build(cells, nil)
	if len(tb.Tasks) != 2 || fmt.Sprint(tb.AuditModes) != "[principled reference]" {
		t.Fatalf("tasks %d, audit modes %v", len(tb.Tasks), tb.AuditModes)
	}
	for _, tt := range tb.Tasks {
		if len(tt.Rows) != 3 {
			t.Errorf("%s: %d rows, want baseline + 2 lambdas", tt.Task, len(tt.Rows))
		}
		for _, r := range tt.Rows {
			u := r.Utility["accuracy"]
			if len(r.Seeds) != 2 || u.N != 2 || !(u.Mean >= 0 && u.Mean <= 1) {
				t.Errorf("%s %s %v: seeds %v, accuracy %+v", tt.Task, r.Variant, r.Lambda, r.Seeds, u)
			}
			if r.Baseline() != (r.Privacy == nil) {
				t.Errorf("%s %s: privacy %v", tt.Task, r.Variant, r.Privacy)
			}
			for _, m := range tb.AuditModes {
				if p := r.Privacy[m]; p != nil && (p.Cells != 2 || !(p.RDMax.Mean > 0) || !(p.BDP.Mean > 0) || p.RDMax.Mean < p.RDMean.Mean) {
					t.Errorf("%s %s %v %s: privacy %+v", tt.Task, r.Variant, r.Lambda, m, p)
				}
			}
			// The certified block flows from report.json and bounds every audited pair.
			if c := r.Certified; r.Baseline() != (c == nil) || c != nil && (c.Cells != 2 || c.Order != 1.1 ||
				!(c.RD.Mean >= r.Privacy["principled"].RDMax.Mean) || !(c.Epsilon.Mean > 0)) {
				t.Errorf("%s %s %v: certified %+v (principled rd_max %+v)", tt.Task, r.Variant, r.Lambda, c, r.Privacy["principled"])
			}
		}
	}
	var md bytes.Buffer
	if err := writeMarkdown(&md, tb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"### RTE (Accuracy)", "### SST-2 (Accuracy)", "| NVDP-Clipped (C_mu=2) | 1e-2 | 2 |", "| Certified RD (order 1.1) | Certified ε (δ=1e-5) |",
		"| NVDP-Clipped (C_mu=6) | 1 | 2 |", "Best trade-off (as paper Table 1), reference audit"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	// One Table 1 row pinned from the cells' report.json alone: SST-2's
	// NVDP-Clipped, principled audit, is the lambda of the best mean
	// accuracy (ties: the lower mean rd_max; these tiny models tie at the
	// majority class, so the tie-break picks), with its mean ± std over the
	// two seeds.
	type agg struct{ acc, rd, bdp []float64 }
	byLambda := map[float64]*agg{}
	cmu := 0.0
	for _, c := range cells {
		if c.Task != "sst2" || c.Variant != "nvdp-clipped" || c.Grid {
			continue
		}
		a := byLambda[c.Lambda]
		if a == nil {
			a = &agg{}
			byLambda[c.Lambda] = a
		}
		au := c.Audits["principled"]
		a.acc, a.rd, a.bdp, cmu = append(a.acc, c.Utility["accuracy"]), append(a.rd, au.RDMax), append(a.bdp, au.BDPEpsilon), c.CMu
	}
	meanStd := func(v []float64) (float64, float64) {
		if len(v) != 2 {
			t.Fatalf("%d seeds, want 2", len(v))
		}
		m := (v[0] + v[1]) / 2
		return m, math.Sqrt(((v[0]-m)*(v[0]-m) + (v[1]-m)*(v[1]-m)) / 1)
	}
	bestL, bestAcc, bestRD := math.NaN(), math.Inf(-1), math.Inf(1)
	for _, l := range []float64{1e-2, 1} {
		acc, _ := meanStd(byLambda[l].acc)
		rd, _ := meanStd(byLambda[l].rd)
		if acc > bestAcc || acc == bestAcc && rd < bestRD {
			bestL, bestAcc, bestRD = l, acc, rd
		}
	}
	group := fmt.Sprintf("NVDP-Clipped (C_mu=%g)", cmu)
	var pinned *bestRow
	for _, b := range tb.Best {
		if b.Task == "sst2" && b.Group == group && b.AuditMode == "principled" {
			pinned = b
		}
	}
	if pinned == nil || pinned.Row.Lambda != bestL || pinned.Row.Utility["accuracy"].Mean != bestAcc {
		t.Fatalf("Table 1 SST-2 %s principled: %+v, want lambda %v, accuracy %v", group, pinned, bestL, bestAcc)
	}
	am, as := meanStd(byLambda[bestL].acc)
	bm, bs := meanStd(byLambda[bestL].bdp)
	row := fmt.Sprintf("| SST-2 | Accuracy | %s | %s | %s ± %s | %s ± %s |", group, sweep.FormatLambda(bestL),
		strconv.FormatFloat(am*100, 'f', 1, 64), strconv.FormatFloat(as*100, 'f', 1, 64),
		strconv.FormatFloat(bm, 'f', 2, 64), strconv.FormatFloat(bs, 'f', 2, 64))
	table1 := md.String()[strings.Index(md.String(), "Best trade-off (as paper Table 1), principled audit"):]
	if !strings.Contains(table1, row) {
		t.Errorf("Table 1 (principled) lacks the row %q:\n%s", row, table1)
	}
	files, err := WritePlots(tb, filepath.Join(out, "plots"))
	if err != nil {
		t.Fatal(err)
	}
	// Per task: 2 modes x 2 trade-offs + curves (baseline, clipped) + histogram (clipped, principled;
	// the reference audit keeps no per-pair values) + the certified frontier = 8 figures x 2 formats,
	// and the two frontiers tiled.
	if len(files) != 2*8*2+2 {
		t.Errorf("%d plot files: %v", len(files), files)
	}
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil || st.Size() < 2000 {
			t.Errorf("%s: %v, %d bytes", f, err, st.Size())
		}
	}
	checkPNG(t, filepath.Join(out, "plots", "sst2_nvdp-clipped_c_mu2_curves.png"), 0.02)
	checkPNG(t, filepath.Join(out, "plots", "rte_tradeoff_principled_rd_max.png"), 0.02)
	checkSVG(t, filepath.Join(out, "plots", "rte_nvdp-clipped_c_mu6_hist_principled.svg"), 20)
	// The frontier of a sweep without targets: per lambda, the clipped rows at their certified epsilon.
	for _, tt := range tb.Tasks {
		if f := tt.Frontier; f == nil || len(f.Rows) != 2 || f.Baseline == nil || f.AuditMode != "principled" || !(float64(f.Chance) >= 0) {
			t.Errorf("%s frontier %+v", tt.Task, tt.Frontier)
		}
	}
	checkPNG(t, filepath.Join(out, "plots", "all_frontier_certified.png"), 0.02)
}

func TestLoadFollowsReusedGridCells(t *testing.T) {
	root := t.TempDir()
	writeReport(t, root, "rte/cmu-grid/c_mu=4/lambda=1e-2/seed=1", cellRep("rte", "nvdp-clipped", 0.01, 4, 1,
		map[string]any{"accuracy": 0.6}, priv("principled", 0.5, 0.1, 11, 0)))
	link := filepath.Join(root, "rte", "nvdp-clipped", "lambda=1e-2", "seed=1")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..", "..", "cmu-grid", "c_mu=4", "lambda=1e-2", "seed=1"), link); err != nil {
		t.Fatal(err)
	}
	cells, err := load(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) != 2 || cells[0].Grid == cells[1].Grid {
		t.Fatalf("cells %+v %+v: want one grid cell and its link", cells[0], cells[1])
	}
	tb := build(cells, nil)
	if len(tb.Tasks) != 1 || len(tb.Tasks[0].Rows) != 1 || tb.Tasks[0].Rows[0].Group() != "NVDP-Clipped (C_mu=4)" ||
		tb.Tasks[0].Rows[0].Utility["accuracy"].Mean != 0.6 {
		t.Errorf("table %+v", tb.Tasks[0].Rows[0])
	}
}

func TestLoadRejectsDuplicateRuns(t *testing.T) {
	root := t.TempDir()
	rep := cellRep("sst2", "nvdp", 0.01, 0, 1, map[string]any{"accuracy": 0.6}, priv("principled", 0.5, 0.1, 11, 0))
	writeReport(t, root, "a/sst2/nvdp/lambda=1e-2/seed=1", rep)
	writeReport(t, root, "b/sst2/nvdp/lambda=1e-2/seed=1", rep)
	if _, err := load(root); err == nil || !strings.Contains(err.Error(), "same configuration") {
		t.Errorf("err = %v", err)
	}
	if _, err := load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no report.json") {
		t.Errorf("empty dir: err = %v", err)
	}
	bad := filepath.Join(root, "c")
	writeReport(t, bad, "x", map[string]any{"task": "sst2"})
	if _, err := load(bad); err == nil || !strings.Contains(err.Error(), "no task or variant") {
		t.Errorf("bad report: err = %v", err)
	}
}

func TestWithInvalid(t *testing.T) {
	for _, tc := range []struct {
		invalid int64
		want    string
	}{{0, "6809"}, {669503, "6809 (669503 invalid pairs)"}} {
		if got := withInvalid("6809", &auditStats{InvalidPairs: tc.invalid}); got != tc.want {
			t.Errorf("invalid %d: %q, want %q", tc.invalid, got, tc.want)
		}
	}
}

// certBlock is a report.json privacy.certified block (train.CertifiedPrivacy).
func certBlock(rd, eps, bdp any, finite bool, reason string) map[string]any {
	return map[string]any{"label": "certified", "scope": privacy.CertifiedScope(1, 0, 0), "order": 1.1, "delta": 1e-5,
		"rd_certified": rd, "epsilon": eps, "bdp_epsilon_certified": bdp, "finite": finite, "reason": reason,
		"parts": map[string]any{"variance": 1, "mean": 2, "dirichlet": 3}, "orders": []any{}}
}

// TestTablesCertified: cells whose report.json carries the certified block
// get certified columns beside the empirical ones (md, csv, json), an
// unclipped model's infinite certificate is "inf", cells without one (an old
// report next to new ones) are "–" or left out of the stats, and the
// principled trade-off plots draw the certified series.
func TestTablesCertified(t *testing.T) {
	root := t.TempDir()
	acc := func(v float64) map[string]any { return map[string]any{"accuracy": v} }
	withCert := func(p, c map[string]any) map[string]any { p["certified"] = c; return p }
	main := certBlock(46450.355726, 31000.553116, 31006.16327, true, "")
	writeReport(t, root, "sst2/baseline/seed=1", cellRep("sst2", "baseline", 0, 0, 1, acc(0.90), nil))
	writeReport(t, root, "sst2/nvdp/lambda=1e-2/seed=1", cellRep("sst2", "nvdp", 0.01, 0, 1, acc(0.80),
		withCert(priv("principled", 300.0, 20.0, 110.5, 0), certBlock(nil, nil, nil, false, "C_mu unbounded"))))
	writeReport(t, root, "sst2/nvdp-clipped/lambda=1e-2/seed=1", cellRep("sst2", "nvdp-clipped", 0.01, 2, 1, acc(0.83),
		withCert(priv("principled", 10965.0, 2000.0, 9780.0, 0), main)))
	writeReport(t, root, "sst2/nvdp-clipped/lambda=1e-2/seed=2", cellRep("sst2", "nvdp-clipped", 0.01, 2, 2, acc(0.81),
		withCert(priv("principled", 21757.0, 4000.0, 17639.0, 0), main)))
	// An old report (before certification) in the same row group at another lambda.
	writeReport(t, root, "sst2/nvdp-clipped/lambda=1e-1/seed=1", cellRep("sst2", "nvdp-clipped", 0.1, 2, 1, acc(0.77),
		priv("principled", 11717.0, 2100.0, 9657.0, 0)))
	cells, err := load(root)
	if err != nil {
		t.Fatal(err)
	}
	tb := build(cells, nil)
	rows := tb.Tasks[0].Rows
	if len(rows) != 4 {
		t.Fatalf("%d rows", len(rows))
	}
	for _, tc := range []struct {
		row          int
		nilCert      bool
		rd, eps, bdp float64
		cells        int
	}{
		{row: 0, nilCert: true}, // baseline
		{row: 1, rd: math.Inf(1), eps: math.Inf(1), bdp: math.Inf(1), cells: 1}, // unclipped: null is +Inf
		{row: 2, rd: 46450.355726, eps: 31000.553116, bdp: 31006.16327, cells: 2},
		{row: 3, nilCert: true}, // old report
	} {
		c := rows[tc.row].Certified
		if tc.nilCert {
			if c != nil {
				t.Errorf("row %d: certified %+v, want none", tc.row, c)
			}
			continue
		}
		if c == nil || c.Cells != tc.cells || c.RD.Mean != tc.rd || c.Epsilon.Mean != tc.eps || c.BDP.Mean != tc.bdp || c.Order != 1.1 || c.Label != "certified" {
			t.Errorf("row %d: certified %+v", tc.row, c)
		}
	}
	if rows[1].Certified.Reason != "C_mu unbounded" {
		t.Errorf("unclipped reason %q", rows[1].Certified.Reason)
	}

	var md bytes.Buffer
	if err := writeMarkdown(&md, tb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| Model | λ | Seeds | Accuracy | BDP ε_μ estimate (principled) | RD max / avg, empirical (principled) | Certified RD (order 1.1) | Certified ε (δ=1e-5) |",
		"| Non-private baseline | – | 1 | 90.0 | – | – | – | – |",
		"| NVDP | 1e-2 | 1 | 80.0 | 110.50 | 300 / 20 | inf | inf |",
		"| NVDP-Clipped (C_mu=2) | 1e-2 | 2 | 82.0 ± 1.4 | 13709.50 ± 5557.15 | 16361 ± 7631 / 3000 ± 1414 | 46450 | 31000.55 |",
		"| NVDP-Clipped (C_mu=2) | 1e-1 | 1 | 77.0 | 9657.00 | 11717 / 2100 | – | – |",
		"| SST-2 | Accuracy | NVDP-Clipped (C_mu=2) | 1e-2 | 82.0 ± 1.4 | 13709.50 ± 5557.15 | 16361 ± 7631 | 46450 | 31000.55 |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q", want)
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
	if h := strings.Join(recs[0][18:26], ","); h != "certified_order,certified_delta,rd_certified_mean,rd_certified_std,epsilon_certified_mean,epsilon_certified_std,bdp_epsilon_certified_mean,bdp_epsilon_certified_std" {
		t.Errorf("CSV certified header %s", h)
	}
	want := map[string]string{"baseline/": "", "nvdp/0.01": "1.1,1e-05,+Inf,NaN,+Inf,NaN,+Inf,NaN",
		"nvdp-clipped/0.01": "1.1,1e-05,46450.355726,0,31000.553116,0,31006.16327,0", "nvdp-clipped/0.1": ",,,,,,,"}
	for _, r := range recs[1:] {
		k := r[1] + "/" + r[4]
		if got := strings.Join(r[18:26], ","); r[1] != "baseline" && got != want[k] || r[1] == "baseline" && got != ",,,,,,," {
			t.Errorf("CSV %s certified %q, want %q", k, got, want[k])
		}
	}

	var jb bytes.Buffer
	if err := writeJSON(&jb, tb); err != nil {
		t.Fatal(err)
	}
	var js struct {
		Tasks []struct {
			Rows []struct {
				Privacy   map[string]struct{ Label string } `json:"privacy"`
				Certified *struct {
					Label string   `json:"label"`
					Order *float64 `json:"order"`
					RD    struct {
						Mean *jsonfloat.Float `json:"mean"`
					} `json:"rd_certified"`
				} `json:"certified"`
			} `json:"rows"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(jb.Bytes(), &js); err != nil {
		t.Fatalf("JSON output: %v", err)
	}
	jr := js.Tasks[0].Rows
	if jr[0].Certified != nil || !math.IsInf(float64(*jr[1].Certified.RD.Mean), 1) || jr[2].Certified.Label != "certified" || *jr[2].Certified.RD.Mean != 46450.355726 ||
		*jr[2].Certified.Order != 1.1 || jr[3].Certified != nil || jr[2].Privacy["principled"].Label != "empirical" {
		t.Errorf("JSON rows: %s", jb.String())
	}

	dir := filepath.Join(root, "plots")
	if _, err := WritePlots(tb, dir); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"sst2_tradeoff_principled_rd_max", "sst2_tradeoff_principled_bdp_epsilon"} {
		checkPNG(t, filepath.Join(dir, file+".png"), 0.02)
		b, err := os.ReadFile(filepath.Join(dir, file+".svg"))
		if err != nil {
			t.Fatal(err)
		}
		svg := string(b)
		for _, w := range []string{"NVDP-Clipped (C_mu=2), certified", "NVDP-Clipped (C_mu=2), empirical audit (dev pairs)",
			"certified bound infinite: NVDP", "Pareto front (empirical audit)", "and certified"} {
			if !strings.Contains(svg, w) {
				t.Errorf("%s lacks %q", file, w)
			}
		}
		if strings.Contains(svg, "NVDP, certified") {
			t.Errorf("%s: the unclipped model's infinite certificate is drawn", file)
		}
	}
}

// TestReadCellOldAndNew: report decodes train.Report itself. A cell written
// now (+Inf as "Infinity", NaN as "NaN", numbers not computed absent) and the
// same cell written before jsonfloat (null for each of them) read alike:
// an undefined bound with invalid pairs is +Inf, a number not computed NaN;
// the certified block's null is +Inf; a null utility NaN.
func TestReadCellOldAndNew(t *testing.T) {
	root := t.TempDir()
	inf := math.Inf(1)
	cert := &privacy.CertifiedReport{Certificate: privacy.Certificate{Order: 1.1, RD: jsonfloat.Float(inf), Reason: "C_mu unbounded"},
		Guarantee: privacy.Guarantee{MaxOrder: jsonfloat.Float(inf), Delta: 1e-5, Epsilon: jsonfloat.Float(inf), BDPEpsilon: jsonfloat.Float(inf),
			BestOrder: jsonfloat.Float(math.NaN()), BDPOrder: jsonfloat.Float(math.NaN())}}
	rep := train.Report{Task: "stsb", Variant: "nvdp", Mode: "principled", Lambda: 1, Seed: 1,
		Utility: train.Metrics{"pearson": math.NaN(), "spearman": 0.5},
		Privacy: &train.PrivacySummary{Mode: privacy.ModePrincipled, Order: 1.1, Delta: 1e-5, RDMax: jsonfloat.Float(inf),
			BDPEpsilon: jsonfloat.New(inf), InvalidPairs: 12, Pairs: 12, Split: "dev", Certified: cert},
		Collapse: &train.CollapseCheck{Metric: "spearman", Value: 0.5, Chance: 0}}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"rd_max":"Infinity"`, `"bdp_epsilon":"Infinity"`, `"pearson":"NaN"`, `"rd_certified":"Infinity"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("new report lacks %s: %s", want, b)
		}
	}
	if strings.Contains(string(b), `"rd_mean"`) {
		t.Errorf("rd_mean not computed, yet written: %s", b)
	}
	old := strings.NewReplacer(`"Infinity"`, "null", `"NaN"`, "null").Replace(string(b))
	old = strings.Replace(old, `"invalid_pairs":12,`, `"rd_mean":null,"invalid_pairs":12,`, 1)
	var cells []*runCell
	for i, js := range []string{string(b), old} {
		dir := filepath.Join(root, fmt.Sprintf("seed=%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, train.ReportFile), []byte(js), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := readCell(dir)
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		cells = append(cells, c)
	}
	for i, c := range cells {
		a := c.Audits["principled"]
		if a == nil || !math.IsInf(a.RDMax, 1) || !math.IsNaN(a.RDMean) || !math.IsInf(a.BDPEpsilon, 1) || a.InvalidPairs != 12 {
			t.Errorf("cell %d: audit %+v, want rd_max +Inf, rd_mean NaN, bdp +Inf", i, a)
		}
		if cr := c.Certified; cr == nil || !math.IsInf(cr.RD, 1) || !math.IsInf(cr.Epsilon, 1) || !math.IsInf(cr.BDPEpsilon, 1) || cr.Reason != "C_mu unbounded" {
			t.Errorf("cell %d: certified %+v, want +Inf", i, cr)
		}
		if !math.IsNaN(c.Utility["pearson"]) || c.Utility["spearman"] != 0.5 || c.Chance != 0 || c.ChanceMetric != "spearman" {
			t.Errorf("cell %d: utility %v chance %v %s", i, c.Utility, c.Chance, c.ChanceMetric)
		}
	}
}

// TestTaskMetricsOtherTask: for a task that is not GLUE's (lid) the tables
// show the metrics its cells report without the losses, and select by the
// metric the runs were judged by (their collapse check's).
func TestTaskMetricsOtherTask(t *testing.T) {
	cells := []*runCell{{Utility: map[string]float64{"accuracy": 0.3, "macro_f1": 0.2, "loss": 1.6}, ChanceMetric: "macro_f1"},
		{Utility: map[string]float64{"accuracy": 0.4, "macro_f1": 0.3, "dev_loss": 1.2}}}
	ms, sel := taskMetrics("lid", cells)
	if strings.Join(ms, ",") != "accuracy,macro_f1" || sel != "macro_f1" {
		t.Errorf("metrics %v, selection %q; want [accuracy macro_f1], macro_f1", ms, sel)
	}
	if ms, sel := taskMetrics("lid", cells[1:]); sel != "accuracy" || len(ms) != 2 {
		t.Errorf("without a collapse metric: %v %q, want the first metric", ms, sel)
	}
	if ms, sel := taskMetrics("sst2", nil); sel != "accuracy" || len(ms) == 0 {
		t.Errorf("sst2: %v %q", ms, sel)
	}
}

// TestUtilitySplitLabels: the frontier's table and axis name the split the
// utility is on: test for a lid sweep (report.json utility_split), dev for
// a report that does not say (the GLUE runs before the field).
func TestUtilitySplitLabels(t *testing.T) {
	root := t.TempDir()
	f1 := func(v float64) map[string]any { return map[string]any{"macro_f1": v, "accuracy": v} }
	withCert := func(p, c map[string]any) map[string]any { p["certified"] = c; return p }
	lid := func(variant string, lambda, cmu float64, util map[string]any, p map[string]any) map[string]any {
		r := cellRep("lid", variant, lambda, cmu, 1, util, p)
		r["utility_split"] = "test"
		return r
	}
	writeReport(t, root, "lid/baseline/seed=1", lid("baseline", 0, 0, f1(0.3), nil))
	writeReport(t, root, "lid/nvdp-clipped/lambda=1e-6/seed=1", lid("nvdp-clipped", 1e-6, 3, f1(0.25),
		withCert(priv("principled", 10.0, 2.0, 9.0, 0), certBlock(32.0, 64.0, 65.0, true, ""))))
	old := cellRep("sst2", "baseline", 0, 0, 1, map[string]any{"accuracy": 0.9}, nil)
	delete(old, "utility_split")
	writeReport(t, root, "sst2/baseline/seed=1", old)
	cells, err := load(root)
	if err != nil {
		t.Fatal(err)
	}
	tb := build(cells, nil)
	splits := map[string]string{}
	for _, tt := range tb.Tasks {
		splits[tt.Task] = tt.UtilitySplit
	}
	if splits["lid"] != "test" || splits["sst2"] != "dev" {
		t.Fatalf("utility splits %v, want lid test and sst2 dev", splits)
	}
	var b strings.Builder
	for _, tt := range tb.Tasks {
		if tt.Task == "lid" {
			if tt.Frontier == nil || tt.Frontier.UtilitySplit != "test" {
				t.Fatalf("lid frontier %+v", tt.Frontier)
			}
			frontierMarkdown(&b, tt)
		}
	}
	if want := "Certified privacy-utility frontier (test Accuracy;"; !strings.Contains(b.String(), want) {
		t.Errorf("frontier table lacks %q:\n%s", want, b.String())
	}
}

// TestReadMissingCells: a sweep whose sweep.json (or, not finished, its
// stages.json) lists cells without report.json is an error naming each
// (with its status); with AllowPartial the others are tabulated and
// the missing ones listed (Tables.Missing, the Markdown's header line, JSON
// missing_cells). A tree without sweep.json is read as it is.
func TestReadMissingCells(t *testing.T) {
	root := t.TempDir()
	acc := map[string]any{"accuracy": 0.8}
	writeReport(t, root, "sst2/nvdp/lambda=1e-2/seed=1", cellRep("sst2", "nvdp", 0.01, 0, 1, acc, priv("principled", 0.3, 0.02, 10.5, 0)))
	if _, err := Read(root, Options{}); err != nil {
		t.Fatalf("no sweep.json: %v", err)
	}
	man := map[string]any{"cells": []map[string]any{
		{"id": "sst2/nvdp/lambda=1e-2/seed=1", "status": sweep.CellDone},
		{"id": "sst2/nvdp/lambda=1e-2/seed=2", "status": sweep.CellFailed},
		{"id": "sst2/nvdp/lambda=1e-1/seed=1", "status": sweep.CellPending},
	}}
	b, _ := json.Marshal(man)
	if err := os.WriteFile(filepath.Join(root, sweep.ManifestFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	want := []MissingCell{{"sst2/nvdp/lambda=1e-2/seed=2", sweep.CellFailed}, {"sst2/nvdp/lambda=1e-1/seed=1", sweep.CellPending}}
	_, err := Read(root, Options{})
	var me *MissingCellsError
	if !errors.As(err, &me) || !slices.Equal(me.Cells, want) {
		t.Fatalf("err = %v, want the missing cells %v", err, want)
	}
	for _, w := range []string{"2 cells without report.json", "sst2/nvdp/lambda=1e-2/seed=2 (failed)", "sst2/nvdp/lambda=1e-1/seed=1 (pending)"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	var logged bytes.Buffer // the warning that names the cells left out
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	tb, err := Read(root, Options{AllowPartial: true})
	if err != nil {
		t.Fatal(err)
	}
	if l := logged.String(); !strings.Contains(l, "a partial sweep") || !strings.Contains(l, "missing=2") ||
		!strings.Contains(l, `cells="sst2/nvdp/lambda=1e-2/seed=2 (failed), sst2/nvdp/lambda=1e-1/seed=1 (pending)"`) {
		t.Errorf("warning %q, want the cells left out", l)
	}
	if !slices.Equal(tb.Missing, want) || len(tb.Tasks) != 1 || len(tb.Tasks[0].Rows) != 1 || len(tb.Tasks[0].Rows[0].Cells) != 1 {
		t.Fatalf("partial: missing %v, tasks %+v", tb.Missing, tb.Tasks)
	}
	var md, js strings.Builder
	if err := writeMarkdown(&md, tb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "1 cells; ") || !strings.Contains(md.String(),
		"Partial sweep: 2 cells of its sweep.json without report.json, left out: sst2/nvdp/lambda=1e-2/seed=2 (failed), sst2/nvdp/lambda=1e-1/seed=1 (pending).") {
		t.Errorf("markdown does not name the missing cells:\n%s", md.String())
	}
	if err := writeJSON(&js, tb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"missing_cells"`) || !strings.Contains(js.String(), `"status": "failed"`) {
		t.Errorf("JSON lacks missing_cells: %s", js.String())
	}
	// A sweep in stages not finished: stages.json lists the cells.
	if err := os.Remove(filepath.Join(root, sweep.ManifestFile)); err != nil {
		t.Fatal(err)
	}
	stages, _ := json.Marshal(map[string]any{"grid": []map[string]any{}, "main": man["cells"]})
	if err := os.WriteFile(filepath.Join(root, sweep.StagesFile), stages, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(root, Options{}); !errors.As(err, &me) || !slices.Equal(me.Cells, want) {
		t.Errorf("stages.json: err = %v, want the missing cells %v", err, want)
	}
	many := make([]MissingCell, 12)
	for i := range many {
		many[i] = MissingCell{ID: fmt.Sprintf("c%d", i), Status: "failed"}
	}
	if got := MissingList(many); !strings.HasSuffix(got, "c9 (failed), and 2 more") || strings.Contains(got, "c10") {
		t.Errorf("MissingList of 12 = %q", got)
	}
}

// TestBestTieBreak: the best trade-off (Table 1) of tied mean utilities is
// the row with the lower mean rd_max, wherever it sorts, then the smaller
// lambda; a higher utility wins whatever its rd_max.
func TestBestTieBreak(t *testing.T) {
	type cell struct {
		lambda, acc, rdMax float64
	}
	for _, tc := range []struct {
		name       string
		cells      []cell
		wantLambda float64
	}{
		{"lower rd_max at the larger lambda", []cell{{0.01, 0.8, 0.5}, {0.1, 0.8, 0.2}}, 0.1},
		{"lower rd_max at the smaller lambda", []cell{{0.001, 0.8, 0.1}, {0.01, 0.8, 0.3}}, 0.001},
		{"three tied, the middle lowest", []cell{{0.001, 0.7, 0.4}, {0.01, 0.7, 0.05}, {0.1, 0.7, 0.3}}, 0.01},
		{"same rd_max: the smaller lambda", []cell{{0.01, 0.8, 0.2}, {0.1, 0.8, 0.2}}, 0.01},
		{"higher utility beats lower rd_max", []cell{{0.01, 0.81, 0.9}, {0.1, 0.8, 0.1}}, 0.01},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for _, c := range tc.cells {
				writeReport(t, root, fmt.Sprintf("sst2/nvdp/lambda=%g/seed=1", c.lambda), cellRep("sst2", "nvdp", c.lambda, 0, 1,
					map[string]any{"accuracy": c.acc}, priv("principled", c.rdMax, c.rdMax/10, 10, 0)))
			}
			cells, err := load(root)
			if err != nil {
				t.Fatal(err)
			}
			tb := build(cells, nil)
			if len(tb.Best) != 1 || tb.Best[0].AuditMode != "principled" {
				t.Fatalf("best %+v, want one principled entry", tb.Best)
			}
			if got := tb.Best[0].Row.Lambda; got != tc.wantLambda {
				t.Errorf("best lambda %g (rd_max %v), want %g", got, tb.Best[0].Privacy.RDMax.Mean, tc.wantLambda)
			}
		})
	}
}
