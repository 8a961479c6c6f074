package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/release"
	"github.com/nvdp-project/nvdp/safetensors"
	"github.com/nvdp-project/nvdp/train"
)

// tinyModel trains a tiny model of variant (a 1-layer encoder of hidden size 16, max-seq-len 8,
// one epoch) on a synthetic SST-2 and returns its directory.
// varyingNoise is the tiny nvdp-clipped model of the hand-set default clipping, whose noise scale and
// pseudo-counts depend on the input (tinyModel's nvdp-clipped has fixed noise).
const varyingNoise = "nvdp-clipped-varying"

func tinyModel(t *testing.T, glueDir, vocab, variant string) string {
	t.Helper()
	o := model.DefaultOptions()
	fixed := variant == nvib.ModelNVDPClipped
	if variant == varyingNoise {
		variant = nvib.ModelNVDPClipped
	}
	o.Task, o.GlueDir, o.Encoder, o.Vocab, o.Variant = "sst2", glueDir, "scratch:bert-tiny", vocab, variant
	o.Epochs, o.BatchSize, o.MaxSeqLen, o.Out = 1, 8, 8, filepath.Join(t.TempDir(), "model")
	o.HandSetClipping = nvib.Calibratable(variant) // no privacy target: the tests' clipping as given
	if fixed {                                     // fixed noise: the design whose release is exact (floor = cap, C_amin = C_amax)
		o.LogvarMargin = math.Log(o.ClipOrder / (o.ClipOrder - 1))
		o.CAlphaMax, o.CAlphaMin = 1.5, 1.5
	}
	c, err := encoder.Preset("bert-tiny")
	if err != nil {
		t.Fatal(err)
	}
	c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize, c.MaxPositionEmbeddings = 16, 1, 2, 32, 16
	o.ScratchConfig = &c
	if _, err := train.Run(context.Background(), o, nil); err != nil {
		t.Fatal(err)
	}
	return o.Out
}

// writeFile writes content to name in a new temporary directory and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// embedJSON runs `nvdp embed --json` and decodes the metadata it prints.
func embedJSON(t *testing.T, args ...string) *release.Metadata {
	t.Helper()
	out, err := runCmd(newEmbedCmd(), append(args, "--json", "--no-progress", "--max-epsilon", "inf")...) // the tiny models are hand-set
	if err != nil {
		t.Fatalf("embed %v: %v\n%s", args, err, out)
	}
	var md release.Metadata
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &md); err != nil {
		t.Fatalf("embed --json: %v\n%s", err, out)
	}
	return &md
}

var embedTexts = []string{"the movie is good", "awful", "the movie is very very bad and the plot is awful too", "great",
	"is", "the good the bad", "very", "movie movie", "unknown words here", "good good good"}

