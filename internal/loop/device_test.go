package loop

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/nn"
)

// fakeDevice is a Device that keeps its own copy of the parameters (the
// trainer's Step computes their gradients) and its own nn.AdamW, on the
// host: driven by the loop, a run through it must equal the host path's bit
// for bit, its host parameters and optimizer holding the state of the last
// Pull. It records its calls and fails the call named fail.
type fakeDevice struct {
	params, host []*nn.Param
	opt          *nn.AdamW
	calls        []string
	fail         string
}

var errFake = errors.New("the fake device failed")

func (d *fakeDevice) call(name string) error {
	d.calls = append(d.calls, name)
	if d.fail == name {
		return errFake
	}
	return nil
}

func (d *fakeDevice) ZeroGrads() error {
	if err := d.call("zero"); err != nil {
		return err
	}
	nn.ZeroGrads(d.params)
	return nil
}

func (d *fakeDevice) ClipAndStep(lr, clip float64) (float64, error) {
	if err := d.call("step"); err != nil {
		return 0, err
	}
	n := nn.ClipGradNorm(d.params, clip)
	d.opt.Update(d.params, lr)
	return n, nil
}

func cloneMoments(m map[string][]float32) map[string][]float32 {
	c := map[string][]float32{}
	for k, v := range m {
		c[k] = slices.Clone(v)
	}
	return c
}

func (d *fakeDevice) Pull(opt *nn.AdamW) error {
	if err := d.call("pull"); err != nil {
		return err
	}
	for i, p := range d.params {
		copy(d.host[i].Value.Data, p.Value.Data)
	}
	opt.Step, opt.M, opt.V = d.opt.Step, cloneMoments(d.opt.M), cloneMoments(d.opt.V)
	return nil
}

func (d *fakeDevice) Push(opt *nn.AdamW) error {
	if err := d.call("push"); err != nil {
		return err
	}
	for i, p := range d.params {
		copy(p.Value.Data, d.host[i].Value.Data)
	}
	d.opt = &nn.AdamW{LR: opt.LR, Beta1: opt.Beta1, Beta2: opt.Beta2, Eps: opt.Eps, WeightDecay: opt.WeightDecay,
		Step: opt.Step, M: cloneMoments(opt.M), V: cloneMoments(opt.V)}
	return nil
}

// onDevice returns a toy whose Step trains its "device" copy of w (the
// fakeDevice's) and the Config change that trains it through the Device,
// the host parameter w only receiving the pulled state.
func onDevice() (*toy, *fakeDevice, func(*Config)) {
	tr := newToy()
	dev := &fakeDevice{params: []*nn.Param{tr.w}, host: []*nn.Param{nn.NewParam("w", 3)}}
	return tr, dev, func(c *Config) {
		c.Params = dev.host
		c.Device = dev
	}
}

// count is the number of calls named name.
func (d *fakeDevice) count(name string) int {
	n := 0
	for _, c := range d.calls {
		if c == name {
			n++
		}
	}
	return n
}

// TestDeviceHook: a run whose optimizer is a Device equals the host path's
// run bit for bit (the device's parameters during it, the host's after the
// final checkpoint, the metrics log), stopped and resumed through it too.
// The loop pushes the host state at Open, clears and steps on the device
// at every step (never the host parameters), and pulls before each
// checkpoint only.
func TestDeviceHook(t *testing.T) {
	want := finalOf(t)
	full := t.TempDir()
	if err := newToy().openRun(t, full).Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantMetrics, _ := os.ReadFile(filepath.Join(full, "metrics.jsonl"))

	dir := t.TempDir()
	tr, dev, mod := onDevice()
	r := tr.open(t, dir, mod)
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	host := dev.host[0]
	if !slices.Equal(tr.w.Value.Data, want) || !slices.Equal(host.Value.Data, want) {
		t.Fatalf("device run ends at %v (host copy %v), the host run at %v", tr.w.Value.Data, host.Value.Data, want)
	}
	if slices.ContainsFunc(host.Grad.Data, func(g float32) bool { return g != 0 }) {
		t.Errorf("the host gradients were written: %v", host.Grad.Data)
	}
	if r.Optimizer().Step != 14 || len(r.Optimizer().M["w"]) != 3 {
		t.Errorf("host AdamW after the run: step %d, moments %v", r.Optimizer().Step, r.Optimizer().M)
	}
	if dev.calls[0] != "push" || dev.count("push") != 1 || dev.count("zero") != 14 || dev.count("step") != 14 || dev.count("pull") != len(tr.saves) {
		t.Errorf("device calls %v with checkpoints at %v: want one push first, 14 zero and step, a pull per checkpoint", dev.calls, tr.saves)
	}
	for i, c := range dev.calls[1:] {
		if c == "zero" && dev.calls[i+2] != "step" {
			t.Fatalf("device calls %v: a zero not followed by its step", dev.calls)
		}
	}
	got, _ := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	if string(got) != string(wantMetrics) {
		t.Errorf("metrics of the device run:\n%s\nof the host run:\n%s", got, wantMetrics)
	}

	// Stopped after 5 steps, resumed by a fresh trainer and device (a new
	// process): the resume pushes the restored host state.
	dir = t.TempDir()
	tr, _, mod = onDevice()
	if err := tr.open(t, dir, func(c *Config) { mod(c); c.StopAfter = 5 }).Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	tr, dev, mod = onDevice()
	cfg := tr.config(dir)
	cfg.Resume = true
	mod(&cfg)
	r, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr.run = r
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	if dev.calls[0] != "push" || dev.count("zero") != 9 {
		t.Errorf("resumed device calls %v: want a push first, 9 steps", dev.calls)
	}
	if !slices.Equal(dev.params[0].Value.Data, want) || !slices.Equal(dev.host[0].Value.Data, want) {
		t.Fatalf("stopped and resumed device run ends at %v, the host run at %v", dev.params[0].Value.Data, want)
	}
	if dev.opt.Step != 14 {
		t.Errorf("resumed device optimizer at step %d", dev.opt.Step)
	}
	got, _ = os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	if string(got) != string(wantMetrics) {
		t.Errorf("metrics of the resumed device run:\n%s\nof the host run:\n%s", got, wantMetrics)
	}
}

// TestDeviceHookErrors: a failing device call stops the run with an error
// that wraps it (Open's push, a step's clear or update, a checkpoint's
// pull), and Run.Pull is a no-op without a Device.
func TestDeviceHookErrors(t *testing.T) {
	for _, fail := range []string{"push", "zero", "step", "pull"} {
		tr, dev, mod := onDevice()
		dev.fail = fail
		r, err := Open(func() Config { c := tr.config(t.TempDir()); mod(&c); return c }())
		if err == nil {
			tr.run = r
			err = r.Train(context.Background())
		}
		if !errors.Is(err, errFake) || !strings.Contains(err.Error(), "the device optimizer") {
			t.Errorf("device failing at %s: %v", fail, err)
		}
	}
	tr := newToy()
	r := tr.open(t, t.TempDir(), nil)
	if err := r.Pull(); err != nil {
		t.Errorf("Pull without a device: %v", err)
	}
}
