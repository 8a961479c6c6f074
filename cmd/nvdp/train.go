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

// trainCmdFlags are the flags of `nvdp train`: the training options, the
// task's data and the device.
type trainCmdFlags struct {
	trainingFlags
	jsonOut bool
}

func newTrainCmd() *cobra.Command {
	f := &trainCmdFlags{}
	o := new(model.DefaultOptions())
	cmd := &cobra.Command{
		Use:   "train --task TASK --glue-dir DIR --encoder SPEC --variant V --out DIR",
		Short: "Train a baseline, NVDP, NVDP-Clipped or Gaussian-mechanism model on a GLUE task",
		Long: `Fine-tune an encoder with (or without) the NVIB bottleneck on a GLUE task, or on --task lid,
and write the best model to --out with metrics.jsonl and a resumable checkpoint (--resume; Ctrl-C
or SIGTERM stops after the current step with a checkpoint). A clipped variant (nvdp-clipped,
gaussian) in principled mode needs --target-epsilon E, --target-rd R or --hand-set-clipping.

docs/training.md: the flags, the output directory, resuming, "Calibration to a privacy target"
and the Gaussian baseline; docs/privacy.md, "A guarantee by default"; docs/speech.md for lid.`,
		Example: `  nvdp train --task sst2 --glue-dir ../shared/data/glue --encoder scratch:bert-tiny \
    --vocab ../shared/models/bert-base-uncased-vocab/vocab.txt --variant nvdp-clipped \
    --lambda 1e-2 --target-epsilon 8 --epochs 3 --out runs/sst2-eps8`,
		RunE: func(cmd *cobra.Command, args []string) error { return f.run(cmd) },
	}
	f.bind(cmd.Flags(), o)
	cmd.Flags().Float64Var(&o.TargetOrder, "order", o.TargetOrder, "Renyi order lambda > 1 of --target-rd")
	cmd.Flags().Float64Var(&o.TargetDelta, "delta", o.TargetDelta, "delta of --target-epsilon")
	cmd.Flags().BoolVar(&f.jsonOut, "json", false, "print the result as JSON on stdout")
	return cmd
}

// run checks the flags, trains on the device and prints the result.
func (f *trainCmdFlags) run(cmd *cobra.Command) error {
	o := f.o
	t, err := f.task(cmd)
	if err != nil {
		return err
	}
	tr, err := t.Prepare(*o, &f.dv)
	if err != nil {
		return resumeHint(flagError(err), "nvdp train --resume --out "+o.Out)
	}
	d, err := t.Info().OpenDevice(f.dev.open) // none for a task without a GPU twin
	if err != nil {
		return err
	}
	defer cuda.CloseLogged(d)
	ctx, cancel := signalContext(cmd, stopTraining)
	defer cancel()
	r, err := tr.Train(ctx, d, f.dev.hostNoise, newProgress(cmd, f.noProgress))
	if err != nil {
		return resumeHint(flagError(err), "nvdp train --resume --out "+o.Out)
	}
	return printResult(cmd.OutOrStdout(), f.jsonOut, r)
}

// task checks the flags that need no data (--order and --delta without
// their target, the device, a resume's conflicts) and returns the task.
func (f *trainCmdFlags) task(cmd *cobra.Command) (task.Task, error) {
	o := f.o
	if o.HasTarget() { // the constants given stay fixed in the calibration
		o.FixGiven(givenFlags(cmd))
	}
	if err := f.dev.check(); err != nil {
		return nil, err
	}
	if err := o.CheckTargetGiven(givenFlags(cmd)); err != nil {
		return nil, flagError(err)
	}
	return f.taskOf(cmd, o.Resume)
}

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
