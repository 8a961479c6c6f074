package loop

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/progress"
	"github.com/nvdp-project/nvdp/safetensors"
)

// toy is a trainer for the tests: least squares on 10 fixed examples in 3
// dimensions, with gradient noise from its own random source (so that a
// resume must restore it), an evaluation line every evalEvery steps and at
// the end of each epoch, and a resumable sum of its losses.
type toy struct {
	w       *nn.Param
	src     *rand.PCG
	rng     *rand.Rand
	x       [10][3]float32
	y       [10]float32
	acc     *toyState
	run     *Run
	saves   []int
	after   []bool
	epochs  []int
	lrs     []float64
	batches [][]int
}

type toyState struct {
	LossSum float64 `json:"loss_sum"`
}

func newToy() *toy {
	t := &toy{w: nn.NewParam("w", 3), src: rand.NewPCG(9, 9), acc: &toyState{}}
	t.rng = rand.New(t.src)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range t.x {
		for j := range t.x[i] {
			t.x[i][j] = float32(r.NormFloat64())
		}
		t.y[i] = float32(r.NormFloat64())
	}
	return t
}

func (t *toy) config(dir string) Config {
	return Config{Stage: "toy", Checkpoint: filepath.Join(dir, "ckpt.safetensors"), StateKey: "toy_state",
		Metrics: filepath.Join(dir, "metrics.jsonl"), LineUnit: "evaluation",
		Params: []*nn.Param{t.w}, LR: 0.1, WeightDecay: 0.01, Eps: nn.AdamEps, Warmup: 2, Steps: 14, GradClip: 1,
		Examples: 10, BatchSize: 3, // 3 batches per epoch, 5 epochs (the last one partial)
		Order:   func(e int) *rand.Rand { return rand.New(rand.NewPCG(77, uint64(e))) },
		Sources: []Source{{Key: "noise", RNG: t.src}}, State: t.acc,
		CheckpointEvery: 4, CheckpointEpochs: true,
		Step: func(st *State, idx []int, lr float64) (float64, string, error) {
			t.batches = append(t.batches, slices.Clone(idx))
			t.lrs = append(t.lrs, lr)
			loss := 0.0
			for _, i := range idx {
				d := -float64(t.y[i])
				for j := range 3 {
					d += float64(t.w.Value.Data[j] * t.x[i][j])
				}
				loss += d * d / 2
				for j := range 3 {
					t.w.Grad.Data[j] += float32(d)*t.x[i][j] + float32(0.01*t.rng.NormFloat64())
				}
			}
			t.acc.LossSum += loss
			return loss, "toy", nil
		},
		AfterStep: func(st *State, final bool) error {
			t.after = append(t.after, final)
			if st.Step%5 == 0 || final {
				return t.run.Log(map[string]any{"step": st.Step, "loss_sum": t.acc.LossSum})
			}
			return nil
		},
		EndEpoch: func(st *State) (bool, error) {
			t.epochs = append(t.epochs, st.Epoch)
			return false, t.run.Log(map[string]any{"step": st.Step, "epoch": st.Epoch + 1})
		},
		Saved: func() error { return nil },
	}
}

