package train

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"time"

	"github.com/nvdp-project/nvdp/audit"
	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/progress"
)

// ReportFile is the name of the `nvdp run` report inside the output directory.
const ReportFile = "report.json"

// PipelineOptions configure [RunPipeline], which runs `nvdp run`;
// [DefaultPipelineOptions] gives the defaults.
type PipelineOptions struct {
	Train model.Options
	// SkipTrain evaluates and audits the model already in Train.Out (e.g. QNLI, whose training
	// split is missing here: a model trained elsewhere).
	SkipTrain bool
	// AuditSplit is the split whose posteriors are audited: dev or test ("": dev).
	AuditSplit string
	// AuditLimit audits only the first K examples of the split (>= 0; 0: all).
	AuditLimit int
	// EvalSeed seeds the sampling at evaluation.
	EvalSeed uint64
	// Audit are the audit options passed to audit.Audit (mode, order,
	// delta, ...; start from audit.DefaultOptions), validated before
	// training. Audit.Progress reports the audit's pairs.
	Audit audit.Options
	// Baseline, when set, is the non-private baseline to compare with: a
	// StoredBaseline file or a baseline run's report.json (LoadBaseline),
	// read before any work starts and copied into Report.Baseline.
	Baseline string
}

// DefaultPipelineOptions returns the defaults of [RunPipeline]: the training
// defaults of [model.DefaultOptions], the dev split audited whole, the
// evaluation seed [DefaultEvalSeed], and [audit.Audit]'s defaults.
func DefaultPipelineOptions() PipelineOptions {
	return PipelineOptions{Train: model.DefaultOptions(), AuditSplit: "dev", EvalSeed: DefaultEvalSeed, Audit: audit.DefaultOptions()}
}

// ResolveAudit gives the audit the training's mode when it names none
// (Audit.Mode ""), and validates the audit options before any work
// ([audit.Options.Validate]). Its [*option.Error] names the audit's option
// in the pipeline, where the training has a mode, a batch size and a seed
// of its own: audit_mode, audit_batch_size and audit_seed (as audit_split
// and audit_limit), the others by the audit's names.
func (po *PipelineOptions) ResolveAudit() error {
	if po.Audit.Mode == "" {
		po.Audit.Mode = po.Train.Mode
	}
	err := po.Audit.Validate()
	if oe, ok := err.(*option.Error); ok && pipelineAuditNames[oe.Option] != "" {
		c := *oe
		c.Option = pipelineAuditNames[oe.Option]
		return &c
	}
	return err
}

// pipelineAuditNames are the audit options whose names in a pipeline say
// they are the audit's.
var pipelineAuditNames = map[string]string{"mode": "audit_mode", "batch_size": "audit_batch_size", "seed": "audit_seed"}

// ResolveTargets gives the training's privacy target the settings a
// pipeline decides: with a target, the clipping constants given explicitly
// (given; nil: none) stay as given in the calibration
// ([model.Options.FixGiven]), and the target's order and delta are the
// audit's (Audit.Order and Audit.Delta, [model.Options.TargetAt]): one
// order and one delta for the audit and the target. Call it after
// [PipelineOptions.ResolveAudit].
func (po *PipelineOptions) ResolveTargets(given option.Given) {
	if po.Train.HasTarget() {
		po.Train.FixGiven(given)
	}
	po.Train.TargetAt(po.Audit.Order, po.Audit.Delta)
}

// CheckSkipTrain checks, before any work, that a pipeline with SkipTrain
// asks for no privacy target: a target calibrates a training run, and a
// model evaluated as it is keeps its clipping constants (certify reads
// them). The error is a [*option.CombinationError] naming target and
// skip_train.
func (po *PipelineOptions) CheckSkipTrain() error {
	if !po.SkipTrain || !po.Train.HasTarget() {
		return nil
	}
	return option.Combination("%s calibrate a training run; with %s the model keeps its constants", "target", "skip_train")
}

