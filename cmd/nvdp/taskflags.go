package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/speech"
	"github.com/nvdp-project/nvdp/task"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// trainingFlags are the flags `nvdp train` and `nvdp run` share.
type trainingFlags struct {
	o          *model.Options
	noProgress bool
	dv         task.Data
	dev        deviceFlags
}

func (f *trainingFlags) bind(fs *pflag.FlagSet, o *model.Options) {
	f.o = o
	trainFlags(fs, o, &f.noProgress)
	dataFlags(fs, &f.dv)
	f.dev.bind(fs)
	fs.BoolVar(&f.dev.hostNoise, "host-noise", false, "draw each training step's dropout and NVDP noise on the host from the GPU's Philox stream, on either device, so that a CPU run and a GPU run of one seed see the same noise (comparisons: scripts/gpu-check.sh); costs an upload per step on the GPU")
}

// taskOf is the task of a run whose flags the command has checked
// (task.ForRun: --task, or the model's in --out when fromOut, its defaults
// applied to the flags left out), a resume's conflicts written as the flags
// write their values. Errors name the flags.
func (f *trainingFlags) taskOf(cmd *cobra.Command, fromOut bool) (task.Task, error) {
	t, cpu, err := task.ForRun(f.o, &f.dv, task.RunRequest{FromOut: fromOut, Device: f.dev.device, HostNoise: f.dev.hostNoise,
		Given: givenFlags(cmd), Show: func(option string, v any) string { return flagText(cmd.Flags().Lookup(optionFlag(option)).Value, v) }})
	if cpu != nil {
		slog.Info("device: cpu (" + cpu.Error() + ")")
	}
	return t, flagError(err)
}

// dataFlags binds the flags of the task data beyond train's options
// (task.Data: the speech task's corpus and utterance length).
func dataFlags(fs *pflag.FlagSet, d *task.Data) {
	fs.StringVar(&d.DataDir, "lid-dir", os.Getenv("NVDP_LID_DIR"), "--task lid: the corpus in CommonLanguage's layout (the synthetic stand-in of scripts/make-lid-corpus.sh, or common_voice_kpd; default $NVDP_LID_DIR)")
	fs.Float64Var(&d.MaxSeconds, "max-seconds", speech.DefaultMaxSeconds, "--task lid: every utterance is cropped or zero-padded to this many seconds, so every release has the same frames F + 1 components (docs/speech.md)")
}

// givenFlags reports the options (by JSON key) whose flags were given.
func givenFlags(cmd *cobra.Command) option.Given {
	return func(name string) bool {
		f := cmd.Flags().Lookup(optionFlag(name))
		return f != nil && f.Changed
	}
}

// flagText is v, the value of the option that flag value f sets, as the
// flag writes its own: auto, none and off as the flag takes them.
func flagText(f pflag.Value, v any) string {
	if t, ok := f.(interface{ show(any) (string, bool) }); ok {
		if s, ok := t.show(v); ok {
			return s
		}
	}
	return fmt.Sprint(v)
}
