package main

import (
	"bytes"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/train"
)

// The device flags refuse what they cannot do, each error naming its flag.
func TestDeviceFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cmd  func() (string, error)
		want string
	}{
		{"unknown device", func() (string, error) {
			return runCmd(newTrainCmd(), "--task", "sst2", "--device", "tpu", "--out", t.TempDir())
		}, "--device tpu"},
		{"speech on cuda", func() (string, error) {
			return runCmd(newTrainCmd(), "--task", "lid", "--device", "cuda", "--out", t.TempDir())
		}, "--device cuda: the speech encoder"},
		{"speech with host noise", func() (string, error) {
			return runCmd(newRunCmd(), "--task", "lid", "--host-noise", "--out", t.TempDir())
		}, "--host-noise"},
		{"eval on a device that does not exist", func() (string, error) {
			return runCmd(newEvalCmd(), "--model", t.TempDir(), "--precision", "fp16")
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cmd()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// `nvdp run --device cuda --host-noise` on the CUDA stand-in (the C
// stand-ins of the driver, cuBLAS and NVRTC, internal/cudaemu) trains,
// evaluates and audits a tiny NVDP-Clipped model whose report names the
// device and matches the same run on the CPU (--device cpu --host-noise: the
// same noise) to the accuracy and within 1e-3 relative on the dev loss; the
// audit ran on the device (audit_engine), the CPU run's on the CPU.
func TestRunOnDevice(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a tiny model twice")
	}
	useStandIn(t)
	glueDir, vocab := synthSST2(t, 48)
	reps := map[string]train.Report{}
	for _, device := range []string{"cpu", "cuda"} {
		out := filepath.Join(t.TempDir(), device)
		if _, err := runCmd(newRunCmd(), "--task", "sst2", "--glue-dir", glueDir, "--vocab", vocab, "--encoder", "scratch:bert-tiny",
			"--max-seq-len", "8", "--epochs", "1", "--batch-size", "16", "--target-epsilon", "16", "--seed", "3",
			"--device", device, "--host-noise", "--no-progress", "--out", out); err != nil {
			t.Fatalf("--device %s: %v", device, err)
		}
		reps[device] = readReport(t, out)
	}
	cpu, gpu := reps["cpu"], reps["cuda"]
	if !strings.HasPrefix(gpu.Backend, "cuda (") || strings.HasPrefix(cpu.Backend, "cuda") {
		t.Errorf("backends: cpu run %q, cuda run %q", cpu.Backend, gpu.Backend)
	}
	if cpu.Utility["accuracy"] != gpu.Utility["accuracy"] {
		t.Errorf("dev accuracy: cpu %v, cuda %v", cpu.Utility["accuracy"], gpu.Utility["accuracy"])
	}
	if a, b := cpu.Utility["dev_loss"], gpu.Utility["dev_loss"]; !(math.Abs(a-b) <= 1e-3*math.Abs(a)) {
		t.Errorf("dev loss: cpu %v, cuda %v", a, b)
	}
	if gpu.Privacy == nil || gpu.Privacy.InvalidPairs != 0 {
		t.Fatalf("cuda run: privacy block %+v", gpu.Privacy)
	}
	// the audit ran where the run did (train.TestPipelineAuditOnDevice: the same numbers)
	if gpu.Privacy.AuditEngine != gpu.Backend || cpu.Privacy == nil || cpu.Privacy.AuditEngine != train.AuditEngineCPU {
		t.Errorf("audit engines: cuda run %q (backend %q), cpu run %+v", gpu.Privacy.AuditEngine, gpu.Backend, cpu.Privacy)
	}
}

// TestAutoPrecisionWithoutGPU: --device auto --precision bf16 (or tf32)
// where no GPU loads runs on the CPU in FP32 and says so in a warning
// naming both flags (it said nothing); fp32 warns of nothing.
func TestAutoPrecisionWithoutGPU(t *testing.T) {
	t.Setenv(cuda.LibDirEnv, t.TempDir()) // no stand-in: a GPU loads only where a real one is
	for _, tc := range []struct{ precision, want string }{
		{cuda.PrecisionBF16, "--device auto --precision bf16: no GPU loaded, so the CPU computes in FP32"},
		{cuda.PrecisionTF32, "--device auto --precision tf32: no GPU loaded"},
		{cuda.PrecisionFP32, ""},
	} {
		var logs bytes.Buffer
		old := slog.Default()
		slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
		f := deviceFlags{device: cuda.DeviceAuto, precision: tc.precision}
		d, err := f.open()
		slog.SetDefault(old)
		if err != nil {
			t.Fatal(err)
		}
		if d != nil {
			cuda.CloseLogged(d)
			t.Skip("a GPU loaded")
		}
		warned := strings.Contains(logs.String(), "level=WARN")
		if tc.want == "" && warned || tc.want != "" && (!warned || !strings.Contains(logs.String(), tc.want)) {
			t.Errorf("--precision %s: logs\n%s\nwant a warning %q", tc.precision, logs.String(), tc.want)
		}
	}
}