// `nvdp embed` end to end on a model trained in the test: the safetensors output has z [texts, 1,
// N, P] and pi [texts, 1, N] with weights that are positive and sum to 1, its metadata holds the
// model, the counts and the guarantee that `nvdp certify --model` prints; --seed reproduces the
// file byte for byte and marks it not for release; without --seed the noise differs and the file
// is not marked.
func TestEmbedEndToEnd(t *testing.T) {
	glueDir, vocab := synthSST2(t, 24)
	modelDir := tinyModel(t, glueDir, vocab, nvib.ModelNVDPClipped)
	input := writeFile(t, "texts.txt", strings.Join(embedTexts, "\n")+"\n")
	dir := t.TempDir()
	out := filepath.Join(dir, "a.safetensors")
	md := embedJSON(t, "--model", modelDir, "--input", input, "--out", out, "--seed", "5", "--batch-size", "3")
	f, err := safetensors.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	file, err := release.ParseMetadataKeys(f.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	z, _ := f.Get("z")
	pi, _ := f.Get("pi")
	M, N, P := len(embedTexts), 9, 16
	if z == nil || pi == nil || !slices.Equal(z.Shape, []int{M, 1, N, P}) || !slices.Equal(pi.Shape, []int{M, 1, N}) {
		t.Fatalf("tensors %v", f.Tensors)
	}
	weights, _ := pi.Float32()
	for i := range M {
		s := 0.0
		for _, w := range weights[i*N : (i+1)*N] {
			if !(w > 0) {
				t.Fatalf("text %d: weight %v (every component has mass)", i, w)
			}
			s += float64(w)
		}
		if math.Abs(s-1) > 1e-5 {
			t.Errorf("text %d: weights sum to %v", i, s)
		}
	}
	cert := certifyJSON(t, "--model", modelDir)
	g := file.Guarantee
	// the release is exact: every value on the lattice the metadata states (z / G an integer, exactly)
	if g.Release == nil || !g.Release.Exact || g.Release.Lattice != math.Ldexp(1, g.Release.LatticeExp) {
		t.Fatalf("metadata release %+v, want exact with its lattice", g.Release)
	}
	zs, _ := z.Float32()
	for k, v := range zs {
		if q := float64(v) / g.Release.Lattice; q != math.Trunc(q) {
			t.Fatalf("z[%d] = %v is not on the lattice 2^%d", k, v, g.Release.LatticeExp)
		}
	}
	if rel, ok := cert["release"].(map[string]any); !ok || rel["exact"] != true || rel["lattice_exp"] != float64(g.Release.LatticeExp) {
		t.Errorf("certify --model: release %v, embed %+v", cert["release"], g.Release)
	}
	if file.Texts != int64(M) || file.Releases != int64(M) || file.ReleasesPerText != 1 || !file.Seeded || file.Warning != release.NotForRelease ||
		file.Model.Dir != modelDir || file.Model.Variant != nvib.ModelNVDPClipped || file.Model.N != N || file.Model.P != P ||
		float64(g.Epsilon) != cert["epsilon"] || float64(g.BestOrder) != cert["best_order"] || g.Label != "certified" || g.Scope != cert["scope"] ||
		md.Texts != file.Texts || g.Delta != privacy.DefaultDelta {
		t.Errorf("metadata %+v, guarantee eps %v at %v (%s); certify --model: eps %v at %v", file, g.Epsilon, g.BestOrder, g.Scope, cert["epsilon"], cert["best_order"])
	}
	orders := cert["orders"].([]any)
	for i, p := range g.Curve { // as JSON: +Inf is "Infinity" in both
		a, _ := json.Marshal(p)
		b, _ := json.Marshal(orders[i])
		if string(a) != string(b) {
			t.Fatalf("curve point %d: %s, certify --model %s", i, a, b)
		}
	}
	if len(g.Curve) != len(orders) {
		t.Errorf("curve of %d orders, certify --model %d", len(g.Curve), len(orders))
	}
	again := filepath.Join(dir, "b.safetensors")
	embedJSON(t, "--model", modelDir, "--input", input, "--out", again, "--seed", "5", "--batch-size", "3")
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Error("--seed 5 twice: the files differ")
	}
	unseeded := filepath.Join(dir, "real.safetensors")
	stdout, err := runCmd(newEmbedCmd(), "--model", modelDir, "--input", input, "--out", unseeded, "--no-progress", "--max-epsilon", "inf")
	if err != nil {
		t.Fatal(err)
	}
	rf, err := safetensors.ReadFile(unseeded)
	if err != nil {
		t.Fatal(err)
	}
	rmd, _ := release.ParseMetadataKeys(rf.Metadata)
	rz, _ := rf.Get("z")
	if rmd == nil || rmd.Seeded || rmd.Warning != "" || bytes.Equal(rz.Data, z.Data) || strings.Contains(stdout, "WARNING") ||
		!strings.Contains(stdout, "epsilon per release") || !strings.Contains(stdout, fmt.Sprintf("%d texts", M)) {
		t.Errorf("without --seed: metadata %+v, same noise %v, stdout:\n%s", rmd, bytes.Equal(rz.Data, z.Data), stdout)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Errorf("%d files in the output directory, want 3 (no temporary file left)", len(entries))
	}
}