// PrivacySummary is the "privacy" object of the report.
//
// Its audit numbers, rd_max, rd_mean and bdp_epsilon, are empirical: the
// maximum and mean of Eq. rdp over the ordered pairs of the audited split's
// texts, and the BDP accountant's estimate over them; Empirical says so in
// the JSON. They are [audit.Report]'s: +Inf is "Infinity", a number not
// computed is absent, and reports written before jsonfloat, with null, read
// as [audit.Numbers] says.
//
// Certified is the guarantee: the supremum of Eq. rdp over every pair of
// posteriors the model's clipping allows.
type PrivacySummary struct {
	// Empirical labels the audit numbers below (label "empirical").
	Empirical    audit.EmpiricalLabel `json:"empirical"`
	Mode         privacy.Mode         `json:"mode"`
	Order        float64              `json:"order"`
	Delta        float64              `json:"delta"`
	RDMax        jsonfloat.Float      `json:"rd_max"`
	RDMean       *jsonfloat.Float     `json:"rd_mean,omitempty"`
	BDPEpsilon   *jsonfloat.Float     `json:"bdp_epsilon,omitempty"`
	InvalidPairs int64                `json:"invalid_pairs"`
	Pairs        int64                `json:"pairs"`
	Examples     int                  `json:"examples"`
	Components   int                  `json:"components"`
	Split        string               `json:"split"`
	Posteriors   string               `json:"posteriors"`
	Seconds      float64              `json:"seconds"`
	// AuditEngine is what evaluated the pairs: AuditEngineCPU ("cpu",
	// audit.Audit) or the run's GPU (cuda.Device.Backend, "cuda (NAME,
	// PRECISION)": dnn.AuditAllPairs, FP64 whatever the precision). Absent
	// from reports written before issue 38, whose audits ran on the CPU.
	AuditEngine string `json:"audit_engine,omitempty"`
	// AuditFallback is why a run with a device audited on the CPU
	// (dnn.AuditUnsupported: the reference mode, a pair sample, ...).
	AuditFallback string `json:"audit_fallback,omitempty"`
	// Full is the complete audit report (as `nvdp audit --json`).
	Full *audit.Report `json:"full,omitempty"`
	// Certified is the certified guarantee of one release under the model's
	// clipping at the audit's order, direction and delta (nil for a model
	// without an NVIB layer; +Inf, with a reason, for a model whose clipping
	// bounds nothing).
	Certified *privacy.CertifiedReport `json:"certified,omitempty"`
}

// UnmarshalJSON reads a summary written by encoding/json, older ones
// included, as [audit.Numbers] describes.
func (s *PrivacySummary) UnmarshalJSON(b []byte) error {
	type plain PrivacySummary // without this method
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	var n audit.Numbers
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	p.RDMax, p.RDMean, p.BDPEpsilon = n.RDMax, n.RDMean, n.BDPEpsilon
	*s = PrivacySummary(p)
	return nil
}

// ModelSource returns the source of a certificate of the model in dir, its
// configuration file, as in [privacy.CertifiedReport].Source.
func ModelSource(dir string) string {
	return fmt.Sprintf("clip constants of the model (%s)", filepath.Join(dir, nvib.ConfigFile))
}

// Report is DIR/report.json of `nvdp run`.
type Report struct {
	Task         string          `json:"task"`
	Variant      string          `json:"variant"`
	Mode         privacy.Mode    `json:"mode"`
	Encoder      string          `json:"encoder"`
	Lambda       float64         `json:"lambda"`
	CMu          float64         `json:"c_mu,omitempty"`
	CAlphaMin    float64         `json:"c_alpha_min,omitempty"`
	CAlphaMax    float64         `json:"c_alpha_max,omitempty"`
	LogvarMargin float64         `json:"logvar_margin,omitempty"` // nats above ln((lambda-1)/lambda prior_var)
	Sigma        float64         `json:"sigma,omitempty"`         // gaussian: the noise standard deviation (prior sigma); its token radius C is c_mu
	Seed         uint64          `json:"seed"`
	Backend      string          `json:"backend"`
	Utility      Metrics         `json:"utility"`
	UtilitySplit string          `json:"utility_split"`
	Privacy      *PrivacySummary `json:"privacy"`
	Note         string          `json:"note,omitempty"`
	// Collapse says whether the utility is at chance and the posterior on
	// the prior (CheckCollapse); nil when the utility split is unlabelled.
	Collapse *CollapseCheck `json:"collapse,omitempty"`
	// Baseline is the non-private baseline's selection metric for the same
	// task and budget (PipelineOptions.Baseline); nil when none was given.
	Baseline *BaselineComparison `json:"baseline,omitempty"`
	Training *Result             `json:"training,omitempty"`
	Dir      string              `json:"dir"`
	Seconds  float64             `json:"seconds"`
	// Calibration is the model's calibration record (certificate.json;
	// nil: none, a run without a privacy target), for a summary of the
	// run (RunPipeline: the training's, else the model directory's). Not
	// in report.json.
	Calibration *model.Calibration `json:"-"`
}

