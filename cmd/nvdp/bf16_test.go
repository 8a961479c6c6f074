package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/train"
)

// `--precision bf16` on the CUDA stand-in (BF16 GEMM inputs, FP32
// accumulation): `nvdp bench --device cuda --precision bf16` times a step
// of bert-tiny, and `nvdp train --device cuda --precision bf16
// --host-noise` trains a tiny NVDP-Clipped model (one optimizer step)
// whose report names the bf16 backend and whose dev loss is the same run's
// on the CPU (same noise) within 2e-2 relative (BF16 roundings, 2^-8 per
// GEMM input, through the model); bf16 on the CPU is refused.
func TestDeviceBF16(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a tiny model twice")
	}
	useStandIn(t)
	if _, err := runCmd(rootCmd, "bench", "--device", "cuda", "--precision", "bf16", "--config", "bert-tiny", "--batch", "2", "--seq", "8", "--steps", "1"); err != nil {
		t.Fatalf("bench: %v", err)
	}
	if _, err := runCmd(newTrainCmd(), "--task", "sst2", "--device", "cpu", "--precision", "bf16", "--out", t.TempDir()); err == nil ||
		!strings.Contains(err.Error(), "bf16 needs a GPU") {
		t.Errorf("train --device cpu --precision bf16: %v", err)
	}
	glueDir, vocab := synthSST2(t, 16)
	res := map[string]train.Result{}
	devLoss := map[string]float64{}
	for _, prec := range []string{"fp32", "bf16"} {
		device := "cuda"
		if prec == "fp32" {
			device = "cpu"
		}
		out := filepath.Join(t.TempDir(), prec)
		js, err := runCmd(newTrainCmd(), "--task", "sst2", "--glue-dir", glueDir, "--vocab", vocab, "--encoder", "scratch:bert-tiny",
			"--max-seq-len", "8", "--epochs", "1", "--batch-size", "16", "--target-epsilon", "16", "--seed", "3",
			"--device", device, "--precision", prec, "--host-noise", "--no-progress", "--json", "--out", out)
		if err != nil {
			t.Fatalf("train --device %s --precision %s: %v", device, prec, err)
		}
		var r train.Result
		if err := json.Unmarshal([]byte(js), &r); err != nil {
			t.Fatalf("train --json: %v\n%s", err, js)
		}
		res[prec] = r
		b, err := os.ReadFile(filepath.Join(out, train.MetricsFile))
		if err != nil {
			t.Fatal(err)
		}
		var em train.EpochMetrics
		if err := json.Unmarshal(b, &em); err != nil {
			t.Fatalf("%s: %v", train.MetricsFile, err)
		}
		devLoss[prec] = float64(em.Dev["dev_loss"])
	}
	if bf := res["bf16"]; !strings.HasPrefix(bf.Backend, "cuda (") || !strings.HasSuffix(bf.Backend, ", bf16)") || bf.Steps != 1 {
		t.Errorf("bf16 run: backend %q, %d steps", bf.Backend, bf.Steps)
	}
	a, b := devLoss["fp32"], devLoss["bf16"]
	t.Logf("dev loss after one step: cpu fp32 %v, cuda bf16 %v (relative difference %.3g)", a, b, math.Abs(a-b)/math.Abs(a))
	if !(math.Abs(a-b) <= 2e-2*math.Abs(a)) {
		t.Errorf("dev loss: cpu %v, cuda bf16 %v", a, b)
	}
}