// TSV and JSON-lines inputs (a file and stdin) into JSON lines with k = 3 releases per text: one
// object per text with k releases of [N][P] and [N], the metadata on the first line with the cost
// per text of the 3 releases composed, which is `nvdp certify --model --releases 3`.
func TestEmbedInputsAndComposition(t *testing.T) {
	glueDir, vocab := synthSST2(t, 24)
	modelDir := tinyModel(t, glueDir, vocab, nvib.ModelNVDPClipped)
	var tsv, jsonl strings.Builder
	tsv.WriteString("id\tsentence\n")
	for i, s := range embedTexts {
		fmt.Fprintf(&tsv, "%d\t%s\n", i, s)
		b, _ := json.Marshal(map[string]any{"id": i, "text": s})
		jsonl.Write(append(b, '\n'))
	}
	out := filepath.Join(t.TempDir(), "dev.jsonl")
	embedJSON(t, "--model", modelDir, "--input", writeFile(t, "dev.tsv", tsv.String()), "--column", "sentence", "--out", out,
		"--releases-per-text", "3", "--seed", "1")
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 1+len(embedTexts) {
		t.Fatalf("%d lines, want the metadata and %d texts", len(lines), len(embedTexts))
	}
	var md release.Metadata
	if err := json.Unmarshal([]byte(lines[0]), &md); err != nil {
		t.Fatal(err)
	}
	one, all := md.Guarantee, md.GuaranteePerText
	for i, p := range all.Curve {
		if math.Abs(float64(p.RD)-3*float64(one.Curve[i].RD)) > 1e-12*float64(p.RD) {
			t.Fatalf("order %v: per text %v, want 3 x %v", p.Order, p.RD, one.Curve[i].RD)
		}
	}
	cert3 := certifyJSON(t, "--model", modelDir, "--releases", "3")
	if md.ReleasesPerText != 3 || md.Releases != int64(3*len(embedTexts)) || all.Releases != 3 || float64(all.Epsilon) != cert3["epsilon"] ||
		!(all.Epsilon > one.Epsilon) || md.Format != release.MetadataFormat {
		t.Errorf("metadata: %d per text, %d releases, per text epsilon %v (certify --releases 3: %v), one release %v",
			md.ReleasesPerText, md.Releases, all.Epsilon, cert3["epsilon"], one.Epsilon)
	}
	for i, line := range lines[1:] {
		var o struct {
			Index      int           `json:"index"`
			Embeddings [][][]float32 `json:"embeddings"`
			Weights    [][]float32   `json:"weights"`
		}
		if err := json.Unmarshal([]byte(line), &o); err != nil || o.Index != i || len(o.Embeddings) != 3 || len(o.Weights) != 3 ||
			len(o.Embeddings[2]) != 9 || len(o.Embeddings[2][8]) != 16 || len(o.Weights[1]) != 9 || slices.Equal(o.Weights[0], o.Weights[1]) {
			t.Fatalf("line %d: %v %+v", i+2, err, o)
		}
	}
	// the JSON-lines field of stdin gives the same releases as the TSV column
	cmd := newEmbedCmd()
	cmd.SetIn(strings.NewReader(jsonl.String()))
	out2 := filepath.Join(t.TempDir(), "stdin.jsonl")
	if _, err := runCmd(cmd, "--model", modelDir, "--input", "-", "--field", "text", "--out", out2, "--releases-per-text", "3", "--seed", "1", "--no-progress", "--max-epsilon", "inf"); err != nil {
		t.Fatal(err)
	}
	data2, _ := os.ReadFile(out2)
	sc := bufio.NewScanner(bytes.NewReader(data2))
	sc.Buffer(nil, 1<<24)
	for i := 0; sc.Scan(); i++ {
		if i > 0 && sc.Text() != lines[i] {
			t.Fatalf("line %d of the JSON-lines input's output differs from the TSV input's", i+1)
		}
	}
}

