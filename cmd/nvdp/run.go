package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/task"
	"github.com/nvdp-project/nvdp/train"
	"github.com/spf13/cobra"
)

// runCmdFlags are the flags of `nvdp run`: the pipeline's options, the
// task's data and the device.
type runCmdFlags struct {
	trainingFlags
	po                      *train.PipelineOptions
	af                      *auditFlagValues
	jsonOut, failOnCollapse bool
}

// runLong is the Long help of `nvdp run`.
const runLong = `The main job: 'nvdp train', then 'nvdp eval' of the best model on dev (utility), the
posterior file of --audit-split (dev by default; fixed length max-seq-len + 1) and the audit
(principled Eq. rdp bound over all ordered pairs and BDP, or the reference mode), written to
DIR/report.json and summarised on stdout. The baseline has no posterior: privacy is null.
--variant gaussian (the Gaussian-mechanism baseline, see 'nvdp train --help') exports its
release in the same posterior format, so its audit and certificate are the same computation.
--skip-train evaluates and audits the model already in --out (e.g. QNLI, trained elsewhere).

--task lid is spoken language identification (paper §4.3, docs/speech.md): a Wav2Vec2
encoder (--encoder scratch:small by default, or hf:DIR) on the corpus in --lid-dir, every
utterance cropped or zero-padded to --max-seconds, the NVIB posterior over the frames
(N = F + 1), the same block, clipping, calibration and audit; utility (accuracy, macro-F1)
on the test split, audit over the dev utterances (--pairs samples them). Defaults from the
paper: C_mu 3, C_amax 0.7, lambda 1e-6 for nvdp-clipped and 1e-2 for nvdp, warm-up 0.1.`

