package report

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"

	"strconv"
	"strings"

	"github.com/nvdp-project/nvdp/audit"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/sweep"
	"github.com/nvdp-project/nvdp/train"
)

// cellAudit is the privacy of one cell in one audit mode. Values are nats (RD)
// and the BDP eps_mu: +Inf when undefined (invalid pairs), NaN when not
// computed (audit.Report; older files' null as audit.Numbers reads
// it).
type cellAudit struct {
	Mode         string           `json:"mode"`
	Order        float64          `json:"order"`
	Delta        float64          `json:"delta"`
	RDMax        float64          `json:"rd_max"`
	RDMean       float64          `json:"rd_mean"`
	BDPEpsilon   float64          `json:"bdp_epsilon"`
	InvalidPairs int64            `json:"invalid_pairs"`
	Pairs        int64            `json:"pairs"`
	Split        string           `json:"split,omitempty"`     // the audited texts ("" when the file does not say)
	Histogram    *audit.Histogram `json:"histogram,omitempty"` // per-pair bounds (principled audits)
}

// cellCertified is a cell's certified guarantee (report.json privacy.certified,
// train.CertifiedPrivacy): the supremum of Eq. rdp over every pair of
// inputs the model's clipping allows, at the audit's order, and its
// one-release (epsilon, delta) and BDP conversions. Unlike cellAudit it is no
// maximum over audited texts. An infinite value is +Inf.
type cellCertified struct {
	Order      float64 `json:"order"`
	Delta      float64 `json:"delta"`
	RD         float64 `json:"rd_certified"`
	Epsilon    float64 `json:"epsilon"`
	BDPEpsilon float64 `json:"bdp_epsilon_certified"`
	Finite     bool    `json:"finite"`
	Reason     string  `json:"reason,omitempty"`
}

// runCell is one finished run of a sweep, read from its report.json (and
// audit_<mode>.json files).
type runCell struct {
	Dir     string  // the cell directory
	Task    string  // sst2, mrpc, ...
	Variant string  // baseline, nvdp, nvdp-clipped, gaussian
	Mode    string  // training mode: principled | reference
	Encoder string  //
	Lambda  float64 // 0 for the baseline (and a gaussian report without one)
	CMu     float64 // nvdp-clipped: C_mu; gaussian: the radius C of the embedding ball
	Seed    uint64
	// TargetEpsilon is the certified epsilon the cell was calibrated to (0:
	// none): train_options.json target_epsilon, else the epsilon=<E>
	// directory of a `nvdp sweep --target-epsilons` cell.
	TargetEpsilon float64
	// Seconds is the cell's wall time (report.json seconds: training,
	// evaluation and audit); NaN when the report does not say.
	Seconds float64
	// Chance is the selection metric of the majority-class predictor (0 for
	// correlations) on the utility split, from report.json collapse (metric
	// ChanceMetric); NaN without a collapse block.
	Chance       float64
	ChanceMetric string
	// Grid marks a C_mu grid cell (under <task>/cmu-grid/), kept out of the main tables.
	Grid bool
	// Utility are the metrics on UtilitySplit (NaN: undefined, e.g. a
	// correlation of constant predictions).
	Utility map[string]float64
	// UtilitySplit is the split of Utility: report.json utility_split, dev
	// for reports that do not say (the GLUE runs; lid reports test).
	UtilitySplit string
	// Audits by audit mode (empirical).
	Audits map[string]*cellAudit
	// Certified is the certified guarantee; nil for the baseline and for
	// reports written before certification.
	Certified *cellCertified
}

// newAudit is the cellAudit of an audit's numbers: audit.Report n, or the
// summary of report.json (which copies them).
func newAudit(mode privacy.Mode, order, delta float64, n audit.Numbers, invalid, pairs int64, split string, h *audit.Histogram) *cellAudit {
	return &cellAudit{Mode: string(mode), Order: order, Delta: delta, RDMax: float64(n.RDMax), RDMean: orNaN(n.RDMean),
		BDPEpsilon: orNaN(n.BDPEpsilon), InvalidPairs: invalid, Pairs: pairs, Split: split, Histogram: h}
}

// summaryAudit is the cellAudit of report.json's privacy summary (its histogram
// from the full report).
func summaryAudit(p *train.PrivacySummary) *cellAudit {
	var h *audit.Histogram
	if p.Full != nil {
		h = p.Full.Histogram
	}
	return newAudit(p.Mode, p.Order, p.Delta, audit.Numbers{RDMax: p.RDMax, RDMean: p.RDMean, BDPEpsilon: p.BDPEpsilon},
		p.InvalidPairs, p.Pairs, p.Split, h)
}

// reportAudit is the cellAudit of a full audit report (audit_<mode>.json).
func reportAudit(r *audit.Report) *cellAudit {
	return newAudit(r.Mode, r.Order, r.Delta, audit.Numbers{RDMax: r.RDMax, RDMean: r.RDMean, BDPEpsilon: r.BDPEpsilon},
		r.InvalidPairs, r.Pairs, "", r.Histogram)
}

// newCertified is the cellCertified of a certified report.
func newCertified(c *privacy.CertifiedReport) *cellCertified {
	return &cellCertified{Order: c.Order, Delta: c.Delta, RD: float64(c.RD), Epsilon: float64(c.Epsilon), BDPEpsilon: float64(c.BDPEpsilon),
		Finite: c.Finite, Reason: c.Reason}
}

// orNaN is *f, NaN for nil (not computed).
func orNaN(f *jsonfloat.Float) float64 {
	if v, ok := jsonfloat.Value(f); ok {
		return v
	}
	return math.NaN()
}

