package train

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/internal/cudaemu"
	"github.com/nvdp-project/nvdp/model"
)

// deviceRun trains the tiny run of synthOptions on the test's device (the
// CPU stand-in, or the GPU with NVDP_CUDA_REAL=1) with edit applied.
func deviceRun(t *testing.T, glueDir, vocab, out string, edit func(*model.Options)) *Result {
	t.Helper()
	o := synthOptions(t, glueDir, vocab, out)
	o.Device = cudaemu.OpenDevice(t)
	if edit != nil {
		edit(&o)
	}
	res, err := Run(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// closeRel reports whether a and b agree to rel (relative to the larger).
func closeRel(a, b, rel float64) bool {
	return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b))
}

// TestDeviceTrainingMatchesCPU: a run on the device with the noise drawn on
// the host from the device's stream (HostNoise: dropout, Gaussian and
// Dirichlet draws identical on both) follows the CPU run of the same seed:
// per-epoch training and dev losses within 1e-3, the same dev accuracy, the
// best model's parameters within 1e-3 of the largest; its files are a CPU
// run's (the model loads and evaluates on the CPU as the device evaluated
// it). 1e-3: the bound on the losses of the two devices; the
// GEMMs' summation order differs (cuBLAS, OpenBLAS or gonum), and 16 steps
// of AdamW at lr 3e-3 carry the difference into the parameters.
func TestDeviceTrainingMatchesCPU(t *testing.T) {
	glueDir, vocab := synthGlue(t, 64, 24)
	cpuDir, devDir := filepath.Join(t.TempDir(), "cpu"), filepath.Join(t.TempDir(), "dev")
	o := synthOptions(t, glueDir, vocab, cpuDir)
	o.HostNoise, o.LogSteps = true, true
	if _, err := Run(context.Background(), o, nil); err != nil {
		t.Fatal(err)
	}
	deviceRun(t, glueDir, vocab, devDir, func(o *model.Options) { o.HostNoise, o.LogSteps = true, true })
	sc, sd := readStepLosses(t, cpuDir), readStepLosses(t, devDir)
	if len(sc) != 16 || len(sd) != len(sc) {
		t.Fatalf("step losses: cpu %d, device %d, want 16", len(sc), len(sd))
	}
	for i := range sc {
		if sc[i].Step != i+1 || sd[i].Step != i+1 || !closeRel(sc[i].Loss, sd[i].Loss, 1e-3) {
			t.Errorf("step %d: cpu %+v, device %+v", i+1, sc[i], sd[i])
		}
	}
	hc, hd := metricsWithoutTime(t, cpuDir), metricsWithoutTime(t, devDir)
	if len(hc) != 2 || len(hd) != 2 {
		t.Fatalf("metrics lines: cpu %d, device %d", len(hc), len(hd))
	}
	for i := range hc {
		c, d := hc[i], hd[i]
		for _, k := range []string{"loss", "task", "kl_g", "kl_d"} {
			if !closeRel(float64(c.Train[k]), float64(d.Train[k]), 1e-3) {
				t.Errorf("epoch %d train %s: cpu %v, device %v", i+1, k, c.Train[k], d.Train[k])
			}
		}
		if !closeRel(float64(c.Dev["dev_loss"]), float64(d.Dev["dev_loss"]), 1e-3) || c.Dev["accuracy"] != d.Dev["accuracy"] {
			t.Errorf("epoch %d dev: cpu %v, device %v", i+1, c.Dev, d.Dev)
		}
	}
	wc, wd := readWeights(t, cpuDir), readWeights(t, devDir)
	var diff, scale float64
	for name, a := range wc {
		b := wd[name]
		if len(b) != len(a) {
			t.Fatalf("parameter %s: %d values on the device, %d on the CPU", name, len(b), len(a))
		}
		for i := range a {
			diff = math.Max(diff, math.Abs(float64(a[i]-b[i])))
			scale = math.Max(scale, math.Abs(float64(a[i])))
		}
	}
	if diff > 1e-3*scale {
		t.Errorf("best model: parameters differ by %v (largest %v)", diff, scale)
	}
	t.Logf("best model: parameters within %.3g of %.3g", diff, scale)
	b := readTextModel(t, devDir)
	eo := DefaultEvalOptions(b)
	cpuEval, err := Evaluate(b, eo)
	if err != nil {
		t.Fatal(err)
	}
	eo.Device, eo.Out = cudaemu.OpenDevice(t), t.TempDir()
	devEval, err := Evaluate(b, eo)
	if err != nil {
		t.Fatal(err)
	}
	if cpuEval.Metrics["accuracy"] != devEval.Metrics["accuracy"] || cpuEval.Release == nil || devEval.Release == nil {
		t.Fatalf("evaluation: cpu %v, device %v", cpuEval.Metrics, devEval.Release)
	}
	for name, pair := range map[string][2][]float32{"mu": {cpuEval.Release.Mu, devEval.Release.Mu},
		"logvar": {cpuEval.Release.Logvar, devEval.Release.Logvar}, "alpha": {cpuEval.Release.Alpha, devEval.Release.Alpha}} {
		var d, s float64
		for i := range pair[0] {
			d = math.Max(d, math.Abs(float64(pair[0][i]-pair[1][i])))
			s = math.Max(s, math.Abs(float64(pair[0][i])))
		}
		if d > 1e-4*s {
			t.Errorf("posterior dump %s: device and CPU differ by %v (largest %v)", name, d, s)
		}
	}
}

// TestDeviceResume: a device run stopped after 5 steps and resumed (on the
// device) equals the uninterrupted device run bit for bit: the checkpoint
// holds the device's Philox state and the AdamW moments pulled from it.
func TestDeviceResume(t *testing.T) {
	glueDir, vocab := synthGlue(t, 64, 24)
	whole, split := filepath.Join(t.TempDir(), "whole"), filepath.Join(t.TempDir(), "split")
	deviceRun(t, glueDir, vocab, whole, nil)
	if r := deviceRun(t, glueDir, vocab, split, func(o *model.Options) { o.StopAfterSteps = 5 }); !r.Interrupted || r.Steps != 5 {
		t.Fatalf("stopped run: %+v", r)
	}
	deviceRun(t, glueDir, vocab, split, func(o *model.Options) { o.Resume = true })
	a, b := readWeights(t, whole), readWeights(t, split)
	for name, v := range a {
		for i := range v {
			if v[i] != b[name][i] {
				t.Fatalf("%s[%d]: uninterrupted %v, resumed %v", name, i, v[i], b[name][i])
			}
		}
	}
	ma, mb := metricsWithoutTime(t, whole), metricsWithoutTime(t, split)
	for i := range ma {
		if ma[i].Train["loss"] != mb[i].Train["loss"] || ma[i].Dev["dev_loss"] != mb[i].Dev["dev_loss"] {
			t.Errorf("epoch %d: uninterrupted %v %v, resumed %v %v", i+1, ma[i].Train, ma[i].Dev, mb[i].Train, mb[i].Dev)
		}
	}
}

// readStepLosses reads the StepsFile of a run with LogSteps.
func readStepLosses(t *testing.T, dir string) []StepLoss {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, StepsFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []StepLoss
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var l StepLoss
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("%s: %q: %v", StepsFile, line, err)
		}
		out = append(out, l)
	}
	return out
}