// open opens a run of t in dir with cfg modified by mod.
func (t *toy) open(tb testing.TB, dir string, mod func(*Config)) *Run {
	tb.Helper()
	cfg := t.config(dir)
	cfg.Saved = func() error { t.saves = append(t.saves, t.run.State().Step); return nil }
	if mod != nil {
		mod(&cfg)
	}
	r, err := Open(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	t.run = r
	return r
}

// TestTrainUninterrupted checks the schedule, the data order, the hooks and
// the checkpoints of a run against their definitions.
func TestTrainUninterrupted(t *testing.T) {
	dir := t.TempDir()
	tr := newToy()
	var events []progress.Event
	r := tr.open(t, dir, func(c *Config) { c.Progress = func(e progress.Event) { events = append(events, e) } })
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := r.State()
	if !st.Done || st.Step != 14 || st.Epoch != 4 || st.Batch != 2 || r.Optimizer().Step != 14 {
		t.Fatalf("final state %+v, AdamW step %d; want done at step 14 = epoch 5 batch 2", *st, r.Optimizer().Step)
	}
	for s, lr := range tr.lrs {
		if want := 0.1 * nn.LinearWarmupDecay(s, 2, 14); lr != want {
			t.Errorf("step %d: lr %v, want %v", s+1, lr, want)
		}
	}
	for s, idx := range tr.batches {
		e, b := s/3, s%3
		if want := rand.New(rand.NewPCG(77, uint64(e))).Perm(10)[3*b : 3*b+3]; !slices.Equal(idx, want) {
			t.Errorf("step %d: batch %v, want %v (epoch %d batch %d of the permutation)", s+1, idx, want, e, b)
		}
	}
	if want := []int{0, 1, 2, 3}; !slices.Equal(tr.epochs, want) {
		t.Errorf("EndEpoch for epochs %v, want %v", tr.epochs, want)
	}
	// checkpoints: every 4 steps, every epoch end (3, 6, 9, 12), the end; never twice for one step
	if want := []int{3, 4, 6, 8, 9, 12, 14}; !slices.Equal(tr.saves, want) {
		t.Errorf("checkpoints at steps %v, want %v", tr.saves, want)
	}
	if len(tr.after) != 14 || slices.Index(tr.after, true) != 13 {
		t.Errorf("AfterStep final flags %v, want the 14th only", tr.after)
	}
	if len(events) != 15 || events[0].Done != 0 || events[0].HasLoss() || events[14].Done != 14 || events[14].Total != 14 ||
		events[4].Detail != "epoch 2/5 toy" || events[3].Detail != "epoch 1/5 toy" || events[14].Detail != "epoch 5/5 toy" || events[3].Stage != "toy" || events[3].Unit != "steps" {
		t.Errorf("progress events %+v", events)
	}
	if st.Lines != 7 { // evaluations at 5, 10, 14; epoch ends 3, 6, 9, 12
		t.Errorf("%d metrics lines counted, want 7", st.Lines)
	}
}

// finalOf runs a fresh toy run to the end in a new directory and returns w.
func finalOf(t *testing.T) []float32 {
	tr := newToy()
	r := tr.open(t, t.TempDir(), nil)
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	return slices.Clone(tr.w.Value.Data)
}

// resume continues the run in dir with a fresh trainer (as a new process
// would) until ctx is cancelled or the run ends.
func resume(t *testing.T, ctx context.Context, dir string, mod func(*Config)) (*toy, error) {
	t.Helper()
	tr := newToy()
	cfg := tr.config(dir)
	cfg.Resume = true
	if mod != nil {
		mod(&cfg)
	}
	r, err := Open(cfg)
	if err != nil {
		return tr, err
	}
	tr.run = r
	return tr, r.Train(ctx)
}

// TestStopCancelResume: a run stopped by StopAfter, then cancelled, then
// resumed ends bit-identical to an uninterrupted one, with the same metrics
// lines (the trainer's state restored); the cancellation returns an
// *Interrupted with its cause, after a checkpoint at its step.
func TestStopCancelResume(t *testing.T) {
	want := finalOf(t)
	dir := t.TempDir()
	tr := newToy()
	r := tr.open(t, dir, func(c *Config) { c.StopAfter = 5 })
	if err := r.Train(context.Background()); err != nil || r.State().Done || r.State().Step != 5 || !slices.Contains(tr.saves, 5) {
		t.Fatalf("StopAfter 5: err %v, state %+v, checkpoints %v", err, *r.State(), tr.saves)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	_, err := resume(t, ctx, dir, func(c *Config) {
		c.Progress = func(e progress.Event) {
			if e.Done == 7 {
				cancel(errors.New("terminated signal received"))
			}
		}
	})
	var intr *Interrupted
	if !errors.As(err, &intr) || intr.Step != 7 || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "terminated signal received") {
		t.Fatalf("cancelled: %v, want *Interrupted at step 7 unwrapping to context.Canceled, with the cause", err)
	}
	if st := checkpointState(t, dir); st.Step != 7 || st.Done {
		t.Fatalf("checkpoint after the cancel: %+v, want step 7", st)
	}
	tr, err = resume(t, context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tr.w.Value.Data, want) {
		t.Fatalf("resumed run ends at %v, uninterrupted at %v", tr.w.Value.Data, want)
	}
	full := t.TempDir()
	if err := newToy().openRun(t, full).Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(full, "metrics.jsonl"))
	b, _ := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	if len(a) == 0 || string(a) != string(b) {
		t.Errorf("metrics after stop, cancel and resume:\n%s\nuninterrupted:\n%s", b, a)
	}
	// A finished run resumes as a no-op; a StopAfter already reached stops at once.
	if tr, err := resume(t, context.Background(), dir, nil); err != nil || !slices.Equal(tr.w.Value.Data, want) || !tr.run.State().Done {
		t.Errorf("resume of a finished run: %v", err)
	}
}

