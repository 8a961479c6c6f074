package main

import (
	"encoding/json"
	"fmt"

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

// trainLong is the Long help of `nvdp train`.
const trainLong = `Fine-tune an encoder with (or without) the NVIB bottleneck on a GLUE task.

AdamW with linear warm-up and decay, KL schedule s(t), gradient clipping, dynamic padding,
dev evaluation every epoch on the task's selection metric, early stopping (--patience),
best model kept in --out (config.json, nvdp_config.json, model.safetensors, tokenizer files,
train_options.json), metrics.jsonl, and a resumable checkpoint (--resume; Ctrl-C or SIGTERM
stops after the current step with a checkpoint). docs/training.md.

--target-epsilon E [--delta D] or --target-rd R [--order L] calibrates the clipping of
nvdp-clipped before training: the constants not given on the command line (--c-mu,
--logvar-margin, --c-alpha-min) are chosen so that the certified guarantee of --releases
releases of one text is the target ('nvdp certify'); they are saved in train_options.json
and nvdp_config.json, the calibration in certificate.json. A clipped variant (nvdp-clipped,
gaussian) in principled mode needs a target, or --hand-set-clipping to train with the
given (or the paper's per-task) constants and whatever epsilon they certify (the paper's:
thousands); docs/privacy.md, "A guarantee by default".

--variant gaussian is the Gaussian-mechanism baseline at the same release point: each
token embedding clipped to the L2 ball of radius C (--c-mu) plus N(0, sigma_p^2 I) noise,
sigma_p the NVIB prior sigma, at all max-seq-len positions, read by the same block and head
(no NVIB layer, no KL term: --lambda is ignored). A target calibrates C with the same
accountant (certified RD 2 lambda C^2 max-seq-len / sigma_p^2); without one, --c-mu is C.

--task lid trains the speech language identifier on --lid-dir (see 'nvdp run --help' and
docs/speech.md).`

func newTrainCmd() *cobra.Command {
	f := &trainCmdFlags{}
	o := new(model.DefaultOptions())
	cmd := &cobra.Command{
		Use:   "train --task TASK --glue-dir DIR --encoder SPEC --variant V --out DIR",
		Short: "Train a baseline, NVDP, NVDP-Clipped or Gaussian-mechanism model on a GLUE task",
		Long:  trainLong,
		Example: `  nvdp train --task sst2 --glue-dir ../shared/data/glue --encoder scratch:bert-tiny \
    --vocab ../shared/models/bert-base-uncased-vocab/vocab.txt --variant nvdp-clipped \
    --lambda 1e-2 --target-epsilon 8 --epochs 3 --out runs/sst2-eps8`,
		Args: cobra.NoArgs,
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
	data := f.dv.data()
	if err := t.Check(o, data); err != nil {
		return flagError(err)
	}
	d, err := f.dev.openTask(t, o)
	if err != nil {
		return err
	}
	defer closeDevice(d)
	ctx, cancel := signalContext(cmd, stopTraining)
	defer cancel()
	r, err := t.Train(ctx, *o, data, newProgress(cmd, f.noProgress))
	if err != nil {
		return resumeHint(flagError(err), "nvdp train --resume --out "+o.Out)
	}
	if f.jsonOut {
		return json.NewEncoder(cmd.OutOrStdout()).Encode(r)
	}
	r.WriteText(cmd.OutOrStdout())
	return nil
}

// task checks the flags that need no data (--order and --delta without
// their target, the device, a resume's conflicts) and returns the task.
func (f *trainCmdFlags) task(cmd *cobra.Command) (task.Task, error) {
	o := f.o
	finishTrainFlags(cmd, o)
	if err := f.dev.check(); err != nil {
		return nil, err
	}
	if cmd.Flags().Changed("order") && model.IsNoTarget(o.TargetRD) {
		return nil, fmt.Errorf("--order is the Renyi order of --target-rd; give --target-rd or leave it out")
	}
	if cmd.Flags().Changed("delta") && model.IsNoTarget(o.TargetEpsilon) {
		return nil, fmt.Errorf("--delta is the delta of --target-epsilon; give --target-epsilon or leave it out")
	}
	return f.taskOf(cmd, o.Resume)
}

func init() { rootCmd.AddCommand(newTrainCmd()) }
