package mlm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/internal/loop"
	"github.com/nvdp-project/nvdp/progress"
	"github.com/nvdp-project/nvdp/safetensors"
)

const realGLUE = "/work/shared/data/glue"

// glueCorpus writes a GLUE directory with the first rows of RTE train and
// SST-2 train/test (a few hundred sentences) and returns it.
func glueCorpus(t *testing.T) string {
	t.Helper()
	loadVocab(t)
	if _, err := os.Stat(realGLUE); err != nil {
		t.Skipf("no GLUE data at %s", realGLUE)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		task, split string
		rows        int
	}{{"RTE", "train", 60}, {"SST-2", "train", 200}, {"SST-2", "test", 100}, {"RTE", "dev", 50}} {
		f, err := os.Open(filepath.Join(realGLUE, c.task, c.split+".tsv"))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for i := 0; i <= c.rows && sc.Scan(); i++ {
			buf.WriteString(sc.Text() + "\n")
		}
		f.Close()
		writeFile(t, filepath.Join(dir, c.task, c.split+".tsv"), buf.String())
	}
	return dir
}

// smallOptions: a hidden-32, 1-layer BERT with the real 30522-token vocabulary.
func smallOptions(corpus, out string, steps int) Options {
	cfg, _ := encoder.Preset("bert-tiny")
	cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = 32, 1, 2, 64
	cfg.MaxPositionEmbeddings = 64
	o := DefaultOptions()
	o.Corpus, o.ModelConfig, o.Config, o.Vocab, o.Out = corpus, &cfg, "test-h32-l1", bertVocab, out
	o.Seq, o.BatchSize, o.Steps, o.LR, o.WarmupRatio, o.WeightDecay, o.Holdout = 64, 16, steps, 2e-2, 0.1, 0.01, 30
	o.Seed, o.EvalEvery, o.SaveEvery = 3, 10, 10
	return o
}

func readMetrics(t *testing.T, path string) []Metric {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ms []Metric
	for _, l := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var m Metric
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	return ms
}