func (t *toy) openRun(tb testing.TB, dir string) *Run { return t.open(tb, dir, nil) }

// checkpointState reads the loop's State from the checkpoint in dir.
func checkpointState(t *testing.T, dir string) State {
	t.Helper()
	f, err := safetensors.ReadFile(filepath.Join(dir, "ckpt.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	var st State
	if err := json.Unmarshal([]byte(f.Metadata["toy_state"]), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// rewriteState replaces the checkpoint's metadata in dir by edit's.
func rewriteState(t *testing.T, dir string, edit func(map[string]string)) {
	t.Helper()
	path := filepath.Join(dir, "ckpt.safetensors")
	f, err := safetensors.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edit(f.Metadata)
	if err := safetensors.WriteFile(path, f.Tensors, f.Metadata); err != nil {
		t.Fatal(err)
	}
}

// stopped returns a directory with a run stopped after step 5.
func stopped(t *testing.T) string {
	dir := t.TempDir()
	tr := newToy()
	if err := tr.open(t, dir, func(c *Config) { c.StopAfter = 5 }).Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestResumeCrashArtifacts: what a SIGKILL leaves behind does not block a
// resume (a torn last metrics line, a temporary checkpoint file: both go),
// and what it cannot recompute is an error naming the file (an emptied
// metrics log) instead of a silently lost history.
func TestResumeCrashArtifacts(t *testing.T) {
	want := finalOf(t)
	dir := stopped(t)
	metrics := filepath.Join(dir, "metrics.jsonl")
	f, err := os.OpenFile(metrics, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"step":6,"loss`)
	f.Close()
	stale := filepath.Join(dir, ".ckpt.safetensors.tmp123456")
	if err := os.WriteFile(stale, make([]byte, 1024), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := resume(t, context.Background(), dir, nil)
	if err != nil {
		t.Fatalf("resume after a torn line and a stale temporary file: %v", err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temporary file still there: %v", err)
	}
	if !slices.Equal(tr.w.Value.Data, want) {
		t.Errorf("resumed run ends at %v, want %v", tr.w.Value.Data, want)
	}

	for _, c := range []struct {
		name, content, want string
	}{
		{"emptied", "", "the checkpoint follows 2 evaluation(s) but the file has no line for evaluation(s) 1, 2"},
		{"cut", `{"step":3,"epoch":1}` + "\n", "no line for evaluation(s) 2"},
		{"extra line", `{"step":3,"epoch":1}` + "\n" + `{"step":4}` + "\n" + `{"step":5,"loss_sum":1}` + "\n", "3 lines up to step 5, but the checkpoint counted 2"},
		{"line without a step", `{"epoch":1}` + "\n", `metrics.jsonl:1: no "step"`},
		{"not JSON", "step 3\n", "metrics.jsonl:1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := stopped(t)
			if err := os.WriteFile(filepath.Join(dir, "metrics.jsonl"), []byte(c.content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := resume(t, context.Background(), dir, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "metrics.jsonl") {
				t.Fatalf("err %v, want one naming metrics.jsonl and containing %q", err, c.want)
			}
		})
	}
}

// TestResumeChecks: a checkpoint that does not fit the run is an error naming
// it, before any step.
func TestResumeChecks(t *testing.T) {
	cases := []struct {
		name string
		edit func(map[string]string)
		mod  func(*Config)
		want string
	}{
		{"data changed", nil, func(c *Config) { c.Examples = 13 }, "does not fit 13 training examples"},
		{"batch size changed", nil, func(c *Config) { c.BatchSize = 2 }, "does not fit"},
		{"no state", func(m map[string]string) { delete(m, "toy_state") }, nil, "no toy_state"},
		{"no random state", func(m map[string]string) {
			m["toy_state"] = strings.Replace(m["toy_state"], `"noise"`, `"other"`, 1)
		}, nil, `no random state "noise"`},
		{"bad random state", func(m map[string]string) {
			m["toy_state"] = strings.Replace(m["toy_state"], `"noise":"`, `"noise":"!!`, 1)
		}, nil, `random state "noise"`},
		{"step disagrees with AdamW", func(m map[string]string) {
			m["toy_state"] = strings.Replace(m["toy_state"], `"step":5`, `"step":4`, 1)
		}, nil, "does not fit"},
		{"negative time", func(m map[string]string) {
			m["toy_state"] = strings.Replace(m["toy_state"], `"secs":`, `"secs":-`, 1)
		}, nil, "negative"},
		{"trainer state malformed", func(m map[string]string) {
			m["toy_state"] = strings.Replace(m["toy_state"], `"loss_sum":`, `"loss_sum":"x",	"y":`, 1)
		}, nil, "toy_state"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := stopped(t)
			if c.edit != nil {
				rewriteState(t, dir, c.edit)
			}
			tr, err := resume(t, context.Background(), dir, c.mod)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one containing %q", err, c.want)
			}
			if tr.run != nil || len(tr.lrs) > 0 {
				t.Errorf("the run went on")
			}
		})
	}
}

// TestLegacyCheckpoint: a checkpoint without the metrics line count (train's
// before the loop) resumes, cutting the log by step; one without the state
// key at all resumes through Config.Legacy.
func TestLegacyCheckpoint(t *testing.T) {
	want := finalOf(t)
	dir := stopped(t)
	rewriteState(t, dir, func(m map[string]string) {
		var obj map[string]any
		json.Unmarshal([]byte(m["toy_state"]), &obj)
		delete(obj, "lines")
		b, _ := json.Marshal(obj)
		m["toy_state"] = string(b)
	})
	tr, err := resume(t, context.Background(), dir, nil)
	if err != nil || !slices.Equal(tr.w.Value.Data, want) {
		t.Fatalf("resume without a line count: %v, weights %v, want %v", err, tr.w.Value.Data, want)
	}

	dir = stopped(t)
	var saved string
	rewriteState(t, dir, func(m map[string]string) { saved = m["toy_state"]; delete(m, "toy_state"); m["old"] = saved })
	tr, err = resume(t, context.Background(), dir, func(c *Config) {
		c.Legacy = func(meta map[string]string) (map[string]any, error) {
			var obj map[string]any
			err := json.Unmarshal([]byte(meta["old"]), &obj)
			return obj, err
		}
	})
	if err != nil || !slices.Equal(tr.w.Value.Data, want) {
		t.Fatalf("resume through Legacy: %v", err)
	}
}

// TestCheckAndConfig: Check's two errors, and a Config that cannot work is an
// error before any file is touched.
func TestCheckAndConfig(t *testing.T) {
	dir := t.TempDir()
	ck := filepath.Join(dir, "ckpt.safetensors")
	if err := Check(ck, true); !errors.Is(err, ErrNoCheckpoint) || !strings.Contains(err.Error(), ck) {
		t.Errorf("resume without a checkpoint: %v", err)
	}
	if err := Check(ck, false); err != nil {
		t.Errorf("fresh run in an empty directory: %v", err)
	}
	os.WriteFile(ck, nil, 0o644)
	if err := Check(ck, false); !errors.Is(err, ErrRunExists) || !strings.Contains(err.Error(), dir) {
		t.Errorf("fresh run over a checkpoint: %v", err)
	}
	if err := Check(ck, true); err != nil {
		t.Errorf("resume with a checkpoint: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "metrics.jsonl"), []byte("keep\n"), 0o644)
	for _, c := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no batch", func(c *Config) { c.Examples = 2 }, "2 training examples make no batch of 3"},
		{"zero lr", func(c *Config) { c.LR = 0 }, "learning rate 0"},
		{"NaN lr", func(c *Config) { c.LR = math.NaN() }, "learning rate NaN"},
		{"zero eps", func(c *Config) { c.Eps = 0 }, "eps 0"},
		{"negative decay", func(c *Config) { c.WeightDecay = -1 }, "weight decay -1"},
		{"NaN clip", func(c *Config) { c.GradClip = math.NaN() }, "clipping bound is NaN"},
		{"negative steps", func(c *Config) { c.Steps = -1 }, "negative count"},
		{"state key clash", func(c *Config) { c.Sources[0].Key = "loss_sum" }, `key "loss_sum" twice`},
		{"loop key clash", func(c *Config) { c.Sources[0].Key = "step" }, `key "step" twice`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := newToy().config(dir)
			c.mod(&cfg)
			if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "metrics.jsonl")); string(b) != "keep\n" {
				t.Errorf("metrics file touched: %q", b)
			}
		})
	}
}
