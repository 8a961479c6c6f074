package train

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
)

// ReportFile is the name of the `nvdp run` report inside the output directory.
const ReportFile = "report.json"

// PipelineOptions configure RunPipeline (`nvdp run`).
type PipelineOptions struct {
	Train Options
	// SkipTrain evaluates and audits the model already in Train.Out (e.g. QNLI, whose training
	// split is missing here: a model trained elsewhere).
	SkipTrain bool
	// AuditSplit is the split whose posteriors are audited: dev (default) or test.
	AuditSplit string
	// AuditLimit audits only the first K examples of the split (0: all).
	AuditLimit int
	// EvalSeed seeds the sampling at evaluation.
	EvalSeed uint64
	// Audit are the audit options passed to privacy.Audit (mode, order, delta, ...).
	Audit privacy.Options
}

// PrivacySummary is the "privacy" object of the report.
type PrivacySummary struct {
	Mode         privacy.Mode      `json:"mode"`
	Order        float64           `json:"order"`
	Delta        float64           `json:"delta"`
	RDMax        privacy.JSONFloat `json:"rd_max"`
	RDMean       privacy.JSONFloat `json:"rd_mean"`
	BDPEpsilon   privacy.JSONFloat `json:"bdp_epsilon"`
	InvalidPairs int64             `json:"invalid_pairs"`
	Pairs        int64             `json:"pairs"`
	Examples     int               `json:"examples"`
	Components   int               `json:"components"`
	Split        string            `json:"split"`
	Posteriors   string            `json:"posteriors"`
	Seconds      float64           `json:"seconds"`
	// Full is the complete audit report (as `nvdp audit --json`).
	Full *privacy.Report `json:"full,omitempty"`
}

// Report is DIR/report.json of `nvdp run`.
type Report struct {
	Task         string          `json:"task"`
	Variant      string          `json:"variant"`
	Mode         string          `json:"mode"`
	Encoder      string          `json:"encoder"`
	Lambda       float64         `json:"lambda"`
	CMu          float64         `json:"c_mu,omitempty"`
	CAlphaMin    float64         `json:"c_alpha_min,omitempty"`
	CAlphaMax    float64         `json:"c_alpha_max,omitempty"`
	LogvarMargin float64         `json:"logvar_margin,omitempty"` // nats above ln((lambda-1)/lambda prior_var)
	Seed         uint64          `json:"seed"`
	Backend      string          `json:"backend"`
	Utility      Metrics         `json:"utility"`
	UtilitySplit string          `json:"utility_split"`
	Privacy      *PrivacySummary `json:"privacy"`
	Note         string          `json:"note,omitempty"`
	Training     *Result         `json:"training,omitempty"`
	Dir          string          `json:"dir"`
	Seconds      float64         `json:"seconds"`
}

// RunPipeline trains (unless SkipTrain), evaluates the best model on dev
// (utility, predictions, posteriors), exports the audit split's posteriors
// and audits them with privacy.Audit, and writes DIR/report.json. For the
// baseline variant there is no posterior: Privacy is nil with a note.
func RunPipeline(ctx context.Context, po PipelineOptions, progress io.Writer) (*Report, error) {
	start := time.Now()
	var tr *Result
	o := po.Train
	if !po.SkipTrain {
		var err error
		if tr, err = Run(ctx, o, progress); err != nil {
			return nil, err
		}
		if tr.Interrupted {
			return nil, fmt.Errorf("training stopped after %d steps (resume with --resume)", tr.Steps)
		}
	}
	dir := o.Out
	saved, err := LoadOptions(dir)
	if err != nil {
		return nil, err
	}
	if po.SkipTrain && o.Task != "" {
		want, err := glue.LookupTask(o.Task)
		if err != nil {
			return nil, fmt.Errorf("--task: %w", err)
		}
		if have, err := glue.LookupTask(saved.Task); err != nil || have.Name != want.Name {
			return nil, fmt.Errorf("model %s was trained on task %q, not %q: evaluate it on its own task", dir, saved.Task, o.Task)
		}
	}
	glueDir := o.GlueDir
	if glueDir == "" {
		glueDir = saved.GlueDir
	}
	if po.AuditSplit == "" {
		po.AuditSplit = "dev"
	}
	dev, err := Evaluate(EvalOptions{Model: dir, GlueDir: glueDir, Split: "dev", Seed: po.EvalSeed, SkipBadRows: saved.SkipBadRows,
		NoPost: po.AuditSplit != "dev" || po.AuditLimit > 0, Limit: saved.DevLimit})
	if err != nil {
		return nil, err
	}
	rep := &Report{Task: dev.Task, Variant: saved.Variant, Mode: saved.Mode, Encoder: saved.Encoder, Lambda: saved.Lambda,
		Seed: saved.Seed, Backend: nn.Backend(), Utility: dev.Metrics, UtilitySplit: "dev", Training: tr, Dir: dir}
	if saved.Variant == nvib.ModelNVDPClipped {
		cfg, err := nvib.LoadConfig(dir)
		if err != nil {
			return nil, err
		}
		rep.CMu, rep.CAlphaMin, rep.CAlphaMax, rep.LogvarMargin = cfg.Clip.CMu, cfg.Clip.CAlphaMin, cfg.Clip.CAlphaMax, cfg.Clip.LogvarMargin
	}
	if saved.Variant == nvib.ModelBaseline {
		rep.Lambda = 0
		rep.Note = "baseline: no NVIB posterior, nothing to audit"
	} else {
		post := dev.Posteriors
		if post == "" {
			ar, err := Evaluate(EvalOptions{Model: dir, GlueDir: glueDir, Split: po.AuditSplit, Seed: po.EvalSeed,
				SkipBadRows: saved.SkipBadRows, Limit: po.AuditLimit})
			if err != nil {
				return nil, err
			}
			post = ar.Posteriors
		}
		p, err := privacy.ReadPosteriors(post)
		if err != nil {
			return nil, err
		}
		ao := po.Audit
		ao.Progress = progress
		ar, err := privacy.Audit(ctx, p, ao)
		if err != nil {
			return nil, fmt.Errorf("audit %s: %w", post, err)
		}
		rep.Privacy = &PrivacySummary{Mode: ar.Mode, Order: ar.Order, Delta: ar.Delta, RDMax: ar.RDMax, RDMean: ar.RDMean,
			BDPEpsilon: ar.BDPEpsilon, InvalidPairs: ar.InvalidPairs, Pairs: ar.Pairs, Examples: ar.Examples,
			Components: ar.Components, Split: po.AuditSplit, Posteriors: post, Seconds: ar.Seconds, Full: ar}
	}
	rep.Seconds = time.Since(start).Seconds()
	if err := atomicfile.WriteJSON(filepath.Join(dir, ReportFile), rep); err != nil {
		return nil, err
	}
	return rep, nil
}
