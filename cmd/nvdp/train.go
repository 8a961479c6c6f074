package main

import (
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/task"
	"github.com/spf13/cobra"
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
	defer closeDevice(d)
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
