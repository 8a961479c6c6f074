package release

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/internal/cudaemu"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/noise"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/train"
)

// modelsDir holds the tiny models the tests train once (TestMain removes it).
var modelsDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "release-test-")
	if err != nil {
		panic(err)
	}
	modelsDir = dir
	code := cudaemu.Main(m) // the stand-in's kernel cache removed too
	os.RemoveAll(dir)
	os.Exit(code)
}

var words = strings.Fields("good great fine bad awful poor the movie is very a plot and acting")

// synthTask writes a synthetic SST-2 (label: whether a positive word occurs) and its WordPiece vocab.
func synthTask(dir string) (glueDir, vocab string, err error) {
	vocab = filepath.Join(dir, "vocab.txt")
	if err := os.WriteFile(vocab, []byte(strings.Join(append([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}, words...), "\n")+"\n"), 0o644); err != nil {
		return "", "", err
	}
	glueDir = filepath.Join(dir, "glue")
	if err := os.MkdirAll(filepath.Join(glueDir, "SST-2"), 0o755); err != nil {
		return "", "", err
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, split := range []string{"train", "dev"} {
		var b strings.Builder
		b.WriteString("sentence\tlabel\n")
		for range 32 {
			label := rng.IntN(2)
			fmt.Fprintf(&b, "the movie is %s %s\t%d\n", words[3*(1-label)+rng.IntN(3)], words[6+rng.IntN(8)], label)
		}
		if err := os.WriteFile(filepath.Join(glueDir, "SST-2", split+".tsv"), []byte(b.String()), 0o644); err != nil {
			return "", "", err
		}
	}
	return glueDir, vocab, nil
}

// varying names the tiny nvdp-clipped model whose noise depends on the input (tinyOptions): the
// hand-set default clipping, a sigma range and C_amin < C_amax. The nvdp-clipped model of the other
// tests has fixed noise (floor = cap, C_amin = C_amax), the design whose release is exact.
const varying = "nvdp-clipped-varying"

// tinyOptions are the options of a tiny model of variant (hidden 16, one layer, max-seq-len 8,
// P = 8 for the clipped model) on the synthetic task in dir; nvdp-clipped has fixed noise (the
// logvar margin at its maximum: floor = cap; C_amin = C_amax = 1.5), varying the hand-set default
// clipping.
func tinyOptions(t *testing.T, dir, variant string) model.Options {
	t.Helper()
	glueDir, vocab, err := synthTask(dir)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := encoder.Preset("bert-tiny")
	if err != nil {
		t.Fatal(err)
	}
	enc.HiddenSize, enc.NumHiddenLayers, enc.NumAttentionHeads, enc.IntermediateSize, enc.MaxPositionEmbeddings = 16, 1, 2, 32, 16
	o := model.DefaultOptions()
	fixed := variant == nvib.ModelNVDPClipped
	if variant == varying {
		variant = nvib.ModelNVDPClipped
	}
	o.Task, o.GlueDir, o.Encoder, o.Vocab, o.Variant, o.ScratchConfig = "sst2", glueDir, "scratch:bert-tiny", vocab, variant, &enc
	o.Epochs, o.BatchSize, o.EvalBatchSize, o.LR, o.MaxSeqLen, o.Seed = 1, 8, 5, 3e-3, 8, 1
	o.Out, o.HandSetClipping = filepath.Join(dir, "model"), nvib.Calibratable(variant) // no privacy target: the clipping as given
	if variant == nvib.ModelNVDPClipped {
		p := 8
		o.LatentDim = &p
	}
	if fixed {
		o.LogvarMargin = math.Log(o.ClipOrder / (o.ClipOrder - 1))
		o.CAlphaMax, o.CAlphaMin = 1.5, 1.5
	}
	return o
}

var (
	trainMu sync.Mutex
	trained = map[string]string{}
)

// tinyModel trains (once per test binary) a tiny model of variant and returns its directory.
func tinyModel(t *testing.T, variant string) string {
	t.Helper()
	trainMu.Lock()
	defer trainMu.Unlock()
	if dir, ok := trained[variant]; ok {
		return dir
	}
	dir := filepath.Join(modelsDir, variant)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	o := tinyOptions(t, dir, variant)
	if _, err := train.Run(context.Background(), o, nil); err != nil {
		t.Fatalf("training the tiny %s model: %v", variant, err)
	}
	trained[variant] = o.Out
	return o.Out
}

func load(t *testing.T, variant string) *Releaser {
	t.Helper()
	r, err := Load(tinyModel(t, variant), Options{AllowUnproved: variant == varying})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var texts = []string{"the movie is good", "awful plot", "a very very fine movie and the acting is great and the plot",
	"bad", "the acting", "poor poor movie", "lovely unknown words", "the"}

// Load accepts nvdp-clipped and gaussian models and refuses, naming why, the models without a
// finite certificate or without a private release; the shape and model description are the model's.
func TestLoad(t *testing.T) {
	for _, tc := range []struct {
		variant string
		n, p    int
	}{{nvib.ModelNVDPClipped, 9, 8}, {nvib.ModelGaussian, 9, 16}} {
		r := load(t, tc.variant)
		if n, p := r.Shape(); n != tc.n || p != tc.p {
			t.Errorf("%s: shape [%d, %d], want [%d, %d]", tc.variant, n, p, tc.n, tc.p)
		}
		m := r.Model()
		if m.Variant != tc.variant || m.Mode != privacy.ModePrincipled || m.Task != "sst2" || m.N != tc.n || m.P != tc.p ||
			m.MaxSeqLen != 8 || m.Dir != tinyModel(t, tc.variant) || m.Constants["clip_mu"] == "" {
			t.Errorf("%s: model %+v", tc.variant, m)
		}
		m.Constants["clip_mu"] = "changed"
		if r.Model().Constants["clip_mu"] == "changed" {
			t.Errorf("%s: Model() shares its constants with the caller", tc.variant)
		}
	}
	for _, tc := range []struct {
		name string
		mod  func(*model.Options)
		want string
	}{
		{"baseline", func(o *model.Options) { o.Variant = nvib.ModelBaseline }, "nothing private to release"},
		{"nvdp", func(o *model.Options) { o.Variant = nvib.ModelNVDP }, "no finite certificate"},
		{"reference", func(o *model.Options) { o.Mode, o.LatentDim = privacy.ModeReference, nil }, "reference mode"},
		{"C_amin 0", func(o *model.Options) { o.CAlphaMin = 0 }, "certifies no finite bound"},
	} {
		o := tinyOptions(t, t.TempDir(), nvib.ModelNVDPClipped)
		tc.mod(&o)
		o.Resolve()
		c, err := model.Check(o)
		if err != nil {
			t.Fatal(err)
		}
		b, err := model.Build(c, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if _, err := New(b, Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	// a noise that depends on the input: refused, saying why, unless an unproved release is allowed,
	// which the guarantee then states
	if _, err := Load(tinyModel(t, varying), Options{}); !errors.Is(err, privacy.ErrNotFixedNoise) ||
		!strings.Contains(err.Error(), "depend on the input") || !strings.Contains(err.Error(), "fixed noise") {
		t.Errorf("varying noise: error %v, want privacy.ErrNotFixedNoise saying why and how to train a fixed-noise model", err)
	}
	if r := load(t, varying); r.Exact() || r.Guarantee().Release == nil || r.Guarantee().Release.Exact || r.Guarantee().Release.Reason == "" {
		t.Errorf("varying noise allowed: Exact %v, release %+v; want not exact, with the reason", r.Exact(), r.Guarantee().Release)
	}
	for _, v := range []string{nvib.ModelNVDPClipped, nvib.ModelGaussian} {
		if r := load(t, v); !r.Exact() || !r.Guarantee().Release.Exact || r.Guarantee().Release.LatticeExp >= 0 {
			t.Errorf("%s: Exact %v, release %+v; want exact on a lattice finer than 1", v, r.Exact(), r.Guarantee().Release)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing"), Options{}); err == nil {
		t.Error("a missing model directory was loaded")
	}
}

// evalInputs tokenises texts as the model's evaluation does (model.Encode of a split) and returns its
// batches of size bs padded to the release length (model.EvalPadLen).
func evalInputs(t *testing.T, b *model.TextModel, texts []string, bs int) []encoder.Input {
	t.Helper()
	ds := &glue.Dataset{Task: b.Task, Split: "dev", Path: "texts"}
	for i, s := range texts {
		ds.Examples = append(ds.Examples, glue.Example{Index: i, TextA: s, HasLabel: true, Line: i + 1})
	}
	enc, err := model.Encode(b.Tokenizer, ds, b.Options.MaxSeqLen)
	if err != nil {
		t.Fatal(err)
	}
	ins, _ := enc.Batches(bs, model.EvalPadLen(b.Model, b.Options.MaxSeqLen))
	return ins
}

// An unproved release (a model whose noise depends on the input, Options.AllowUnproved) is the
// evaluation's sample: for one text and the same seed, Z and pi equal those of the model's own forward
// pass at evaluation (nvib.Model.Forward, the path of train.Evaluate); for many texts, each equals
// nvib.Draw of its posterior, computed by the evaluation's batching, with the noise taken text after
// text from one stream.
func TestUnprovedReleaseIsTheEvaluationSample(t *testing.T) {
	ctx := context.Background()
	r := load(t, varying)
	b := r.bundle
	for i, text := range texts[:3] {
		seed := uint64(10 + i)
		got, err := r.Release(ctx, []string{text}, NewSeededSource(seed))
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := b.Model.Forward(evalInputs(t, b, []string{text}, 1)[0], nil,
			nvib.ForwardOptions{Rng: rand.New(rand.NewChaCha8(seedKey(seed))), KLScale: 1})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got[0].Z, out.Sample.Z.Data) || !slices.Equal(got[0].Pi, out.Sample.Dir.Pi) {
			t.Errorf("text %d: the release is not the evaluation's sample", i)
		}
	}
	got, err := r.Release(ctx, texts, NewSeededSource(7))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewChaCha8(seedKey(7)))
	k := 0
	for _, in := range evalInputs(t, b, texts, r.BatchSize()) {
		post, err := b.Model.Posterior(in)
		if err != nil {
			t.Fatal(err)
		}
		for i := range in.B {
			s := nvib.Draw(example(post, i), rng)
			if !slices.Equal(got[k].Z, s.Z.Data) || !slices.Equal(got[k].Pi, s.Dir.Pi) {
				t.Errorf("text %d: release differs from the draw of its evaluation posterior", k)
			}
			k++
		}
	}
}

// An exact release (docs/privacy.md, "Floating-point safety") of a fixed-noise model: every value of Z
// lies on the lattice (z / G an integer, checked exactly), each row's lattice mean stays in the clip
// ball, and the release is G (m + n) with m each mean rounded toward the ball's centre and n, then pi,
// taken from the seeded stream text after text (noise.Noise, then nvib.DrawWeights; a gaussian model's
// weights are 1/N), whatever the batch size. The posteriors are the evaluation's (its batching).
func TestExactRelease(t *testing.T) {
	ctx := context.Background()
	for _, variant := range []string{nvib.ModelNVDPClipped, nvib.ModelGaussian} {
		r := load(t, variant)
		b := r.bundle
		lat, lv, centres, err := r.ClipSet().ReleaseLattice()
		if err != nil {
			t.Fatal(err)
		}
		G, C := lat.G(), privacy.StoredRadius(r.ClipSet().CMu)
		got, err := r.Release(ctx, texts, NewSeededSource(7))
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewChaCha8(seedKey(7)))
		k := 0
		N, P := r.Shape()
		for _, in := range evalInputs(t, b, texts, r.BatchSize()) {
			post, err := b.Model.Posterior(in)
			if err != nil {
				t.Fatal(err)
			}
			for i := range in.B {
				ex := example(post, i)
				n := make([]int64, N*P)
				noise.NewNoise(lat, rng).Fill(n)
				pi, _ := nvib.UniformWeights(N)
				if variant != nvib.ModelGaussian {
					alpha := make([]float32, N)
					for c := range alpha {
						alpha[c] = float32(r.ClipSet().AlphaMax)
					}
					alpha[0] = float32(r.ClipSet().PriorAlpha)
					pi, _ = nvib.DrawWeights(alpha, rng)
				}
				for c := range N {
					var norm2 float64
					centre := float64(centres[0]) * G
					for j := range P {
						q := c*P + j
						if ex.Logvar.Data[q] != lv {
							t.Fatalf("%s text %d: logvar %v, the fixed noise is %v", variant, k, ex.Logvar.Data[q], lv)
						}
						m, err := lat.MeanIndex(ex.Mu.Data[q], centres[0])
						if err != nil {
							t.Fatal(err)
						}
						z := got[k].Z[q]
						if q := float64(z) / G; q != math.Trunc(q) {
							t.Fatalf("%s text %d: z = %v is not on the lattice 2^%d", variant, k, z, lat.Exp)
						}
						if want := float32(float64(m+n[q]) * G); z != want {
							t.Fatalf("%s text %d value %d: z = %v, want G (m + n) = %v", variant, k, q, z, want)
						}
						norm2 += (float64(m)*G - centre) * (float64(m)*G - centre)
					}
					if math.Sqrt(norm2) > C {
						t.Errorf("%s text %d component %d: the lattice mean is %v from the centre, beyond C = %v", variant, k, c, math.Sqrt(norm2), C)
					}
				}
				if !slices.Equal(got[k].Pi, pi) {
					t.Errorf("%s text %d: pi %v, want %v", variant, k, got[k].Pi, pi)
				}
				k++
			}
		}
		// the batch size changes neither the posteriors nor which noise a text gets
		if err := r.SetBatchSize(3); err != nil {
			t.Fatal(err)
		}
		again, err := r.Release(ctx, texts, NewSeededSource(7))
		r.SetBatchSize(b.Options.EvalBatchSize)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if d := maxDiff(got[i].Z, again[i].Z); d > 1e-5 || maxDiff(got[i].Pi, again[i].Pi) > 1e-5 {
				t.Errorf("%s text %d: batch size 3 vs %d: Z differs by %g", variant, i, b.Options.EvalBatchSize, d)
			}
		}
	}
}

// Posteriors are what the releases are drawn from: for a seeded source, drawing from Posteriors'
// examples one after the other gives Release's output bit for bit; the file's metadata and ClipSet
// certify the model's guarantee; a bad text is refused with its index.
func TestPosteriors(t *testing.T) {
	ctx := context.Background()
	for _, variant := range []string{nvib.ModelNVDPClipped, nvib.ModelGaussian, varying} {
		r := load(t, variant)
		p, err := r.Posteriors(ctx, texts)
		if err != nil {
			t.Fatal(err)
		}
		if n, pp := r.Shape(); p.M != len(texts) || p.N != n || p.P != pp || p.Metadata["split"] != "texts" || p.Metadata[nvib.MetaModel] != r.Model().Variant {
			t.Fatalf("%s: posteriors [%d %d %d] metadata %v", variant, p.M, p.N, p.P, p.Metadata)
		}
		got, err := r.Release(ctx, texts, NewSeededSource(9))
		if err != nil {
			t.Fatal(err)
		}
		src := NewSeededSource(9)
		for i := range texts {
			v := p.View(i)
			post := &nvib.Posterior{B: 1, N: v.N, P: v.P, PadsReleased: true, Mu: nn.FromData(v.Mu, 1, v.N, v.P),
				Logvar: nn.FromData(v.Logvar, 1, v.N, v.P), Alpha: nn.FromData(v.Alpha, 1, v.N)}
			e, err := r.draw(ctx, post, 1, src)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got[i].Z, e[0].Z) || !slices.Equal(got[i].Pi, e[0].Pi) {
				t.Errorf("%s text %d: the release is not a draw of its posterior", variant, i)
			}
		}
		set, ok, err := privacy.ClipSetFromMetadata(p)
		if err != nil || !ok {
			t.Fatalf("%s: clip set of the metadata: %v %v", variant, ok, err)
		}
		g, err := privacy.CertifyCurve(set, privacy.CurveOptions{Releases: 1, Delta: privacy.DefaultDelta})
		if err != nil || g.Epsilon != r.Guarantee().Epsilon {
			t.Errorf("%s: the metadata certifies %v (%v), the releaser %v", variant, g.Epsilon, err, r.Guarantee().Epsilon)
		}
		if g2, err := privacy.CertifyCurve(r.ClipSet(), privacy.CurveOptions{Releases: 1, Delta: privacy.DefaultDelta}); err != nil || g2.Epsilon != g.Epsilon {
			t.Errorf("%s: ClipSet certifies %v (%v), the metadata %v", variant, g2.Epsilon, err, g.Epsilon)
		}
		if _, err := r.Posteriors(ctx, []string{"good", " "}); err == nil || !strings.Contains(err.Error(), "text 1") {
			t.Errorf("%s: blank text: %v", variant, err)
		}
	}
}

func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

// The releases of one text have the distribution of its posterior: over K draws, the mean of every
// Z coordinate is mu and its variance sigma^2 = exp(logvar) (z-scores of the means and of the
// variances, each below 5, and their mean squares near 1: the spread is the predicted one), and the
// mean weights are alpha / sum alpha (Dirichlet: Var pi_i = a_i (A - a_i) / (A^2 (A + 1))). A
// gaussian release has the constant weights 1/N.
func TestReleaseStatistics(t *testing.T) {
	if testing.Short() {
		t.Skip("thousands of draws")
	}
	const K = 4000
	for _, variant := range []string{nvib.ModelNVDPClipped, nvib.ModelGaussian} {
		r := load(t, variant)
		text := texts[0]
		got, err := r.ReleaseRepeated(context.Background(), []string{text}, K, NewSeededSource(99))
		if err != nil {
			t.Fatal(err)
		}
		post, err := r.bundle.Model.Posterior(evalInputs(t, r.bundle, []string{text}, 1)[0])
		if err != nil {
			t.Fatal(err)
		}
		N, P := r.Shape()
		var meanSq, varSq float64
		for c := range N * P {
			var s, s2 float64
			for _, e := range got[0] {
				s += float64(e.Z[c])
			}
			mean := s / K
			for _, e := range got[0] {
				d := float64(e.Z[c]) - mean
				s2 += d * d
			}
			v := s2 / (K - 1)
			want := math.Exp(float64(post.Logvar.Data[c]))
			zMean := (mean - float64(post.Mu.Data[c])) / math.Sqrt(want/K)
			zVar := (v - want) / (want * math.Sqrt(2.0/(K-1)))
			if math.Abs(zMean) > 5 || math.Abs(zVar) > 5 {
				t.Fatalf("%s Z[%d]: mean %v (mu %v, z %.1f), variance %v (sigma^2 %v, z %.1f)", variant, c, mean, post.Mu.Data[c], zMean, v, want, zVar)
			}
			meanSq += zMean * zMean
			varSq += zVar * zVar
		}
		t.Logf("%s: mean square z-scores of the %d means %.3f, variances %.3f", variant, N*P, meanSq/float64(N*P), varSq/float64(N*P))
		if meanSq /= float64(N * P); meanSq < 0.6 || meanSq > 1.5 {
			t.Errorf("%s: mean square z-score of the means %.3f, want about 1", variant, meanSq)
		}
		if varSq /= float64(N * P); varSq < 0.6 || varSq > 1.5 {
			t.Errorf("%s: mean square z-score of the variances %.3f, want about 1", variant, varSq)
		}
		var A float64
		for _, a := range post.Alpha.Data {
			A += float64(a)
		}
		for i := range N {
			var s float64
			for _, e := range got[0] {
				s += float64(e.Pi[i])
			}
			a := float64(post.Alpha.Data[i])
			want := a / A
			if variant == nvib.ModelGaussian {
				for _, e := range got[0] {
					if e.Pi[i] != float32(1/float64(N)) {
						t.Fatalf("gaussian pi[%d] = %v, want the constant 1/N = %v", i, e.Pi[i], 1/float64(N))
					}
				}
				continue
			}
			sd := math.Sqrt(a * (A - a) / (A * A * (A + 1)) / K)
			if z := (s/K - want) / sd; math.Abs(z) > 5 {
				t.Errorf("pi[%d]: mean %v, want alpha/sum alpha = %v (z %.1f)", i, s/K, want, z)
			}
		}
		for _, e := range got[0][:10] {
			var s float64
			for _, p := range e.Pi {
				if !(p > 0) {
					t.Fatalf("%s: a weight %v <= 0 (every component, padding included, has mass)", variant, p)
				}
				s += float64(p)
			}
			if math.Abs(s-1) > 1e-5 {
				t.Errorf("%s: weights sum to %v", variant, s)
			}
		}
	}
}

// The guarantee is the certificate of `nvdp certify --model` (privacy.NewCertifiedReport of
// nvib.Config.ClipSet with N = max-seq-len + 1, read here from the model's files), labelled certified
// with its scope; GuaranteeOf(k) is k times its curve at the same delta; SetDelta converts at another
// delta and refuses one outside (0, 1).
func TestGuarantee(t *testing.T) {
	for _, variant := range []string{nvib.ModelNVDPClipped, nvib.ModelGaussian} {
		dir := tinyModel(t, variant)
		r := load(t, variant)
		o, err := model.LoadOptions(dir)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := nvib.LoadConfig(dir)
		if err != nil {
			t.Fatal(err)
		}
		set, _ := cfg.ClipSet(o.MaxSeqLen + 1)
		want, err := privacy.NewCertifiedReport(set, privacy.ReportOptions{Order: privacy.DefaultOrder, Direction: privacy.DirectionStandard, Releases: 1, Delta: privacy.DefaultDelta, Source: train.ModelSource(dir)})
		if err != nil {
			t.Fatal(err)
		}
		g := r.Guarantee()
		if !slices.Equal(g.Curve, want.Curve) || g.Epsilon != want.Epsilon || g.BestOrder != want.BestOrder || g.Delta != privacy.DefaultDelta ||
			g.Releases != 1 || g.Label != privacy.LabelCertified || g.Scope != want.Scope || math.IsInf(float64(g.Epsilon), 0) {
			t.Errorf("%s: guarantee eps %v at order %v (%q, %q); certify --model: %v at %v (%q)", variant, g.Epsilon, g.BestOrder, g.Label, g.Scope,
				want.Epsilon, want.BestOrder, want.Scope)
		}
		if m := set.ReleaseMechanism(); g.Release == nil || *g.Release != m || !m.Exact || m.AddedSensitivity != 0 {
			t.Errorf("%s: the guarantee's release %+v, want the clip set's exact mechanism %+v", variant, g.Release, m)
		}
		g.Curve[0].RD = 0 // the caller's copy
		if r.Guarantee().Curve[0].RD == 0 {
			t.Errorf("%s: Guarantee shares its curve", variant)
		}
		g3, err := r.GuaranteeOf(3)
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range g3.Curve {
			if one := want.Curve[i]; p.Order != one.Order || math.Abs(float64(p.RD)-3*float64(one.RD)) > 1e-12*float64(p.RD) {
				t.Fatalf("%s: 3 releases at order %v: %v, want 3 x %v", variant, p.Order, p.RD, one.RD)
			}
		}
		// the RDP accountant's epsilon is the curve's conversion; the certified one is it, or for a
		// fixed-noise release (a Gaussian mechanism) the exact one of mu sqrt(3)
		eps, _, _ := privacy.BestEpsilon(g3.Curve, privacy.DefaultDelta)
		wantEps := eps
		if _, ok := set.GaussianMu(); ok {
			wantEps, _ = privacy.GaussianMechanismEpsilon(math.Sqrt(3)*float64(g.GaussianMu), privacy.DefaultDelta)
		}
		if float64(g3.RDPEpsilon) != eps || math.Abs(float64(g3.Epsilon)-wantEps) > 1e-12*wantEps || !(float64(g3.Epsilon) > float64(g.Epsilon)) || g3.Releases != 3 {
			t.Errorf("%s: 3 releases: epsilon %v (RDP %v), want %v (BestEpsilon %v); one release %v", variant, g3.Epsilon, g3.RDPEpsilon, wantEps, eps, g.Epsilon)
		}
		if _, err := r.GuaranteeOf(0); err == nil {
			t.Errorf("%s: GuaranteeOf(0) accepted", variant)
		}
		if err := r.SetDelta(1e-8); err != nil {
			t.Fatal(err)
		}
		if eps, _, _ := privacy.BestEpsilon(want.Curve, 1e-8); float64(r.Guarantee().RDPEpsilon) != eps || r.Guarantee().Delta != 1e-8 {
			t.Errorf("%s: delta 1e-8: RDP epsilon %v, want %v", variant, r.Guarantee().RDPEpsilon, eps)
		}
		if gm := r.Guarantee(); gm.Accountant == privacy.AccountantGaussian {
			if e, _ := privacy.GaussianMechanismEpsilon(float64(gm.GaussianMu), 1e-8); float64(gm.Epsilon) != e {
				t.Errorf("%s: delta 1e-8: epsilon %v, exact %v", variant, gm.Epsilon, e)
			}
		}
		for _, bad := range []float64{0, 1, -1, math.NaN()} {
			if err := r.SetDelta(bad); err == nil || r.Guarantee().Delta != 1e-8 {
				t.Errorf("%s: SetDelta(%v): %v", variant, bad, err)
			}
		}
	}
}

// Concurrent Release calls on one releaser, each with its own seeded source, give exactly the
// releases of the same calls made one after the other: nothing is shared between calls but the
// forward pass, serialised under OpenBLAS's own threads and run at once, each in its own
// workspace, under one BLAS thread (nn.BLASThreads 1, a service's setting); calls sharing one
// source each get their own noise. Run with -race.
func TestConcurrentRelease(t *testing.T) {
	for _, threads := range []int{0, 1} { // 0: as the process starts
		t.Run(fmt.Sprintf("blas threads %d", threads), func(t *testing.T) {
			if threads > 0 {
				prev := nn.SetBLASThreads(threads)
				defer nn.SetBLASThreads(max(prev, 1))
				if nn.BLASThreads() != threads {
					t.Skip("no OpenBLAS in this build: its thread count cannot be set")
				}
			}
			concurrentRelease(t)
		})
	}
}

func concurrentRelease(t *testing.T) {
	r := load(t, nvib.ModelNVDPClipped)
	ctx := context.Background()
	const calls = 6
	want := make([][]Embedding, calls)
	for c := range calls {
		var err error
		if want[c], err = r.Release(ctx, texts[c%3:], NewSeededSource(uint64(c))); err != nil {
			t.Fatal(err)
		}
	}
	got := make([][]Embedding, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	start := make(chan struct{}) // every call starts at once
	for c := range calls {
		wg.Go(func() { <-start; got[c], errs[c] = r.Release(ctx, texts[c%3:], NewSeededSource(uint64(c))) })
	}
	shared, _ := NewSource()
	defer shared.Close()
	var sharedOut [4][][]Embedding
	for i := range sharedOut {
		wg.Go(func() { <-start; sharedOut[i], _ = r.ReleaseRepeated(ctx, texts, 20, shared) })
	}
	close(start)
	wg.Wait()
	for c := range calls {
		if errs[c] != nil {
			t.Fatal(errs[c])
		}
		for i := range want[c] {
			if !slices.Equal(got[c][i].Z, want[c][i].Z) || !slices.Equal(got[c][i].Pi, want[c][i].Pi) {
				t.Errorf("call %d text %d: concurrent release differs from the sequential one", c, i)
			}
		}
	}
	// calls sharing a source take disjoint parts of its stream: no two releases have the same noise
	seen := map[[2]float32]bool{}
	for i, out := range sharedOut {
		if len(out) != len(texts) {
			t.Fatalf("call %d sharing a source: %d texts released of %d", i, len(out), len(texts))
		}
		for _, rel := range out {
			for _, e := range rel {
				key := [2]float32{e.Z[0], e.Pi[0]}
				if seen[key] {
					t.Fatalf("call %d sharing a source: a release repeats another's noise", i)
				}
				seen[key] = true
			}
		}
	}
}

// Bad texts are refused before anything is released, naming the index and never quoting the text;
// so are a missing source and k < 1; a cancelled context stops the call.
func TestReleaseRefuses(t *testing.T) {
	r := load(t, nvib.ModelNVDPClipped)
	ctx := context.Background()
	secret := "secret words"
	for _, tc := range []struct {
		texts []string
		want  string
	}{
		{[]string{secret, ""}, "text 1: empty text"},
		{[]string{secret, secret, " \t\n"}, "text 2: blank text"},
		{[]string{"bad \xff utf8 " + secret}, "text 0: text is not valid UTF-8"},
	} {
		out, err := r.Release(ctx, tc.texts, NewSeededSource(1))
		if err == nil || !strings.Contains(err.Error(), tc.want) || out != nil {
			t.Errorf("%q: error %v, %d releases; want %q and none", tc.texts, err, len(out), tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("the error quotes a text: %v", err)
		}
	}
	if _, err := r.Release(ctx, texts, nil); err == nil {
		t.Error("nil source accepted")
	}
	if _, err := r.ReleaseRepeated(ctx, texts, 0, NewSeededSource(1)); err == nil {
		t.Error("k = 0 accepted")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if out, err := r.Release(cancelled, texts, NewSeededSource(1)); !errors.Is(err, context.Canceled) || out != nil {
		t.Errorf("cancelled: %v, %d releases", err, len(out))
	}
	if out, err := r.Release(ctx, nil, NewSeededSource(1)); err != nil || len(out) != 0 {
		t.Errorf("no texts: %v, %d releases", err, len(out))
	}
	if err := r.SetBatchSize(0); err == nil || r.BatchSize() != 5 {
		t.Errorf("SetBatchSize(0): %v, batch size %d", err, r.BatchSize())
	}
}

// A seeded source repeats its stream and says so; crypto-seeded sources differ from each other and
// from every seeded one tried.
func TestSource(t *testing.T) {
	a, b := NewSeededSource(5), NewSeededSource(5)
	if !a.Seeded() || a.rng.Uint64() != b.rng.Uint64() {
		t.Error("seeded sources of one seed differ, or are not marked seeded")
	}
	if NewSeededSource(6).rng.Uint64() == NewSeededSource(5).rng.Uint64() {
		t.Error("seeds 5 and 6 give the same stream")
	}
	c, err := NewSource()
	if err != nil {
		t.Fatal(err)
	}
	d, _ := NewSource()
	x := c.rng.Uint64()
	if c.Seeded() || x == d.rng.Uint64() || x == NewSeededSource(0).rng.Uint64() {
		t.Error("crypto-seeded sources repeat, or are marked seeded")
	}
}
