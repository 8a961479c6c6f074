package main

import (
	"fmt"

	"encoding/json"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/task"
	"github.com/nvdp-project/nvdp/train"
	"github.com/spf13/cobra"
)

// runCmdFlags are the flags of `nvdp run`: the pipeline's options, the
// task's data and the device.
type runCmdFlags struct {
	trainingFlags
	po                      *train.PipelineOptions
	af                      *auditStrings
	jsonOut, failOnCollapse bool
}

func newRunCmd() *cobra.Command {
	f := &runCmdFlags{po: new(train.DefaultPipelineOptions())}
	po := f.po
	cmd := &cobra.Command{
		Use:   "run --task TASK --glue-dir DIR --encoder SPEC --variant V --out DIR",
		Short: "Train, evaluate and audit in one: utility and privacy in DIR/report.json",
		Long: `The main job: 'nvdp train', then 'nvdp eval' of the best model on dev (utility) and the audit of
the posteriors of --audit-split with the certified guarantee (privacy; null for the baseline),
written to DIR/report.json and summarised on stdout. --skip-train evaluates and audits the model
already in --out. docs/training.md, "nvdp run"; docs/speech.md, "Task: nvdp run --task lid".`,
		Example: `  nvdp run --task sst2 --glue-dir ../shared/data/glue --encoder scratch:bert-tiny \
    --vocab ../shared/models/bert-base-uncased-vocab/vocab.txt --variant nvdp-clipped \
    --lambda 1e-2 --target-epsilon 8 --epochs 3 --out runs/sst2-eps8`,
		RunE: func(cmd *cobra.Command, args []string) error { return f.run(cmd) },
	}
	fs := cmd.Flags()
	f.bind(fs, &po.Train)
	fs.BoolVar(&po.SkipTrain, "skip-train", false, "do not train: evaluate and audit the model in --out")
	f.af = pipelineAuditFlags(fs, po)
	fs.BoolVar(&f.jsonOut, "json", false, "print report.json on stdout instead of the summary")
	fs.StringVar(&po.Baseline, "baseline", "", "non-private baseline to print beside the result: a stored baseline file (train.StoredBaseline JSON) or a baseline run's report.json; read before training")
	fs.BoolVar(&f.failOnCollapse, "fail-on-collapse", false, "exit non-zero (after writing report.json) when the run collapsed: utility at chance and every pair of posteriors within 0.01 nats")
	return cmd
}

// run checks the flags, runs the pipeline on the device and prints its
// report; with --fail-on-collapse a collapsed run is an error.
func (f *runCmdFlags) run(cmd *cobra.Command) error {
	po := f.po
	t, err := f.task(cmd)
	if err != nil {
		return err
	}
	d, err := t.Info().OpenDevice(f.dev.open) // none for a task without a GPU twin
	if err != nil {
		return err
	}
	po.Train.Device, po.Train.HostNoise = d, f.dev.hostNoise
	defer cuda.CloseLogged(d)
	ctx, cancel := signalContext(cmd, stopTraining)
	defer cancel()
	report := newProgress(cmd, f.noProgress)
	po.Audit.Progress = report
	rep, err := task.RunPipeline(ctx, t, *po, &f.dv, report)
	if err != nil {
		return resumeHint(flagError(err), "the same command with --resume")
	}
	if f.jsonOut {
		err = json.NewEncoder(cmd.OutOrStdout()).Encode(rep)
	} else {
		err = rep.WriteText(cmd.OutOrStdout())
	}
	if err != nil || !f.failOnCollapse {
		return err
	}
	return rep.Collapse.Err()
}

// task checks the flags and returns the task with its defaults applied to
// the flags left out.
func (f *runCmdFlags) task(cmd *cobra.Command) (task.Task, error) {
	po := f.po
	if err := f.dev.check(); err != nil {
		return nil, err
	}
	if err := f.af.finish(cmd, po); err != nil {
		return nil, err
	}
	po.ResolveTargets(givenFlags(cmd)) // the constants given; the audit's order and delta
	if err := po.Train.CheckTargetValues(); err != nil {
		return nil, flagError(err)
	}
	if err := po.CheckSkipTrain(); err != nil {
		return nil, fmt.Errorf("%w (see nvdp certify --model %s)", flagError(err), po.Train.Out)
	}
	return f.taskOf(cmd, po.Train.Resume || po.SkipTrain)
}