// TestPretrainShortRun: 30 steps of a hidden-32 1-layer BERT on a few hundred
// GLUE sentences; the held-out MLM loss must fall well below its initial
// ln(30522) = 10.33 and the output must load with encoder.Load("hf:DIR").
func TestPretrainShortRun(t *testing.T) {
	corpus := glueCorpus(t)
	out := filepath.Join(t.TempDir(), "run")
	res, err := Run(context.Background(), smallOptions(corpus, out, 30), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.InitialHeldOut == nil || res.InitialHeldOut.Loss < 10 || res.InitialHeldOut.Loss > 10.7 {
		t.Fatalf("initial held-out %+v, want loss near ln(30522) = 10.33", res.InitialHeldOut)
	}
	if res.FinalHeldOut.Loss > res.InitialHeldOut.Loss-2 {
		t.Errorf("held-out loss %.3f -> %.3f: did not fall by 2 nats", res.InitialHeldOut.Loss, res.FinalHeldOut.Loss)
	}
	if res.FinalHeldOut.MaskedAcc <= 0.02 {
		t.Errorf("held-out masked accuracy %.3f", res.FinalHeldOut.MaskedAcc)
	}
	t.Logf("held-out loss %.3f -> %.3f, masked acc %.3f -> %.3f (%d masked tokens), %d train seqs",
		res.InitialHeldOut.Loss, res.FinalHeldOut.Loss, res.InitialHeldOut.MaskedAcc, res.FinalHeldOut.MaskedAcc,
		res.FinalHeldOut.MaskedTokens, res.TrainSequences)
	ms := readMetrics(t, filepath.Join(out, metricsFile))
	if len(ms) != 1+2*3 || ms[0].Split != "heldout" || ms[0].Step != 0 || ms[len(ms)-1].Step != 30 {
		t.Errorf("metrics %+v", ms)
	}
	enc, err := encoder.Load("hf:"+out, encoder.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if enc.Config.NumHiddenLayers != 1 || enc.Config.HiddenSize != 32 || enc.Config.VocabSize != 30522 {
		t.Errorf("loaded config %+v", enc.Config)
	}
	if _, err := os.Stat(filepath.Join(out, "vocab.txt")); err != nil {
		t.Error("vocab.txt missing from the output")
	}
	// a second run into the same directory without Resume is refused
	if _, err := Run(context.Background(), smallOptions(corpus, out, 30), nil); !errors.Is(err, ErrRunExists) {
		t.Errorf("overwriting a run: %v, want ErrRunExists", err)
	}
}

// TestPretrainResumeBitwise: 20 steps straight equal 7 steps, stop (a
// resumable StopAfterSteps), resume, cancel after step 13 (as SIGTERM does: a
// final checkpoint and an error saying so), resume, 7 steps: the same model,
// optimizer state and final held-out metrics.
func TestPretrainResumeBitwise(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	corpus := glueCorpus(t)
	a := straightRun(t, corpus)
	b := filepath.Join(t.TempDir(), "b")
	o := smallOptions(corpus, b, 20)
	o.StopAfterSteps = 7 // not a multiple of SaveEvery or EvalEvery
	r, err := Run(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !r.StoppedEarly || r.Steps != 7 {
		t.Fatalf("stop after 7: %+v", r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err = Run(ctx, Options{Out: b, Resume: true}, func(e progress.Event) {
		if e.Stage != "pretrain" || e.Unit != "steps" || e.Total != 20 {
			t.Errorf("progress event %+v", e)
		}
		if e.Done == 13 {
			cancel()
		}
	})
	var intr *loop.Interrupted
	if !errors.As(err, &intr) || intr.Step != 13 || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled after step 13: %v, want *loop.Interrupted at 13 (context.Canceled)", err)
	}
	if _, err := Run(context.Background(), Options{Out: b, Resume: true}, nil); err != nil {
		t.Fatal(err)
	}
	sameRun(t, a, b, true)
}

// TestMain removes the straight run's directory after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if straight.dir != "" {
		os.RemoveAll(filepath.Dir(straight.dir))
	}
	os.Exit(code)
}

// straightRun is the 20-step run of smallOptions, run once per test binary.
var straight struct {
	sync.Once
	dir string
	err error
}

func straightRun(t *testing.T, corpus string) string {
	t.Helper()
	straight.Do(func() {
		dir, err := os.MkdirTemp("", "nvdp-mlm-straight")
		if err == nil {
			straight.dir = filepath.Join(dir, "a")
			_, err = Run(context.Background(), smallOptions(corpus, straight.dir, 20), nil)
		}
		straight.err = err
	})
	if straight.err != nil {
		t.Fatal(straight.err)
	}
	return straight.dir
}

// sameRun checks that the runs in a and b ended with the same model and, with
// state, the same optimizer state and final held-out metrics.
func sameRun(t *testing.T, a, b string, state bool) {
	t.Helper()
	wa, _ := os.ReadFile(filepath.Join(a, encoder.WeightsFile))
	wb, _ := os.ReadFile(filepath.Join(b, encoder.WeightsFile))
	if len(wa) == 0 || !bytes.Equal(wa, wb) {
		t.Error("resumed run's model.safetensors differs from the straight run's")
	}
	ma, mb := readMetrics(t, filepath.Join(a, metricsFile)), readMetrics(t, filepath.Join(b, metricsFile))
	last := func(ms []Metric) Metric { return ms[len(ms)-1] }
	if last(ma).Loss != last(mb).Loss || last(ma).MaskedAcc != last(mb).MaskedAcc {
		t.Errorf("final held-out metrics differ: %+v vs %+v", last(ma), last(mb))
	}
	if !state {
		return
	}
	sa, _ := os.ReadFile(filepath.Join(a, stateFile))
	sb, _ := os.ReadFile(filepath.Join(b, stateFile))
	if !bytes.Equal(stripElapsed(t, sa), stripElapsed(t, sb)) {
		t.Error("resumed run's optimizer state differs")
	}
}

// TestPretrainResumeAfterCrash: what a SIGKILL leaves in a pretraining
// directory does not block a resume, as for training: a torn last metrics
// line (it goes) and a temporary checkpoint or model file (they go); an
// emptied metrics file is an error naming it instead of a lost history; and
// a checkpoint written before the loop was shared (step, epoch, pos and the
// random states as their own metadata keys) resumes bitwise.
func TestPretrainResumeAfterCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	corpus := glueCorpus(t)
	a := straightRun(t, corpus)
	stopped := func() string {
		dir := filepath.Join(t.TempDir(), "run")
		o := smallOptions(corpus, dir, 20)
		o.StopAfterSteps = 12 // epoch 2 (10 batches per epoch), off the checkpoint grid
		if _, err := Run(context.Background(), o, nil); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	metrics := func(dir string) string { return filepath.Join(dir, metricsFile) }

	dir := stopped()
	f, err := os.OpenFile(metrics(dir), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"step":14,"split":"tr`)
	f.Close()
	stale := []string{filepath.Join(dir, "."+stateFile+".tmp987654"), filepath.Join(dir, "."+encoder.WeightsFile+".tmp12")}
	for _, p := range stale {
		if err := os.WriteFile(p, make([]byte, 1<<10), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Run(context.Background(), Options{Out: dir, Resume: true}, nil); err != nil {
		t.Fatalf("resume after a torn metrics line: %v", err)
	}
	for _, p := range stale {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("stale temporary file %s is still there (%v)", p, err)
		}
	}
	sameRun(t, a, dir, true)

	dir = stopped()
	if err := os.WriteFile(metrics(dir), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), Options{Out: dir, Resume: true}, nil)
	if err == nil || !strings.Contains(err.Error(), metrics(dir)) || !strings.Contains(err.Error(), "no line for metrics line(s) 1, 2, 3, 4, 5") {
		t.Fatalf("resume with an emptied metrics file: %v, want an error naming %s and its 5 lines", err, metrics(dir))
	}

	dir = stopped()
	path := filepath.Join(dir, stateFile)
	sf, err := safetensors.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var state struct {
		Step, Epoch, Batch int
		Secs               float64
		Mask               string `json:"mask_rng"`
		Dropout            string `json:"dropout_rng"`
	}
	if err := json.Unmarshal([]byte(sf.Metadata[stateKey]), &state); err != nil {
		t.Fatal(err)
	}
	if state.Step != 12 || state.Epoch != 1 || state.Batch != 2 {
		t.Fatalf("checkpoint state %+v, want step 12 = epoch 2, batch 2", state)
	}
	delete(sf.Metadata, stateKey)
	for k, v := range map[string]string{"step": "12", "epoch": "1", "pos": "32", "elapsed_s": "1.5", "mask_rng": state.Mask, "dropout_rng": state.Dropout} {
		sf.Metadata[k] = v
	}
	if err := safetensors.WriteFile(path, sf.Tensors, sf.Metadata); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), Options{Out: dir, Resume: true}, nil); err != nil {
		t.Fatalf("resume of a checkpoint written before the loop: %v", err)
	}
	sameRun(t, a, dir, false)
}

// stripElapsed returns the checkpoint's tensors (the metadata holds wall-clock time).
func stripElapsed(t *testing.T, data []byte) []byte {
	t.Helper()
	if len(data) < 8 {
		t.Fatal("no checkpoint")
	}
	n := int(uint64(data[0]) | uint64(data[1])<<8 | uint64(data[2])<<16 | uint64(data[3])<<24)
	return data[8+n:]
}

// TestPretrainInitFrom: a run started with InitFrom from another run's output
// begins where that run ended (its step-0 held-out loss is the first run's
// final one, same held-out slice and masks), and leaves the source alone;
// from a BertModel checkpoint (no MLM head) the encoder is copied and the
// head is fresh; a vocabulary of another size is refused.
func TestPretrainInitFrom(t *testing.T) {
	if testing.Short() {
		t.Skip("two short pretraining runs")
	}
	corpus := glueCorpus(t)
	src := filepath.Join(t.TempDir(), "src")
	first, err := Run(context.Background(), smallOptions(corpus, src, 20), nil)
	if err != nil {
		t.Fatal(err)
	}
	o := smallOptions(corpus, filepath.Join(t.TempDir(), "continued"), 10)
	o.ModelConfig, o.Config, o.InitFrom = nil, "", src
	second, err := Run(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := second.InitialHeldOut.Loss - first.FinalHeldOut.Loss; d > 1e-4 || d < -1e-4 {
		t.Errorf("continued run starts at held-out loss %.6f, the source ended at %.6f", second.InitialHeldOut.Loss, first.FinalHeldOut.Loss)
	}
	if second.FinalHeldOut.Loss >= first.InitialHeldOut.Loss-1 {
		t.Errorf("continued run ends at %.3f, not below the random start %.3f", second.FinalHeldOut.Loss, first.InitialHeldOut.Loss)
	}

	// BertModel checkpoint: encoder weights copied, head untouched.
	srcModel, err := LoadHF(src)
	if err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(t.TempDir(), "bare")
	if err := encoder.Save(bare, srcModel.Enc); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadHF(bare); !errors.Is(err, ErrNoMLMHead) {
		t.Fatalf("LoadHF of a BertModel: %v, want ErrNoMLMHead", err)
	}
	fresh := NewModel(mustNewEncoder(t, srcModel.Enc.Config), rand.New(rand.NewPCG(9, 9)))
	headBefore := slices.Clone(fresh.Head.Params()[0].Value.Data)
	n, head, err := initFrom(fresh.Params(), bare)
	if err != nil {
		t.Fatal(err)
	}
	if head || n != len(fresh.Enc.Params()) {
		t.Errorf("initFrom(BertModel): %d tensors, head %v; want %d, false", n, head, len(fresh.Enc.Params()))
	}
	for i, p := range fresh.Enc.Params() {
		if !slices.Equal(p.Value.Data, srcModel.Enc.Params()[i].Value.Data) {
			t.Fatalf("encoder tensor %s not copied", p.Name)
		}
	}
	if !slices.Equal(headBefore, fresh.Head.Params()[0].Value.Data) {
		t.Error("head changed by a checkpoint without a head")
	}

	// A tokenizer whose size differs from the checkpoint's vocab_size.
	small := filepath.Join(t.TempDir(), "vocab.txt")
	writeFile(t, small, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\na\n")
	o = smallOptions(corpus, filepath.Join(t.TempDir(), "badvocab"), 5)
	o.ModelConfig, o.Config, o.InitFrom, o.Vocab = nil, "", src, small
	if _, err := Run(context.Background(), o, nil); err == nil || !strings.Contains(err.Error(), "vocab_size 30522") {
		t.Errorf("vocabulary mismatch: %v", err)
	}
}

func mustNewEncoder(t *testing.T, cfg encoder.Config) *encoder.Encoder {
	t.Helper()
	e, err := encoder.New(cfg, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	return e
}
