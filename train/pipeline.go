package train

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/nvdp-project/nvdp/audit"
	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/glue"
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

// PipelineOptions configure RunPipeline (`nvdp run`); DefaultPipelineOptions
// gives the defaults.
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

// DefaultPipelineOptions returns the defaults of RunPipeline: the training
// defaults (model.DefaultOptions), the dev split audited whole, evaluation seed
// DefaultEvalSeed, and audit.Audit's defaults.
func DefaultPipelineOptions() PipelineOptions {
	return PipelineOptions{Train: model.DefaultOptions(), AuditSplit: "dev", EvalSeed: DefaultEvalSeed, Audit: audit.DefaultOptions()}
}

// PrivacySummary is the "privacy" object of the report. Its audit numbers
// (rd_max, rd_mean, bdp_epsilon) are empirical: the maximum and mean of Eq.
// rdp over the ordered pairs of the audited split's texts and the BDP
// accountant's estimate over them; Empirical says so in the JSON. They are
// audit.Report's: +Inf is "Infinity", a number not computed is absent,
// and reports written before jsonfloat (null) read as audit.Numbers
// says. Certified is the guarantee: the supremum of Eq. rdp over every pair
// of posteriors the model's clipping allows.
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
// included (audit.Numbers).
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

// ModelSource is the source of a certificate of the model in dir (its
// configuration file): privacy.CertifiedReport.Source.
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
}

// pipelinePlan is what RunPipeline checks and reads before any work.
type pipelinePlan struct {
	train    model.Options // resolved and validated; with SkipTrain or Resume the saved ones
	glueDir  string
	dev      *glue.Dataset // the utility split, dev (DevLimit rows)
	audit    *glue.Dataset // the audited split when it is not dev whole (AuditLimit rows), else nil
	baseline *BaselineComparison
}

// prepare checks every option of po and reads what the pipeline needs
// before it trains or writes anything: the training options (resolved,
// validated, their files checked; with SkipTrain or Resume the options
// saved in Train.Out), the non-private baseline, the utility and audit
// splits (each with examples) and the audit options for that many
// posteriors. It normalises AuditSplit ("" = dev). Errors about the
// training options given are *option.Error.
func (po *PipelineOptions) prepare() (*pipelinePlan, error) {
	pl := &pipelinePlan{train: po.Train}
	if po.AuditSplit == "" {
		po.AuditSplit = "dev"
	}
	if po.AuditSplit != "dev" && po.AuditSplit != "test" {
		return nil, option.Errorf("audit_split", po.AuditSplit, "want dev or test")
	}
	if po.AuditLimit < 0 {
		return nil, option.Errorf("audit_limit", po.AuditLimit, "must be >= 0 (0: all)")
	}
	o := &pl.train
	switch {
	case po.SkipTrain || o.Resume:
		if o.Out == "" {
			return nil, option.Errorf("out", nil, "required: the model directory")
		}
		saved, err := model.LoadOptions(o.Out)
		if err != nil {
			return nil, err
		}
		if po.SkipTrain && o.Task != "" {
			want, err := glue.LookupTask(o.Task)
			if err != nil {
				return nil, option.Errorf("task", o.Task, "%v", err)
			}
			if have, err := glue.LookupTask(saved.Task); err != nil || have.Name != want.Name {
				return nil, fmt.Errorf("model %s was trained on task %q, not %q: evaluate it on its own task", o.Out, saved.Task, o.Task)
			}
		}
		pl.glueDir = o.GlueDir
		if pl.glueDir == "" {
			pl.glueDir = saved.GlueDir
		}
		resume, out := o.Resume, o.Out
		*o = *saved
		o.Resume, o.Out = resume, out // the directory may have moved since
		if st, err := os.Stat(pl.glueDir); err != nil || !st.IsDir() {
			return nil, option.Errorf("glue_dir", pl.glueDir, "not a directory")
		}
	default:
		o.Resolve()
		if err := o.Validate(); err != nil {
			return nil, err
		}
		if err := o.CheckFiles(); err != nil {
			return nil, err
		}
		pl.glueDir = o.GlueDir
	}
	task, err := glue.LookupTask(o.Task)
	if err != nil {
		return nil, err
	}
	if po.Baseline != "" {
		if pl.baseline, err = LoadBaseline(po.Baseline, task.Name); err != nil {
			return nil, err
		}
	}
	lo := glue.LoadOptions{SkipBadRows: o.SkipBadRows, Limit: o.DevLimit}
	if pl.dev, err = model.LoadSplit(pl.glueDir, task, "dev", lo); err != nil {
		return nil, err
	}
	audited := pl.dev
	if po.AuditSplit != "dev" || po.AuditLimit > 0 {
		lo.Limit = po.AuditLimit
		if pl.audit, err = model.LoadSplit(pl.glueDir, task, po.AuditSplit, lo); err != nil {
			return nil, err
		}
		audited = pl.audit
	}
	if o.Variant != nvib.ModelBaseline {
		if err := po.Audit.ValidateFor(len(audited.Examples)); err != nil {
			return nil, fmt.Errorf("audit of %d %s posteriors: %w", len(audited.Examples), po.AuditSplit, err)
		}
	}
	return pl, nil
}

