package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/speech"
	"github.com/nvdp-project/nvdp/task"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// trainingFlags are the flags `nvdp train` and `nvdp run` share, bound
// once (bind): the training options, --no-progress, the task's data and
// the device.
type trainingFlags struct {
	o          *model.Options
	noProgress bool
	dv         dataFlagValues
	dev        deviceFlags
}

func (f *trainingFlags) bind(fs *pflag.FlagSet, o *model.Options) {
	f.o = o
	trainFlags(fs, o, &f.noProgress)
	dataFlags(fs, &f.dv)
	f.dev.bindTraining(fs)
}

// taskOf is the task of a run whose flags the command has checked: --task,
// or the model's in --out (fromOut: --resume, --skip-train; runTask);
// the device flags a task without a GPU twin refuses (refuseDevice); a
// resume's flags that contradict its saved options (refuseResumeConflicts);
// then the task's defaults for the flags left out (task.Task.Apply).
// Errors name the flags.
func (f *trainingFlags) taskOf(cmd *cobra.Command, fromOut bool) (task.Task, error) {
	t, err := runTask(f.o, fromOut)
	if err != nil {
		return nil, err
	}
	if err := f.dev.refuseDevice(t); err != nil {
		return nil, err
	}
	if f.o.Resume { // as nvdp train --resume (issue 32)
		if err := refuseResumeConflicts(cmd, f.o, &f.dv); err != nil {
			return nil, err
		}
	}
	if err := t.Apply(f.o, givenFlags(cmd)); err != nil {
		return nil, flagError(err)
	}
	return t, nil
}

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
func givenFlags(cmd *cobra.Command) option.Given {
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

// openTask opens the device of a training run of t (nil: the CPU); a task
// without a GPU twin runs on the CPU (refuseDevice has refused the flags
// that ask otherwise).
func (f *deviceFlags) openTask(t task.Task) (*cuda.Device, error) {
	if t.Info().DeviceErr != nil {
		return nil, nil
	}
	return f.open()
}

// refuseDevice is the error of --device cuda (and --host-noise) for a task
// without a GPU twin (task.Info.CheckDevice); auto runs it on the CPU with a
// log line.
func (f *deviceFlags) refuseDevice(t task.Task) error {
	cpu, err := t.Info().CheckDevice(f.device, f.hostNoise)
	if cpu != nil {
		slog.Info("device: cpu (" + cpu.Error() + ")")
	}
	return flagError(err)
}

// refuseResumeConflicts refuses the flags given to a resumed run that
// contradict the options saved in its directory (task.ResumeConflicts),
// each value written as its flag writes it.
func refuseResumeConflicts(cmd *cobra.Command, o *model.Options, dv *dataFlagValues) error {
	return flagError(task.ResumeConflicts(o, dv.data(), givenFlags(cmd), func(option string, v any) string {
		return flagText(cmd.Flags().Lookup(optionFlag(option)).Value, v)
	}))
}

// flagText is v, the value of the option that flag value f sets, as the
// flag writes its own: auto, none and off as the flag takes them.
func flagText(f pflag.Value, v any) string {
	switch x := v.(type) {
	case float64:
		if fo, ok := f.(floatOr); ok {
			fo.p = &x
			return fo.String()
		}
	case *int:
		if _, ok := f.(latentDimFlag); ok {
			return latentDimFlag{&x}.String()
		}
	case *model.RadiusSchedule:
		return radiusScheduleFlag{&x}.String()
	}
	return fmt.Sprint(v)
}
