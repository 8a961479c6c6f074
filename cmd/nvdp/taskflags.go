package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/speech"
	"github.com/nvdp-project/nvdp/task"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// dataFlagValues are the flags of the task data beyond train's options
// (task.Data: the speech task's corpus and utterance length).
type dataFlagValues struct {
	dataDir    string
	maxSeconds float64
}

func dataFlags(fs *pflag.FlagSet, v *dataFlagValues) {
	fs.StringVar(&v.dataDir, "lid-dir", os.Getenv("NVDP_LID_DIR"), "--task lid: the corpus in CommonLanguage's layout (the synthetic stand-in of scripts/make-lid-corpus.sh, or common_voice_kpd; default $NVDP_LID_DIR)")
	fs.Float64Var(&v.maxSeconds, "max-seconds", speech.DefaultMaxSeconds, "--task lid: every utterance is cropped or zero-padded to this many seconds, so every release has the same frames F + 1 components (docs/speech.md)")
}

// data is the task data the flags give.
func (v *dataFlagValues) data() *task.Data {
	return &task.Data{DataDir: v.dataDir, MaxSeconds: v.maxSeconds}
}

// givenFlags reports the options (by JSON key) whose flags were given.
func givenFlags(cmd *cobra.Command) task.Given {
	return func(name string) bool {
		f := cmd.Flags().Lookup(optionFlag(name))
		return f != nil && f.Changed
	}
}

// runTask is the task of a run: --task, or, for --resume or --skip-train
// (fromOut) without it, the task of the model in --out (task.Open). Errors
// name the flag.
func runTask(o *model.Options, fromOut bool) (task.Task, error) {
	if fromOut && o.Task == "" {
		m, err := task.Open(o.Out)
		if err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
		return m.Task, nil
	}
	t, err := task.Lookup(o.Task)
	return t, flagError(err)
}

// openTask opens the device of a training run of t (deviceFlags.openTraining;
// nil: the CPU); a task without a GPU twin runs on the CPU (refuseDevice
// has refused the flags that ask otherwise).
func (f *deviceFlags) openTask(t task.Task, o *model.Options) (*cuda.Device, error) {
	if t.DeviceErr() != nil {
		return nil, nil
	}
	return f.openTraining(o)
}

// refuseDevice is the error of --device cuda (and --host-noise) for a task
// without a GPU twin (task.Task.DeviceErr); auto runs it on the CPU with a
// log line.
func (f *deviceFlags) refuseDevice(t task.Task) error {
	why := t.DeviceErr()
	if why == nil {
		return nil
	}
	switch f.device {
	case cuda.DeviceCUDA:
		return fmt.Errorf("--device cuda: %v; run --task %s with --device cpu", why, t.Name())
	case cuda.DeviceAuto:
		slog.Info("device: cpu (" + why.Error() + ")")
	}
	if f.hostNoise {
		return fmt.Errorf("--host-noise: task %s draws its noise on the CPU only", t.Name())
	}
	return nil
}