// PipelineTask is one task's part of [RunPipeline], the one pipeline of
// `nvdp run`: the plan, checked and read before any work, the training, and
// the trained model. A value serves one run: Plan first, then Train, unless
// PipelineOptions.SkipTrain, and Load. [TextPipeline] is the GLUE tasks';
// package speech has the speech task's, speech.Pipeline.
type PipelineTask interface {
	// Plan checks every option of po and reads what the pipeline needs
	// before it trains or writes anything; it normalises po.AuditSplit ("":
	// dev). Errors about the options given are *option.Error.
	Plan(po *PipelineOptions) (*Plan, error)
	// Train trains the model of p into p.Dir.
	Train(ctx context.Context, p *Plan, report progress.Func) (*Result, error)
	// Load loads the trained model in p.Dir.
	Load(p *Plan) (PipelineModel, error)
}

// Plan is what [RunPipeline] runs, checked before any work by
// PipelineTask.Plan.
type Plan struct {
	// Train are the training options: resolved and validated, or, with
	// SkipTrain or Resume, the ones saved in the model directory.
	Train model.Options
	// Dir is the model directory, where report.json is written.
	Dir string
	// Baseline is the non-private baseline read before any work
	// (PipelineOptions.Baseline); nil: none.
	Baseline *BaselineComparison
	// Examples is the noun of the audited examples ("texts",
	// "utterances"), in the audit's label.
	Examples string
	// Device runs the audit (AuditRelease; nil: the CPU).
	Device *cuda.Device
}

// PipelineModel is a trained model loaded for [RunPipeline] by
// PipelineTask.Load.
type PipelineModel interface {
	// Evaluate evaluates the model on the task's utility split (utility,
	// predictions, eval_<split>.json), with its posteriors when they are
	// the ones audited.
	Evaluate(ctx context.Context) (*EvalResult, error)
	// Audited is the posteriors of the audit split and their file: util's
	// when it kept them, else those of a second evaluation.
	Audited(ctx context.Context, util *EvalResult) (*privacy.Posteriors, string, error)
	// Report is the report of the model evaluated on its utility split,
	// before the audit: task, variant, constants, seed, backend, utility.
	Report(util *EvalResult) *Report
	// Config is the model's configuration; Releases whether it has a
	// release to audit (every variant but the baseline).
	Config() nvib.Config
	Releases() bool
}