// Bad inputs fail naming the flag, file and line, and leave no output and no temporary file: a
// missing column or field, a bad JSON line, an empty text, models without a private release, bad
// flags.
func TestEmbedBadInputs(t *testing.T) {
	glueDir, vocab := synthSST2(t, 24)
	modelDir := tinyModel(t, glueDir, vocab, nvib.ModelNVDPClipped)
	lines := writeFile(t, "in.txt", "good movie\nbad movie\n")
	tsv := writeFile(t, "in.tsv", "id\tsentence\n1\tgood\n")
	jsonl := writeFile(t, "in.jsonl", "{\"text\":\"good\"}\n{\"text\":\"bad\"}\n{\"text\":\"bad\"\n")
	withEmpty := writeFile(t, "empty.txt", "good\nbad\n\ngood\n")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing column", []string{"--input", tsv, "--column", "text"}, `--input: ` + tsv + `:1: header has no column "text" (columns: "id" "sentence")`},
		{"missing field", []string{"--input", jsonl, "--field", "sentence"}, jsonl + `:1: no field "sentence"`},
		{"bad JSON line", []string{"--input", jsonl, "--field", "text", "--batch-size", "1"}, jsonl + ":3: not a JSON object"},
		{"empty text", []string{"--input", withEmpty, "--batch-size", "2"}, withEmpty + ":3: empty text"},
		{"column and field", []string{"--input", tsv, "--column", "sentence", "--field", "text"}, "--column and --field: give one"},
		{"k 0", []string{"--input", lines, "--releases-per-text", "0"}, "--releases-per-text 0: must be >= 1"},
		{"k a billion", []string{"--input", lines, "--releases-per-text", "1000000000"}, "--releases-per-text 1000000000: a batch of "},
		// the library names its options; the CLI maps them to flags (issue 32)
		{"k a billion, the remedy", []string{"--input", lines, "--releases-per-text", "1000000000"}, "GiB a batch may hold: lower --releases-per-text or --batch-size"},
		{"batch too large", []string{"--input", lines, "--batch-size", "100000000"}, "--batch-size 100000000: a batch of 100000000 texts x 1 releases"},
		{"batch 0", []string{"--input", lines, "--batch-size", "0"}, "--batch-size 0: must be >= 1"},
		{"format", []string{"--input", lines, "--format", "csv"}, `--format "csv": want safetensors or jsonl`},
		{"delta", []string{"--input", lines, "--delta", "2"}, "--delta 2: must be in (0, 1)"},
		{"missing input", []string{"--input", lines + ".missing"}, "--input: open"},
		{"model dir", []string{"--input", lines, "--model", t.TempDir()}, "--model: release: "},
		{"max epsilon 0", []string{"--input", lines, "--max-epsilon", "0"}, "--max-epsilon 0: must be > 0"},
		{"unknown device", []string{"--input", lines, "--device", "gpu"}, `--device gpu --precision fp32: device "gpu": want cpu, cuda or auto`},
		{"bf16 on the CPU", []string{"--input", lines, "--device", "cpu", "--precision", "bf16"}, "--device cpu --precision bf16: "},
		// the tiny model is hand-set: it certifies thousands, above the default threshold (8)
		{"above the max epsilon", []string{"--input", lines, "--max-epsilon", "8"}, "--max-epsilon 8: the model certifies epsilon "},
	} {
		dir := t.TempDir()
		out := filepath.Join(dir, "out.safetensors")
		args := append([]string{"--model", modelDir, "--out", out, "--no-progress", "--max-epsilon", "inf"}, tc.args...)
		_, err := runCmd(newEmbedCmd(), args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%s: %d files written", tc.name, len(entries))
		}
	}
	if _, err := runCmd(newEmbedCmd(), "--model", modelDir, "--input", lines, "--out", lines); err == nil || !strings.Contains(err.Error(), "is the input file") {
		t.Errorf("--out the input: %v", err)
	}
	for _, tc := range []struct{ variant, want string }{
		{nvib.ModelBaseline, "nothing private to release"},
		{nvib.ModelNVDP, "no finite certificate"},
		{varyingNoise, "depend on the input"},
		{varyingNoise, "(--allow-unproved-release)"},
	} {
		dir := t.TempDir()
		_, err := runCmd(newEmbedCmd(), "--model", tinyModel(t, glueDir, vocab, tc.variant), "--input", lines, "--out", filepath.Join(dir, "o"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s model: error %v, want %q", tc.variant, err, tc.want)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%s model: %d files written", tc.variant, len(entries))
		}
	}
	// --allow-unproved-release releases the varying-noise model, and its metadata says it is not exact
	unproved := filepath.Join(t.TempDir(), "u.safetensors")
	md := embedJSON(t, "--model", tinyModel(t, glueDir, vocab, varyingNoise), "--input", lines, "--out", unproved, "--max-epsilon", "inf", "--allow-unproved-release")
	if r := md.Guarantee.Release; r == nil || r.Exact || r.Sampler != privacy.FloatSampler || !strings.Contains(r.Reason, "depend on the input") {
		t.Errorf("--allow-unproved-release: metadata release %+v, want not exact with its reason", r)
	}
	if c, _, err := rootCmd.Find([]string{"embed"}); err != nil || c.Name() != "embed" {
		t.Errorf("embed not registered on rootCmd: %v", err)
	}
}

