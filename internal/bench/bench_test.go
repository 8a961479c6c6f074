package bench

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/progress"
)

// tinyConfig is a 1-layer BERT with 10 positions and 13 tokens.
func tinyConfig(t testing.TB) encoder.Config {
	t.Helper()
	c, err := encoder.Preset("bert-tiny")
	if err != nil {
		t.Fatal(err)
	}
	c.VocabSize, c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize = 13, 8, 1, 2, 16
	c.MaxPositionEmbeddings = 10
	return c
}

func TestRunSmall(t *testing.T) {
	cfg := tinyConfig(t)
	var events []progress.Event
	res, err := Run("tiny", cfg, Options{Batch: 2, Seq: 5, Steps: 2, Progress: func(e progress.Event) { events = append(events, e) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.TrainStepSeconds <= 0 || res.InferStepSeconds <= 0 || res.PeakRSSMB <= 1 || res.Backend != nn.Backend() ||
		res.TokensPerSecond != 10/res.TrainStepSeconds || res.Config != "tiny" {
		t.Fatalf("bench result %+v", res)
	}
	// One event per timed step; training steps carry a cross-entropy near ln 2.
	if len(events) != 4 {
		t.Fatalf("%d progress events, want 4: %+v", len(events), events)
	}
	for i, e := range events {
		stage := []string{"train", "train", "infer", "infer"}[i]
		if e.Stage != stage || e.Unit != "steps" || e.Done != int64(i%2+1) || e.Total != 2 || e.HasLoss() != (stage == "train") {
			t.Errorf("event %d: %+v", i, e)
		}
		if e.HasLoss() && !(e.Loss > 0.3 && e.Loss < 1.5) {
			t.Errorf("event %d: loss %g, want about ln 2", i, e.Loss)
		}
	}
	for _, o := range []Options{{Batch: 2, Seq: 11, Steps: 1}, {Batch: 0, Seq: 5, Steps: 1}, {Batch: 2, Seq: 5, Steps: 0}} {
		if _, err := Run("tiny", cfg, o); err == nil {
			t.Errorf("Run accepted %+v", o)
		}
	}
}

// The classifier's training loss decreases on a fixed batch (the whole
// forward/backward/AdamW loop is wired correctly).
func TestClassifierLearns(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.HiddenDropoutProb, cfg.AttentionProbsDropoutProb = 0, 0
	rng := rand.New(rand.NewPCG(9, 10))
	e, err := encoder.New(cfg, rng)
	if err != nil {
		t.Fatal(err)
	}
	clf := NewClassifier(e, 2, rng)
	in := encoder.Input{IDs: []int32{3, 5, 7, 9, 11, 4, 6, 8, 12, 3, 0, 0}, TypeIDs: []int32{0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 0, 0},
		Mask: []float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, B: 2, S: 6}
	labels := []int{0, 1}
	opt := nn.NewAdamW(1e-2, nn.AdamBeta1, nn.AdamBeta2, nn.AdamEps, 0)
	first := clf.LossAndGrad(in, labels, rng)
	nn.ZeroGrads(clf.Params())
	var last float64
	for i := 0; i < 30; i++ {
		last = clf.LossAndGrad(in, labels, rng)
		opt.Update(clf.Params(), opt.LR)
		nn.ZeroGrads(clf.Params())
	}
	if !(last < 0.1 && first > 0.5) {
		t.Fatalf("loss %g -> %g", first, last)
	}
	if got := clf.Logits(in); len(got.Data) != 4 || got.Shape[0] != 2 || got.Shape[1] != 2 {
		t.Fatalf("logits shape %v", got.Shape)
	}
}

func TestParseVmHWM(t *testing.T) {
	cases := []struct {
		in   string
		want float64
		err  string
	}{
		{"Name:\tnvdp\nVmPeak:\t 999 kB\nVmHWM:\t  2048 kB\nVmRSS:\t 1024 kB\n", 2, ""},
		{"VmHWM: 1536 kB", 1.5, ""},
		{"Name:\tnvdp\n", 0, "no VmHWM"},
		{"VmHWM:\t2048 MB\n", 0, "unexpected VmHWM line"},
		{"VmHWM:\t2048\n", 0, "unexpected VmHWM line"},
		{"VmHWM:\t-5 kB\n", 0, "VmHWM \"-5\""},
		{"VmHWM:\tNaN kB\n", 0, "VmHWM \"NaN\""},
	}
	for _, c := range cases {
		got, err := parseVmHWM(strings.NewReader(c.in))
		if c.err == "" && (err != nil || got != c.want) {
			t.Errorf("parseVmHWM(%q) = %g, %v; want %g", c.in, got, err, c.want)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("parseVmHWM(%q) error %v, want %q", c.in, err, c.err)
		}
	}
}

// benchClassifier returns a freshly initialised classifier of preset
// (dropout off unless dropout), a batch of random token IDs, no padding,
// and the generator it drew them from.
func benchClassifier(b *testing.B, preset string, batch, seq int, dropout bool) (*Classifier, encoder.Input, *rand.Rand) {
	cfg, err := encoder.Preset(preset)
	if err != nil {
		b.Fatal(err)
	}
	if !dropout {
		cfg.HiddenDropoutProb, cfg.AttentionProbsDropoutProb = 0, 0
	}
	rng := rand.New(rand.NewPCG(1, 2))
	e, _ := encoder.New(cfg, rng)
	clf := NewClassifier(e, 2, rng)
	in := encoder.Input{IDs: make([]int32, batch*seq), Mask: make([]float32, batch*seq), B: batch, S: seq}
	for i := range in.IDs {
		in.IDs[i], in.Mask[i] = int32(rng.IntN(cfg.VocabSize)), 1
	}
	return clf, in, rng
}

func benchTrain(b *testing.B, preset string, batch, seq int, dropout bool) {
	clf, in, rng := benchClassifier(b, preset, batch, seq, dropout)
	labels := make([]int, batch)
	opt := nn.NewAdamW(1e-4, nn.AdamBeta1, nn.AdamBeta2, nn.AdamEps, 0.01)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		clf.LossAndGrad(in, labels, rng)
		opt.Update(clf.Params(), opt.LR)
		nn.ZeroGrads(clf.Params())
	}
	b.ReportMetric(float64(batch*seq*b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// go test -tags openblas -run '^$' -bench TrainStep -benchtime 5x -cpuprofile cpu.out ./internal/bench
func BenchmarkTrainStepBertTiny(b *testing.B)        { benchTrain(b, "bert-tiny", 32, 128, false) }
func BenchmarkTrainStepBertTinyDropout(b *testing.B) { benchTrain(b, "bert-tiny", 32, 128, true) }
func BenchmarkTrainStepBertMini(b *testing.B)        { benchTrain(b, "bert-mini", 32, 128, false) }
func BenchmarkTrainStepBertBaseB8(b *testing.B)      { benchTrain(b, "bert-base", 8, 128, true) }

// TestRunRefusesWhatCannotFit: a batch whose training step cannot fit the
// machine's memory is an *option.Error for batch before anything is
// allocated (it was a Go out-of-memory crash).
func TestRunRefusesWhatCannotFit(t *testing.T) {
	cfg, err := encoder.Preset("bert-tiny")
	if err != nil {
		t.Fatal(err)
	}
	for _, batch := range []int{100_000_000, 1 << 40} {
		_, err := Run("bert-tiny", cfg, Options{Batch: batch, Seq: 128, Steps: 1})
		var oe *option.Error
		if !errors.As(err, &oe) || oe.Option != "batch" || oe.Value != batch || !strings.Contains(err.Error(), "of this machine's memory: lower batch or seq") {
			t.Errorf("batch %d: err = %v, want an *option.Error for batch", batch, err)
		}
	}
}

// benchInfer times an inference step (encoder forward, pooling, head) of a
// freshly initialised classifier, as `nvdp bench`'s infer_step_seconds.
func benchInfer(b *testing.B, preset string, batch, seq int) {
	clf, in, _ := benchClassifier(b, preset, batch, seq, false)
	clf.Logits(in)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		clf.Logits(in)
	}
	b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "texts/s")
}

// go test -tags openblas -run '^$' -bench InferStep -benchtime 500x -cpuprofile cpu.out ./internal/bench
func BenchmarkInferStepBertTinyB1(b *testing.B)  { benchInfer(b, "bert-tiny", 1, 64) }
func BenchmarkInferStepBertTinyB32(b *testing.B) { benchInfer(b, "bert-tiny", 32, 64) }