// readCell reads dir/report.json (train.Report) and any
// dir/audit_<mode>.json (audit.Report). Files written before jsonfloat
// (null for every non-finite number) read as train's and privacy's
// decoders say: docs/results.md, "Reading older sweeps".
func readCell(dir string) (*runCell, error) {
	path := filepath.Join(dir, train.ReportFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r train.Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.Task == "" || r.Variant == "" {
		return nil, fmt.Errorf("%s: not an nvdp run report (no task or variant)", path)
	}
	c := &runCell{Dir: dir, Task: r.Task, Variant: r.Variant, Mode: string(r.Mode), Encoder: r.Encoder, Lambda: r.Lambda, CMu: r.CMu,
		Seed: r.Seed, Utility: map[string]float64{}, UtilitySplit: cmp.Or(r.UtilitySplit, "dev"), Audits: map[string]*cellAudit{},
		Seconds: math.NaN(), Chance: math.NaN()}
	if r.Seconds > 0 {
		c.Seconds = r.Seconds
	}
	if r.Collapse != nil {
		c.Chance, c.ChanceMetric = float64(r.Collapse.Chance), r.Collapse.Metric
	}
	if c.TargetEpsilon, err = targetEpsilon(dir); err != nil {
		return nil, err
	}
	maps.Copy(c.Utility, r.Utility)
	if p := r.Privacy; p != nil {
		c.Audits[string(p.Mode)] = summaryAudit(p)
		if p.Certified != nil {
			c.Certified = newCertified(p.Certified)
		}
	}
	extra, err := filepath.Glob(filepath.Join(dir, "audit_*.json"))
	if err != nil {
		return nil, err
	}
	for _, p := range extra {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var a audit.Report
		if err := json.Unmarshal(b, &a); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if a.Mode == "" {
			return nil, fmt.Errorf("%s: audit report without a mode", p)
		}
		if _, ok := c.Audits[string(a.Mode)]; !ok {
			c.Audits[string(a.Mode)] = reportAudit(&a)
		}
	}
	return c, nil
}

// targetEpsilon is the certified epsilon the cell in dir was calibrated to:
// train_options.json target_epsilon (every trained model directory has
// it), else the value of the nearest epsilon=<E> directory of dir (the
// layout of `nvdp sweep --target-epsilons`: <task>/<variant>/epsilon=<E>/...),
// else 0 (no target).
func targetEpsilon(dir string) (float64, error) {
	o, err := model.LoadOptions(dir)
	switch {
	case err == nil && !model.IsNoTarget(o.TargetEpsilon): // validated: > 0
		return o.TargetEpsilon, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return 0, err
	}
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if v, ok := strings.CutPrefix(filepath.Base(d), "epsilon="); ok {
			e, err := strconv.ParseFloat(v, 64)
			if err != nil || !(e > 0) {
				return 0, fmt.Errorf("%s: directory %s is not a target epsilon", dir, filepath.Base(d))
			}
			return e, nil
		}
		if filepath.Dir(d) == d {
			return 0, nil
		}
	}
}

// load reads every cell under root (each directory holding report.json, and
// links to such directories: cells that reuse a C_mu grid run),
// sorted by task, variant, target epsilon, C_mu, lambda and seed. Errors: a report that does
// not parse (named), no report at all.
func load(root string) ([]*runCell, error) {
	var cells []*runCell
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			// A sweep cell that reuses a C_mu grid run is a link to its directory.
			if _, err := os.Stat(filepath.Join(path, train.ReportFile)); err != nil {
				return nil
			}
			dir = path
		case d.IsDir() || d.Name() != train.ReportFile:
			return nil
		}
		c, err := readCell(dir)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, c.Dir)
		c.Grid = slices.Contains(strings.Split(filepath.ToSlash(rel), "/"), sweep.CMuGridDir)
		cells = append(cells, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("report %s: %w", root, err)
	}
	if len(cells) == 0 {
		return nil, fmt.Errorf("report %s: no %s found: %w", root, train.ReportFile, fs.ErrNotExist)
	}
	// Two runs of the same configuration and seed would count as two seeds.
	type key struct {
		task, variant, mode string
		target, cmu, lambda float64
		seed                uint64
		grid                bool
	}
	seen := map[key]string{}
	for _, c := range cells {
		k := key{c.Task, c.Variant, c.Mode, c.TargetEpsilon, c.CMu, c.Lambda, c.Seed, c.Grid}
		if d, ok := seen[k]; ok {
			return nil, fmt.Errorf("report %s: %s and %s are the same configuration (%s %s target epsilon %g lambda %g C_mu %g seed %d): report one sweep at a time",
				root, d, c.Dir, c.Task, c.Variant, c.TargetEpsilon, c.Lambda, c.CMu, c.Seed)
		}
		seen[k] = c.Dir
	}
	slices.SortStableFunc(cells, func(a, b *runCell) int {
		return cmp.Or(cmp.Compare(a.Task, b.Task), cmp.Compare(variantRank(a.Variant), variantRank(b.Variant)),
			cmp.Compare(a.Mode, b.Mode), cmp.Compare(a.TargetEpsilon, b.TargetEpsilon), cmp.Compare(a.CMu, b.CMu),
			cmp.Compare(a.Lambda, b.Lambda), cmp.Compare(a.Seed, b.Seed))
	})
	return cells, nil
}

func variantRank(v string) int {
	switch v {
	case "baseline":
		return 0
	case "nvdp":
		return 1
	case "nvdp-clipped":
		return 2
	case "gaussian":
		return 3
	}
	return 4
}

// readSelection reads root/<task>/c_mu_selection.json (nil when absent).
func readSelection(root, task string) (*sweep.CMuSelection, error) {
	p := filepath.Join(root, task, sweep.CMuSelectionFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s sweep.CMuSelection
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return &s, nil
}
