package task

import (
	"context"
	"log/slog"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/train"
)

// EvalDir evaluates the model in the directory dir on eo.Split, as `nvdp
// eval` does: it reads the model's task and options ([Open]), checks the
// device asked ([Info.CheckDevice] of device, as [cuda.Select] takes it:
// a task without a GPU twin refuses cuda, and with auto runs on the CPU,
// saying so in a log line), loads the model ([Task.Load]), then opens the
// device with open ([Info.OpenDevice]: none for a task without a GPU twin;
// a nil device is the CPU; it is closed when the evaluation ends) and
// evaluates ([Evaluator.Evaluate], eo.Device set). The model is checked before the device is opened: a
// broken model is named first.
//
// Errors: an [*option.Error] naming model (a directory that is not a model
// or whose model does not load, the cause kept); CheckDevice's; open's,
// as it returns them; Evaluate's.
func EvalDir(ctx context.Context, dir string, eo EvalOptions, device string, open func() (*cuda.Device, error)) (*train.EvalResult, error) {
	m, err := Open(dir)
	if err != nil {
		return nil, option.Wrap("model", err)
	}
	cpu, err := m.Task.Info().CheckDevice(device, false)
	if cpu != nil {
		slog.Info("device: cpu (" + cpu.Error() + ")")
	}
	if err != nil {
		return nil, err
	}
	loaded, err := m.Task.Load(m)
	if err != nil {
		return nil, option.Wrap("model", err)
	}
	d, err := m.Task.Info().OpenDevice(open)
	if err != nil {
		return nil, err
	}
	defer cuda.CloseLogged(d)
	eo.Device = d
	return loaded.Evaluate(ctx, eo)
}
