package cuda

import (
	"errors"
	"fmt"
)

// The device choices of a command, given by --device: the CPU engine, a GPU, or a GPU when one
// loads.
const (
	DeviceCPU  = "cpu"
	DeviceCUDA = "cuda"
	DeviceAuto = "auto"
)

// The precisions of the device's GEMMs, given by --precision.
//
// PrecisionFP32 is IEEE FP32. PrecisionTF32 is FP32 with cuBLAS rounding the GEMM inputs to TF32 on
// tensor cores. PrecisionBF16 takes BF16 GEMM inputs, rounded to nearest even by the layers of
// package dnn, with FP32 accumulation and output.
//
// Whatever the precision, everything but the GEMMs' inputs is FP32 or float64: parameters,
// optimizer, LayerNorm, softmax, losses and the NVIB layer; see "BF16" in docs/engine.md.
const (
	PrecisionFP32 = "fp32"
	PrecisionTF32 = "tf32"
	PrecisionBF16 = "bf16"
)

// CheckChoice checks a device choice, [DeviceCPU], [DeviceCUDA] or [DeviceAuto], and a GEMM
// precision, [PrecisionFP32], [PrecisionTF32] or [PrecisionBF16], without opening anything: it
// refuses what [Select] refuses before it loads a library. tf32 and bf16 need a GPU.
func CheckChoice(choice, precision string) error {
	switch choice {
	case DeviceCPU, DeviceCUDA, DeviceAuto:
	default:
		return fmt.Errorf("device %q: want %s, %s or %s", choice, DeviceCPU, DeviceCUDA, DeviceAuto)
	}
	switch precision {
	case PrecisionFP32:
	case PrecisionTF32, PrecisionBF16:
		if choice == DeviceCPU {
			return fmt.Errorf("precision %s: GEMMs on the CPU are FP32 (%s needs a GPU)", precision, precision)
		}
	default:
		return fmt.Errorf("precision %q: want %s, %s or %s", precision, PrecisionFP32, PrecisionTF32, PrecisionBF16)
	}
	return nil
}

// Select opens the device that choice names. precision sets o.Precision and o.TF32.
//
// For [DeviceCPU] it returns nil. For [DeviceCUDA] it returns the GPU of o, or the error when none
// loads: a [*LoadError] naming what was looked for and where, or [ErrNoDevice]. For [DeviceAuto] it
// returns the GPU when one loads, and otherwise nil with the reason in fallback. With DeviceAuto
// and bf16, a machine without CUDA falls back to the CPU's FP32.
//
// Select also returns an error for an unknown choice or precision, tf32 or bf16 on the CPU
// included, and, for bf16, from [Open]: a cuBLAS without the BF16 GEMMs or a GPU older than
// compute capability 8.0.
func Select(choice, precision string, o Options) (d *Device, fallback string, err error) {
	if err := CheckChoice(choice, precision); err != nil {
		return nil, "", err
	}
	o.Precision, o.TF32 = precision, precision == PrecisionTF32
	switch choice {
	case DeviceCPU:
		return nil, "", nil
	case DeviceCUDA:
		d, err := Open(o)
		return d, "", err
	case DeviceAuto:
		d, err := Open(o)
		if errors.Is(err, ErrNoCUDA) {
			return nil, err.Error(), nil
		}
		return d, "", err
	}
	panic("unreachable: CheckChoice accepted " + choice)
}
