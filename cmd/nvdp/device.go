package main

import (
	"fmt"
	"log/slog"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/spf13/pflag"
)

// deviceFlags are --device and --precision of the commands that compute: a
// run-time choice, never part of a model (a model trained on either device
// runs on the other).
type deviceFlags struct {
	device, precision string
	hostNoise         bool
}

func (f *deviceFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.device, "device", cuda.DeviceCPU, "cpu | cuda (an NVIDIA GPU: the driver, cuBLAS and NVRTC 12 or 13 loaded at run time; NVDP_CUDA_LIB_DIR) | auto (cuda when it loads, else cpu)")
	fs.StringVar(&f.precision, "precision", cuda.PrecisionFP32, "GEMM precision on the GPU: fp32 | tf32 (tensor cores round GEMM inputs to TF32) | bf16 (GEMM inputs rounded to BF16, FP32 accumulation, compute capability 8.0+; parameters, optimizer, LayerNorm, softmax, losses and the NVIB layer stay FP32)")
}

// check refuses a device or precision that does not exist, before any work
// (cuda.CheckChoice).
func (f *deviceFlags) check() error {
	if err := cuda.CheckChoice(f.device, f.precision); err != nil {
		return fmt.Errorf("--device %s --precision %s: %w", f.device, f.precision, err)
	}
	return nil
}

// open opens the device the flags name (nil: the CPU) and logs what runs;
// --device auto without a GPU warns that a --precision other than fp32 does
// not apply. A GPU that cannot be opened is an error naming --device.
func (f *deviceFlags) open() (*cuda.Device, error) {
	d, fallback, err := cuda.Select(f.device, f.precision, cuda.Options{})
	if err != nil {
		return nil, fmt.Errorf("--device %s --precision %s: %w", f.device, f.precision, err)
	}
	if d == nil {
		if fallback != "" {
			slog.Info("device: cpu (auto: no GPU)", "why", fallback)
			if f.precision != cuda.PrecisionFP32 {
				slog.Warn(fmt.Sprintf("--device auto --precision %s: no GPU loaded, so the CPU computes in FP32 (--precision applies to a GPU only)", f.precision), "why", fallback)
			}
		}
		slog.Info("device", "device", cuda.DeviceCPU, "backend", nn.Backend())
		return nil, nil
	}
	in := d.Info()
	slog.Info("device", "device", cuda.DeviceCUDA, "card", in.Name, "compute_capability", in.ComputeCapability, "memory_gib",
		float64(in.MemoryBytes)/(1<<30), "driver_cuda", in.DriverVersion, "cublas", in.CUBLASVersion, "nvrtc", in.NVRTCVersion,
		"precision", in.Precision, "driver_lib", in.DriverLib)
	return d, nil
}