// RunPipeline runs `nvdp run` for the task of t and writes DIR/report.json.
// In order, it:
//
//   - checks every option and reads the data before any work, with
//     PipelineTask.Plan;
//   - trains, unless po.SkipTrain; a training stopped by StopAfterSteps is an
//     error saying to resume it;
//   - loads the best model once;
//   - evaluates it on the task's utility split with PipelineModel.Evaluate,
//     which gives the utility, the predictions and the posteriors;
//   - audits the audit split's posteriors in memory and certifies the model's
//     clip set at the audit's order with [AuditRelease], which gives the
//     empirical numbers and the guarantee; the posterior file written holds
//     the same float32s;
//   - checks the collapse of a labelled utility split with [CheckCollapse].
//
// For the baseline variant there is no posterior: Privacy is nil, with a
// note. report receives the training's progress events; the audit reports
// through po.Audit.Progress.
func RunPipeline(ctx context.Context, t PipelineTask, po PipelineOptions, report progress.Func) (*Report, error) {
	start := time.Now()
	pl, err := t.Plan(&po)
	if err != nil {
		return nil, err
	}
	var tr *Result
	if !po.SkipTrain {
		if tr, err = t.Train(ctx, pl, report); err != nil {
			return nil, err
		}
		if tr.Interrupted {
			return nil, fmt.Errorf("training stopped after %d steps (StopAfterSteps): resume the run in %s to finish it", tr.Steps, pl.Dir)
		}
	}
	m, err := t.Load(pl)
	if err != nil {
		return nil, err
	}
	util, err := m.Evaluate(ctx)
	if err != nil {
		return nil, err
	}
	rep := m.Report(util)
	rep.Training, rep.Dir, rep.Baseline = tr, pl.Dir, pl.Baseline
	if tr != nil && tr.Calibration != nil {
		rep.Calibration = tr.Calibration
	} else if c, err := model.LoadCalibration(pl.Dir); err == nil { // calibrated before: a skipped or resumed training
		rep.Calibration = c
	}
	if m.Releases() {
		release, path, err := m.Audited(ctx, util)
		if err != nil {
			return nil, err
		}
		if rep.Privacy, err = AuditRelease(ctx, release, path, po.AuditSplit, pl.Examples, m.Config(), pl.Dir, po.Audit, pl.Device); err != nil {
			return nil, err
		}
	}
	if util.Labelled {
		rdMax := math.NaN() // no posterior, or a reference audit (per-component averages): not judged
		if rep.Privacy != nil && rep.Privacy.Mode == privacy.ModePrincipled {
			rdMax = float64(rep.Privacy.RDMax)
		}
		cc := CheckCollapse(util.SelectionName, util.Metrics[util.SelectionName], util.Chance, rdMax)
		rep.Collapse = &cc
		if cc.AtChance {
			slog.Warn("run at chance", "reason", cc.Reason)
		}
	}
	rep.Seconds = time.Since(start).Seconds()
	if err := atomicfile.WriteJSON(filepath.Join(pl.Dir, ReportFile), rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// AuditRelease audits the posteriors release of a split in memory and
// certifies the clip set of the model it came from. Together these are the
// report's privacy summary.
//
// The release is read from, or written to, path. ao are the audit's options,
// which give the empirical numbers; examples names what the posteriors are
// of, such as "texts" or "utterances". The model has configuration cfg in
// modelDir; its clip set, [nvib.Config.ClipSet] for release.N components, is
// certified at the audit's order, direction and delta, which gives the
// guarantee.
//
// The pairs are evaluated on d when d is set and the device runs the audit,
// with [dnn.AuditAllPairs], which gives the CPU's report up to rounding; see
// docs/engine.md, "The audit on the device". Otherwise [audit.Audit] runs on
// the CPU, and when d was set the reason is logged and kept in
// PrivacySummary.AuditFallback. PrivacySummary.AuditEngine says which engine
// ran.
//
// Its errors are the audit's, named with path, and the certificate's. A
// device's error is not retried on the CPU.
func AuditRelease(ctx context.Context, release *privacy.Posteriors, path, split, examples string, cfg nvib.Config, modelDir string, ao audit.Options, d *cuda.Device) (*PrivacySummary, error) {
	ar, engine, fallback, err := auditOn(ctx, d, release, ao)
	if err != nil {
		return nil, fmt.Errorf("audit %s: %w", path, err)
	}
	var cert *privacy.CertifiedReport
	if set, ok := cfg.ClipSet(release.N); ok {
		if cert, err = privacy.NewCertifiedReport(set, privacy.ReportOptions{Order: ar.Order, Direction: ar.GaussianDirection, Releases: 1, Delta: ar.Delta, Source: ModelSource(modelDir)}); err != nil {
			return nil, err
		}
	}
	return &PrivacySummary{Empirical: audit.EmpiricalOf(ar, split, examples), Certified: cert, Mode: ar.Mode, Order: ar.Order, Delta: ar.Delta, RDMax: ar.RDMax, RDMean: ar.RDMean,
		BDPEpsilon: ar.BDPEpsilon, InvalidPairs: ar.InvalidPairs, Pairs: ar.Pairs, Examples: ar.Examples,
		Components: ar.Components, Split: split, Posteriors: path, Seconds: ar.Seconds, AuditEngine: engine, AuditFallback: fallback, Full: ar}, nil
}

// AuditEngineCPU is PrivacySummary.AuditEngine of an audit evaluated by
// audit.Audit on the CPU.
const AuditEngineCPU = "cpu"

// auditOn audits p under ao on d (dnn.AuditAllPairs) when d is set and the
// device runs the audit (dnn.AuditUnsupported), else on the CPU
// (audit.Audit): the report, the engine (d.Backend() or AuditEngineCPU)
// and, for a CPU audit of a run with a device, why.
func auditOn(ctx context.Context, d *cuda.Device, p *privacy.Posteriors, ao audit.Options) (*audit.Report, string, string, error) {
	var fallback string
	if d != nil {
		why := dnn.AuditUnsupported(p, ao)
		if why == nil {
			r, err := dnn.AuditOnDevice(ctx, d, p, ao)
			if err != nil {
				return nil, "", "", fmt.Errorf("on %s: %w", d.Backend(), err)
			}
			return r, d.Backend(), "", nil
		}
		fallback = why.Error()
		slog.Info("audit on the CPU", "device", d.Backend(), "reason", fallback)
	}
	r, err := audit.Audit(ctx, p, ao)
	return r, AuditEngineCPU, fallback, err
}
