package encoder

import (
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/nn"
)

func TestRunBenchSmall(t *testing.T) {
	cfg := tinyConfig("bert")
	res, err := RunBench("tiny", cfg, BenchOptions{Batch: 2, Seq: 5, Steps: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.TrainStepSeconds <= 0 || res.InferStepSeconds <= 0 || res.PeakRSSMB <= 1 || res.Backend != nn.Backend() ||
		res.TokensPerSecond != 10/res.TrainStepSeconds {
		t.Fatalf("bench result %+v", res)
	}
	if _, err := RunBench("tiny", cfg, BenchOptions{Batch: 2, Seq: 11, Steps: 1}); err == nil {
		t.Fatal("seq beyond max positions accepted")
	}
}

// The classifier's training loss decreases on a fixed batch (the whole
// forward/backward/AdamW loop is wired correctly).
func TestClassifierLearns(t *testing.T) {
	cfg := tinyConfig("bert")
	cfg.HiddenDropoutProb, cfg.AttentionProbsDropoutProb = 0, 0
	rng := newRng(9)
	e, _ := New(cfg, rng)
	clf := NewClassifier(e, 2, rng)
	in := tinyInput(cfg)
	labels := []int{0, 1}
	opt := nn.NewAdamW(1e-2, 0.9, 0.999, 1e-8, 0)
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
}

func benchTrain(b *testing.B, preset string, batch, seq int, dropout bool) {
	cfg, err := Preset(preset)
	if err != nil {
		b.Fatal(err)
	}
	if !dropout {
		cfg.HiddenDropoutProb, cfg.AttentionProbsDropoutProb = 0, 0
	}
	rng := rand.New(rand.NewPCG(1, 2))
	e, _ := New(cfg, rng)
	clf := NewClassifier(e, 2, rng)
	in := Input{IDs: make([]int32, batch*seq), Mask: make([]float32, batch*seq), B: batch, S: seq}
	for i := range in.IDs {
		in.IDs[i], in.Mask[i] = int32(rng.IntN(cfg.VocabSize)), 1
	}
	labels := make([]int, batch)
	opt := nn.NewAdamW(1e-4, 0.9, 0.999, 1e-8, 0.01)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		clf.LossAndGrad(in, labels, rng)
		opt.Update(clf.Params(), opt.LR)
		nn.ZeroGrads(clf.Params())
	}
	b.ReportMetric(float64(batch*seq*b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// go test -tags openblas -run '^$' -bench TrainStep -benchtime 5x -cpuprofile cpu.out ./encoder
func BenchmarkTrainStepBertTiny(b *testing.B)        { benchTrain(b, "bert-tiny", 32, 128, false) }
func BenchmarkTrainStepBertTinyDropout(b *testing.B) { benchTrain(b, "bert-tiny", 32, 128, true) }
func BenchmarkTrainStepBertMini(b *testing.B)        { benchTrain(b, "bert-mini", 32, 128, false) }
func BenchmarkTrainStepBertBaseB8(b *testing.B)      { benchTrain(b, "bert-base", 8, 128, true) }