func newRunCmd() *cobra.Command {
	f := &runCmdFlags{po: new(train.DefaultPipelineOptions())}
	po := f.po
	cmd := &cobra.Command{
		Use:   "run --task TASK --glue-dir DIR --encoder SPEC --variant V --out DIR",
		Short: "Train, evaluate and audit in one: utility and privacy in DIR/report.json",
		Long:  runLong,
		Example: `  nvdp run --task sst2 --glue-dir ../shared/data/glue --encoder scratch:bert-tiny \
    --vocab ../shared/models/bert-base-uncased-vocab/vocab.txt --variant nvdp-clipped \
    --lambda 1e-2 --target-epsilon 8 --epochs 3 --out runs/sst2-eps8`,
		Args: cobra.NoArgs,
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
	d, err := f.dev.openTask(t, &po.Train)
	if err != nil {
		return err
	}
	defer closeDevice(d)
	ctx, cancel := signalContext(cmd, stopTraining)
	defer cancel()
	report := newProgress(cmd, f.noProgress)
	po.Audit.Progress = report
	rep, err := task.RunPipeline(ctx, t, *po, f.dv.data(), report)
	if err != nil {
		return resumeHint(flagError(err), "the same command with --resume")
	}
	if f.jsonOut {
		if err := json.NewEncoder(cmd.OutOrStdout()).Encode(rep); err != nil {
			return err
		}
	} else {
		printRunReport(cmd.OutOrStdout(), rep)
	}
	if f.failOnCollapse {
		return rep.Collapse.Err()
	}
	return nil
}

// task finishes and checks the flags (the device, the audit flags, the
// target against --skip-train, a resume's conflicts) and returns the task
// with its defaults applied to the flags left out.
func (f *runCmdFlags) task(cmd *cobra.Command) (task.Task, error) {
	po := f.po
	finishTrainFlags(cmd, &po.Train)
	if err := f.dev.check(); err != nil {
		return nil, err
	}
	if err := f.af.finish(po); err != nil {
		return nil, err
	}
	setTargetOrderDelta(&po.Train, po.Audit.Order, po.Audit.Delta)
	if err := po.Train.CheckTargetValues(); err != nil { // --target-epsilon 0 is an error, --skip-train or not
		return nil, flagError(err)
	}
	if po.SkipTrain && po.Train.HasTarget() {
		return nil, fmt.Errorf("--target-epsilon / --target-rd calibrate a training run; with --skip-train the model keeps its constants (see nvdp certify --model %s)", po.Train.Out)
	}
	return f.taskOf(cmd, po.Train.Resume || po.SkipTrain)
}

func init() { rootCmd.AddCommand(newRunCmd()) }

func printRunReport(w io.Writer, r *train.Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("task / variant / mode", fmt.Sprintf("%s / %s / %s", r.Task, r.Variant, r.Mode))
	row("encoder (backend)", fmt.Sprintf("%s (%s)", r.Encoder, r.Backend))
	if r.Variant != "baseline" && r.Variant != nvib.ModelGaussian {
		row("lambda", fmt.Sprint(r.Lambda))
	}
	if r.CAlphaMax > 0 {
		row("C_mu / C_amin / C_amax", fmt.Sprintf("%g / %.6g / %g", r.CMu, r.CAlphaMin, r.CAlphaMax))
	}
	if r.Variant == nvib.ModelGaussian {
		row("token radius C / noise sigma", fmt.Sprintf("%.6g / %g", r.CMu, r.Sigma))
	}
	if c := r.Calibration; c != nil && c.Calibration != nil && c.Guarantee != nil { // runs without a target have none
		t, g := c.Target, c.Guarantee
		target := fmt.Sprintf("epsilon %g at delta %g", t.Epsilon, t.Delta)
		if t.Kind == privacy.KindRD {
			target = fmt.Sprintf("RD %g nats at order %g", t.RD, t.Order)
		}
		constant := fmt.Sprintf("logvar margin %.6g", c.LogvarMargin)
		if c.Variant == nvib.ModelGaussian {
			constant = fmt.Sprintf("C %.6g", c.CMu)
		}
		row("privacy target", fmt.Sprintf("%s, %d release(s): %s, certified epsilon %s at delta %g (%s)",
			target, t.Releases, constant, ff(g.Epsilon), g.Delta, model.CertificateFile))
	}
	if t := r.Training; t != nil {
		row("training", fmt.Sprintf("%d epochs, %d steps, best epoch %d, %.0f s", t.Epochs, t.Steps, t.BestEpoch, t.Seconds))
	}
	names := make([]string, 0, len(r.Utility))
	for k := range r.Utility {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		row("utility "+r.UtilitySplit+" "+k, fmt.Sprintf("%.4f", r.Utility[k]))
	}
	if p := r.Privacy; p != nil {
		row("audit", fmt.Sprintf("%s, %s split, %d examples x %d components, order %g", p.Mode, p.Split, p.Examples, p.Components, p.Order))
		pairs := p.Split + " pairs"
		if p.Mode == privacy.ModeReference {
			pairs = "z-filtered within-batch " + pairs
		}
		row("RD max over "+pairs+" ("+privacy.LabelEmpirical+", not a guarantee)", ff(p.RDMax))
		row("RD mean ("+privacy.LabelEmpirical+")", ffp(p.RDMean))
		row(fmt.Sprintf("BDP ε_μ (%s), delta %g", privacy.LabelEstimate, p.Delta), ffp(p.BDPEpsilon))
		row("invalid pairs", fmt.Sprintf("%d of %d", p.InvalidPairs, p.Pairs))
		if p.Certified == nil {
			row("certified guarantee", "none in "+train.ReportFile)
		}
		certifiedRows(row, p.Certified)
	} else {
		row("privacy", "null ("+r.Note+")")
	}
	if c := r.Collapse; c != nil {
		v := fmt.Sprintf("no (%s %.4f, chance %.4f)", c.Metric, c.Value, c.Chance)
		if c.AtChance {
			v = c.Reason
		}
		row("collapse check", v)
	}
	if b := r.Baseline; b != nil {
		v := fmt.Sprintf("%.4f", b.Mean)
		if len(b.Values) > 1 {
			v = fmt.Sprintf("%.4f ± %.4f over %d seeds", b.Mean, b.SD, len(b.Values))
		}
		if u, ok := r.Utility[b.Metric]; ok {
			v += fmt.Sprintf("; this run %+.1f points", 100*(u-b.Mean))
		}
		row(fmt.Sprintf("non-private baseline %s %s (%s: %s)", r.UtilitySplit, b.Metric, b.Source, b.Path), v)
	}
	row("seconds", fmt.Sprintf("%.1f", r.Seconds))
	row("report", r.Dir+"/"+train.ReportFile)
	tw.Flush()
}