// RunPipeline checks every option and reads the data before any work
// (prepare), trains (unless SkipTrain), loads the best model once,
// evaluates it on dev (utility, predictions, posteriors), exports the audit
// split's posteriors and audits them in memory (AuditRelease: on
// Train.Device when it is set and the device runs the audit, else with
// audit.Audit; the empirical numbers; the posterior file written is the
// same float32s),
// certifies the model's clip set at the audit's order (Privacy.Certified:
// the guarantee), and writes DIR/report.json. For the baseline variant there
// is no posterior: Privacy is nil with a note. A gaussian model's release is
// exported, audited and certified the same way (nvib.GaussianRelease,
// nvib.Config.ClipSet). An audited test split is evaluated whole (eval_test.json,
// the submission file, its posteriors); an audited part of dev
// (AuditLimit) gets its posterior file only, the utility being the whole
// dev split's. report receives the training's progress events (Run); the
// audit reports through po.Audit.Progress.
func RunPipeline(ctx context.Context, po PipelineOptions, report progress.Func) (*Report, error) {
	start := time.Now()
	pl, err := po.prepare()
	if err != nil {
		return nil, err
	}
	var tr *Result
	if !po.SkipTrain {
		if tr, err = Run(ctx, po.Train, report); err != nil { // as given: Run resolves it, or resumes with StopAfterSteps
			return nil, err
		}
		if tr.Interrupted {
			return nil, fmt.Errorf("training stopped after %d steps (StopAfterSteps): resume the run in %s to finish it", tr.Steps, pl.train.Out)
		}
	}
	dir := pl.train.Out
	b, err := model.Load(dir)
	if err != nil {
		return nil, err
	}
	saved := b.Options
	eo := DefaultEvalOptions(b)
	eo.GlueDir, eo.Seed, eo.Data, eo.NoPost, eo.Device = pl.glueDir, po.EvalSeed, pl.dev, pl.audit != nil, po.Train.Device
	dev, err := Evaluate(b, eo)
	if err != nil {
		return nil, err
	}
	rep := &Report{Task: dev.Task, Variant: saved.Variant, Mode: saved.Mode, Encoder: saved.Encoder, Lambda: saved.Lambda,
		Seed: saved.Seed, Backend: backendName(po.Train.Device), Utility: dev.Metrics, UtilitySplit: "dev", Training: tr, Dir: dir,
		Baseline: pl.baseline}
	mcfg := b.Model.Cfg
	switch saved.Variant {
	case nvib.ModelNVDPClipped:
		rep.CMu, rep.CAlphaMin, rep.CAlphaMax, rep.LogvarMargin = mcfg.Clip.CMu, mcfg.Clip.CAlphaMin, mcfg.Clip.CAlphaMax, mcfg.Clip.LogvarMargin
	case nvib.ModelGaussian:
		rep.Lambda, rep.CMu, rep.Sigma = 0, mcfg.Clip.CMu, math.Sqrt(mcfg.Prior.Var) // no KL terms
	case nvib.ModelBaseline:
		rep.Lambda = 0
		rep.Note = "baseline: no NVIB posterior, nothing to audit"
	}
	if b.Model.Releases() {
		if rep.Privacy, err = auditRelease(ctx, po, pl, b, eo, dev); err != nil {
			return nil, err
		}
	}
	if dev.Labelled {
		rdMax := math.NaN() // no posterior, or a reference audit (per-component averages): not judged
		if rep.Privacy != nil && rep.Privacy.Mode == privacy.ModePrincipled {
			rdMax = float64(rep.Privacy.RDMax)
		}
		cc := CheckCollapse(dev.SelectionName, dev.Metrics[dev.SelectionName], dev.Chance, rdMax)
		rep.Collapse = &cc
		if cc.AtChance {
			slog.Warn("run at chance", "reason", cc.Reason)
		}
	}
	rep.Seconds = time.Since(start).Seconds()
	if err := atomicfile.WriteJSON(filepath.Join(dir, ReportFile), rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// auditRelease exports the posteriors of the audited split (dev's come with
// its evaluation dev unless pl.audit is set), audits them in memory and
// certifies the model's clip set at the audit's order, direction and delta.
func auditRelease(ctx context.Context, po PipelineOptions, pl *pipelinePlan, b *model.Bundle, eo EvalOptions, dev *EvalResult) (*PrivacySummary, error) {
	release, path := dev.Release, dev.Posteriors
	if pl.audit != nil {
		eo.Split, eo.Data, eo.NoPost = po.AuditSplit, pl.audit, false
		var err error
		if po.AuditSplit == "dev" {
			release, path, err = ExportPosteriors(b, eo)
		} else {
			var r *EvalResult
			r, err = Evaluate(b, eo)
			if r != nil {
				release, path = r.Release, r.Posteriors
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return AuditRelease(ctx, release, path, po.AuditSplit, "texts", b.Model.Cfg, b.Dir, po.Audit, po.Train.Device)
}

// AuditRelease audits the posteriors release of a split (read from, or
// written to, path) in memory under options ao (the empirical numbers;
// examples names what the posteriors are of: "texts", "utterances") and
// certifies the clip set of a model with configuration cfg in modelDir
// (nvib.Config.ClipSet for release.N components) at the audit's order,
// direction and delta (the guarantee): the report's privacy summary. The
// pairs are evaluated on d when it is set and the device runs the audit
// (dnn.AuditAllPairs: the CPU's report up to rounding, docs/engine.md "The
// audit on the device"), else by audit.Audit on the CPU, with the reason
// logged and kept in the summary (PrivacySummary.AuditFallback) when d
// was set; PrivacySummary.AuditEngine says which. Errors: the audit's
// (named with path; the device's are not retried on the CPU), the
// certificate's.
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