// TestEmbedRemovesStaleTemp (issue 32): the hidden temporary files an `nvdp embed` killed with -9
// left beside its output (".OUT.tmpDIGITS": the output being written and the safetensors' pi
// scratch file) are removed, and logged, when the next run of that output starts; another output's
// temporary files and names that only look alike stay. Before, they stayed forever.
func TestEmbedRemovesStaleTemp(t *testing.T) {
	glueDir, vocab := synthSST2(t, 24)
	modelDir := tinyModel(t, glueDir, vocab, nvib.ModelNVDPClipped)
	input := writeFile(t, "texts.txt", strings.Join(embedTexts, "\n")+"\n")
	dir := t.TempDir()
	kept := []string{".other.safetensors.tmp7", ".a.safetensors.tmpx", "a.safetensors.tmp5"}
	for _, name := range kept {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		out   string
		stale []string
	}{
		{"a.safetensors", []string{".a.safetensors.tmp2718281828", ".a.safetensors.tmp31"}},
		{"b.jsonl", []string{".b.jsonl.tmp42"}},
	} {
		for _, name := range c.stale {
			if err := os.WriteFile(filepath.Join(dir, name), make([]byte, 1<<20), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		var logs bytes.Buffer
		prev := slog.Default()
		slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
		md := embedJSON(t, "--model", modelDir, "--input", input, "--out", filepath.Join(dir, c.out), "--seed", "3")
		slog.SetDefault(prev)
		if md.Texts != int64(len(embedTexts)) {
			t.Errorf("%s: %d texts", c.out, md.Texts)
		}
		for _, name := range c.stale {
			if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: stale %s: %v, want it removed", c.out, name, err)
			}
			if l := logs.String(); !strings.Contains(l, "removed the temporary files of an interrupted write of the output") || !strings.Contains(l, filepath.Join(dir, name)) {
				t.Errorf("%s: log %q does not name %s", c.out, l, name)
			}
		}
	}
	var left []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{".a.safetensors.tmpx", ".other.safetensors.tmp7", "a.safetensors", "a.safetensors.tmp5", "b.jsonl"}; !slices.Equal(left, want) {
		t.Errorf("directory %v, want %v", left, want)
	}
}

// `nvdp embed --device cuda` on the CUDA stand-in (internal/cudaemu; the
// real GPU with NVDP_CUDA_REAL=1) computes the posteriors on the device and
// releases them with the host's exact sampler: with the same --seed its
// output is the --device cpu output up to the means' rounding (the Dirichlet
// weights bit for bit; each value on the lattice and within the device
// posterior's tolerance of the CPU's in lattice steps, release's
// tolDeviceMu = 1e-4 of the largest possible |mu|, the prior's centre plus
// C_mu; nearly all values equal), and the metadata's model.device names
// where the posteriors were computed. serve's loader (loadReleaser) takes
// the device too, and /v1/info's model says it.
func TestEmbedOnDevice(t *testing.T) {
	useStandIn(t)
	glueDir, vocab := synthSST2(t, 24)
	modelDir := tinyModel(t, glueDir, vocab, nvib.ModelNVDPClipped)
	input := writeFile(t, "texts.txt", strings.Join(embedTexts, "\n")+"\n")
	z, pi, mds := map[string][]float32{}, map[string][]float32{}, map[string]*release.Metadata{}
	for _, device := range []string{"cpu", "cuda"} {
		out := filepath.Join(t.TempDir(), device+".safetensors")
		mds[device] = embedJSON(t, "--model", modelDir, "--input", input, "--out", out, "--seed", "5", "--batch-size", "4", "--device", device)
		f, err := safetensors.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		zt, _ := f.Get("z")
		pt, _ := f.Get("pi")
		if zt == nil || pt == nil {
			t.Fatalf("--device %s: tensors %v", device, f.Tensors)
		}
		z[device], _ = zt.Float32()
		pi[device], _ = pt.Float32()
	}
	if got := mds["cpu"].Model.Device; got != "cpu" {
		t.Errorf("--device cpu: model.device %q", got)
	}
	if got := mds["cuda"].Model.Device; !strings.HasPrefix(got, "cuda (") {
		t.Errorf("--device cuda: model.device %q, want the GPU's backend", got)
	}
	rel := mds["cuda"].Guarantee.Release
	if rel == nil || !rel.Exact || len(z["cuda"]) != len(z["cpu"]) || len(z["cpu"]) != len(embedTexts)*9*16 {
		t.Fatalf("--device cuda: release %+v, %d values (cpu %d)", rel, len(z["cuda"]), len(z["cpu"]))
	}
	if !slices.Equal(pi["cuda"], pi["cpu"]) {
		t.Errorf("the Dirichlet weights differ between the devices: %v, %v", pi["cuda"][:9], pi["cpu"][:9])
	}
	r, err := release.Load(modelDir, release.Options{})
	if err != nil {
		t.Fatal(err)
	}
	set := r.ClipSet()
	centre := 0.0
	for _, c := range set.PriorMu {
		centre = max(centre, math.Abs(c))
	}
	steps := math.Ceil(1e-4*(centre+set.CMu)/rel.Lattice) + 1
	differ := 0
	for k, v := range z["cuda"] {
		d := math.Abs(float64(v)-float64(z["cpu"][k])) / rel.Lattice
		if d != math.Trunc(d) || d > steps {
			t.Fatalf("value %d: cuda %v, cpu %v: %g lattice steps apart, tolerance %g", k, v, z["cpu"][k], d, steps)
		}
		if d != 0 {
			differ++
		}
	}
	t.Logf("%d of %d values differ between the devices (tolerance %g lattice steps)", differ, len(z["cpu"]), steps)
	if differ > len(z["cpu"])/20 {
		t.Errorf("%d of %d values differ between the devices: more than the means' rounding", differ, len(z["cpu"]))
	}

	f := deviceFlags{device: "cuda", precision: "fp32"}
	d, err := f.open()
	if err != nil {
		t.Fatal(err)
	}
	defer cuda.CloseLogged(d)
	sr, err := loadReleaser(modelDir, release.Options{Device: d})
	if err != nil {
		t.Fatal(err)
	}
	if info, ok := sr.Model().(release.ModelInfo); !ok || info.Device != d.Backend() {
		t.Errorf("serve's model %+v, want device %q", sr.Model(), d.Backend())
	}
	if c, ok := sr.(interface{ Close() error }); !ok || c.Close() != nil {
		t.Errorf("serve's releaser does not close cleanly")
	}
}
