package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/sweep"
)

// stat is the mean and sample standard deviation (n - 1; 0 for one value)
// of a quantity over seeds. NaN values are left out (N counts the others); a
// +Inf value makes the mean +Inf.
type stat struct {
	Mean float64
	Std  float64
	N    int
}

// newStat summarises v.
func newStat(v []float64) stat {
	var s stat
	var sum float64
	var xs []float64
	for _, x := range v {
		if math.IsNaN(x) {
			continue
		}
		xs = append(xs, x)
		sum += x
	}
	s.N = len(xs)
	if s.N == 0 {
		return stat{Mean: math.NaN(), Std: math.NaN()}
	}
	s.Mean = sum / float64(s.N)
	if math.IsInf(s.Mean, 0) {
		s.Std = math.NaN()
		return s
	}
	if s.N > 1 {
		var ss float64
		for _, x := range xs {
			ss += (x - s.Mean) * (x - s.Mean)
		}
		s.Std = math.Sqrt(ss / float64(s.N-1))
	}
	return s
}

// MarshalJSON writes {"mean", "std", "n"}, non-finite values as jsonfloat
// strings ("NaN" for the mean of no value, "Infinity").
func (s stat) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Mean jsonfloat.Float `json:"mean"`
		Std  jsonfloat.Float `json:"std"`
		N    int             `json:"n"`
	}{jsonfloat.Float(s.Mean), jsonfloat.Float(s.Std), s.N})
}

// auditStats are a row's privacy in one audit mode over its seeds: empirical
// numbers (Label "empirical"): RD max / mean over the audited pairs and the
// BDP estimate, not guarantees.
type auditStats struct {
	Label        string `json:"label"` // privacy.LabelEmpirical
	Mode         string `json:"mode"`
	BDP          stat   `json:"bdp_epsilon"`
	RDMax        stat   `json:"rd_max"`
	RDMean       stat   `json:"rd_mean"`
	InvalidPairs int64  `json:"invalid_pairs"` // summed over seeds
	Cells        int    `json:"cells"`         // seeds audited in this mode
}

// certStats are a row's certified guarantee over its seeds (Label
// "certified"): the certified RD at the audit order, the (epsilon, delta)
// guarantee and the certified BDP, from the clip constants (every pair of
// inputs; not the training data). Order and Delta are NaN when the cells
// disagree.
type certStats struct {
	Label   string  `json:"label"` // privacy.LabelCertified
	Scope   string  `json:"scope"` // privacy.CertifiedScope(1, 0, 0)
	Order   float64 `json:"-"`
	Delta   float64 `json:"-"`
	RD      stat    `json:"rd_certified"`
	Epsilon stat    `json:"epsilon"`
	BDP     stat    `json:"bdp_epsilon_certified"`
	Cells   int     `json:"cells"`            // seeds with a certified block
	Reason  string  `json:"reason,omitempty"` // why the bound is infinite (first cell)
}

// MarshalJSON writes order and delta as jsonfloat numbers ("NaN": the
// cells disagree).
func (c certStats) MarshalJSON() ([]byte, error) {
	type plain certStats
	return json.Marshal(struct {
		plain
		Order jsonfloat.Float `json:"order"`
		Delta jsonfloat.Float `json:"delta"`
	}{plain(c), jsonfloat.Float(c.Order), jsonfloat.Float(c.Delta)})
}

func certifiedStats(cells []*runCell) *certStats {
	cs := &certStats{Label: privacy.LabelCertified, Scope: privacy.CertifiedScope(1, 0, 0)}
	var rd, eps, bdp []float64
	for _, c := range cells {
		ce := c.Certified
		if ce == nil {
			continue
		}
		if cs.Cells == 0 {
			cs.Order, cs.Delta = ce.Order, ce.Delta
		}
		if ce.Order != cs.Order {
			cs.Order = math.NaN()
		}
		if ce.Delta != cs.Delta {
			cs.Delta = math.NaN()
		}
		if cs.Reason == "" && !ce.Finite {
			cs.Reason = ce.Reason
		}
		cs.Cells++
		rd, eps, bdp = append(rd, ce.RD), append(eps, ce.Epsilon), append(bdp, ce.BDPEpsilon)
	}
	if cs.Cells == 0 {
		return nil
	}
	cs.RD, cs.Epsilon, cs.BDP = newStat(rd), newStat(eps), newStat(bdp)
	return cs
}

// tableRow is one line of a task table: a variant (training mode, target
// epsilon, C_mu) at one lambda, over its seeds.
type tableRow struct {
	Task    string `json:"task"`
	Variant string `json:"variant"`
	Mode    string `json:"mode"`
	// TargetEpsilon is the certified epsilon the row's cells were calibrated to (0: none).
	TargetEpsilon float64                `json:"target_epsilon,omitempty"`
	CMu           float64                `json:"c_mu,omitempty"` // C_mu; the radius C for gaussian
	Lambda        float64                `json:"lambda"`
	Seeds         []uint64               `json:"seeds"`
	Utility       map[string]stat        `json:"utility"`
	Privacy       map[string]*auditStats `json:"privacy,omitempty"` // by audit mode (empirical)
	// Certified is the certified guarantee (nil: no cell carries one).
	Certified *certStats `json:"certified,omitempty"`
	// WallSeconds is the cells' wall time (report.json seconds; nil: no cell says).
	WallSeconds *stat      `json:"wall_seconds,omitempty"`
	Cells       []*runCell `json:"-"`
	grid        bool
}

// Baseline reports whether the row is the non-private baseline.
func (r *tableRow) Baseline() bool { return r.Variant == "baseline" }

// Group is the row's model label without lambda: "NVDP", "NVDP-Clipped
// (C_mu=2)", "Gaussian mechanism (C=1)", "Non-private baseline", with
// " [reference]" for models trained in reference mode. A row calibrated to a
// target says the target instead of the constant it chose:
// "NVDP-Clipped (target ε=4)".
func (r *tableRow) Group() string {
	s := variantTitle(r.Variant)
	switch c := rowConstant(r); {
	case r.TargetEpsilon > 0:
		s += fmt.Sprintf(" (target ε=%g)", r.TargetEpsilon)
	case c != nil:
		s += fmt.Sprintf(" (%s=%g)", c.Name, c.Value)
	}
	if r.Mode == "reference" {
		s += " [reference]"
	}
	return s
}

// calibratedConstant is the constant a row's privacy is set by (calibrated to its
// target epsilon, or given by hand): C_mu, the mean-ball radius of
// nvdp-clipped, or C, the embedding-ball radius of gaussian (report.json
// c_mu for both).
type calibratedConstant struct {
	Name  string  `json:"name"` // "C_mu" | "C"
	Value float64 `json:"value"`
}

// rowConstant is r's calibratedConstant (nil for the other variants, or C_mu 0).
func rowConstant(r *tableRow) *calibratedConstant {
	if !(r.CMu > 0) {
		return nil
	}
	switch r.Variant {
	case "nvdp-clipped":
		return &calibratedConstant{Name: "C_mu", Value: r.CMu}
	case "gaussian":
		return &calibratedConstant{Name: "C", Value: r.CMu}
	}
	return nil
}

// taskTable is the table of one task (paper Tables 3-5, one task column).
type taskTable struct {
	Task string `json:"task"`
	// Metrics are the task's GLUE metrics in the paper's order (MRPC accuracy / F1, STS-B
	// Pearson / Spearman, else accuracy); Selection is the one models are selected on.
	Metrics   []string `json:"metrics"`
	Selection string   `json:"selection_metric"`
	// UtilitySplit is the split the rows' utility is on (dev for the GLUE
	// tasks, test for lid): the first cell's.
	UtilitySplit string      `json:"utility_split"`
	Rows         []*tableRow `json:"rows"`
	// Grid are the C_mu grid runs (nvdp-clipped rows by C_mu), kept out of Rows and Best.
	Grid []*tableRow         `json:"c_mu_grid,omitempty"`
	CMu  *sweep.CMuSelection `json:"c_mu_selection,omitempty"`
	// Frontier is the certified privacy-utility frontier (nil: no private
	// row carries a certified guarantee).
	Frontier *certFrontier `json:"frontier,omitempty"`
}

// Tables are the sweep's tables.
type Tables struct {
	Tasks []*taskTable `json:"tasks"`
	// AuditModes are the audit modes any cell carries (principled first).
	AuditModes []string   `json:"audit_modes"`
	Best       []*bestRow `json:"best"`
	// Distinguish are the distinguishing attacks' points (Read sets them,
	// distinguishPoints), drawn by WritePlots.
	Distinguish []distinguishPoint `json:"distinguish,omitempty"`
	// Learned are the learned attacks' points (Read sets them,
	// loadLearned), in the tables (writeMarkdown, writeCSV, writeJSON) and drawn
	// by WritePlots.
	Learned []learnedPoint `json:"learned_attacks,omitempty"`
	// Missing are the cells of the sweep's manifest without report.json
	// (Read with Options.AllowPartial), left out of every table.
	Missing []MissingCell `json:"missing_cells,omitempty"`
}

// bestRow is one entry of the best-trade-off summary (paper Table 1): per task,
// variant group and audit mode, the lambda with the best mean selection metric
// (ties: the lower mean rd_max) with its privacy.
type bestRow struct {
	Task      string      `json:"task"`
	Group     string      `json:"group"`
	AuditMode string      `json:"audit_mode,omitempty"` // "" for the baseline
	Row       *tableRow   `json:"row"`
	Privacy   *auditStats `json:"privacy,omitempty"`
}

// taskMetrics are the utility metrics of a task's tables and its selection
// metric: a GLUE task's; for another task (lid) the metrics its cells
// report, losses left out, and the selection metric the runs were judged by
// (their collapse check's), else the first metric.
func taskMetrics(task string, cells []*runCell) ([]string, string) {
	if t, err := glue.LookupTask(task); err == nil {
		return t.Metrics, t.Metric
	}
	set := map[string]bool{}
	sel := ""
	for _, c := range cells {
		for k := range c.Utility {
			if k != "loss" && k != "dev_loss" {
				set[k] = true
			}
		}
		if sel == "" && c.ChanceMetric != "" {
			sel = c.ChanceMetric
		}
	}
	var ms []string
	for k := range set {
		ms = append(ms, k)
	}
	sort.Strings(ms)
	if !set[sel] && len(ms) > 0 {
		sel = ms[0]
	}
	return ms, sel
}

// build aggregates the cells into per-task tables (C_mu grid cells in their own rows, Grid):
// rows ordered baseline, NVDP, NVDP-Clipped (then by C_mu), lambda ascending.
// selections are the C_mu selections by task (may be nil).
func build(cells []*runCell, selections map[string]*sweep.CMuSelection) *Tables {
	rows, modes := groupCells(cells)
	t := &Tables{AuditModes: modes}
	byTask := map[string]*taskTable{}
	for _, r := range rows {
		tt := byTask[r.Task]
		if tt == nil {
			tt = &taskTable{Task: r.Task}
			tt.Metrics, tt.Selection = taskMetrics(r.Task, r.Cells)
			tt.UtilitySplit = r.Cells[0].UtilitySplit
			if selections != nil {
				tt.CMu = selections[r.Task]
			}
			byTask[r.Task] = tt
			t.Tasks = append(t.Tasks, tt)
		}
		aggregateRow(r, tt.Metrics, t.AuditModes)
		if r.grid {
			tt.Grid = append(tt.Grid, r)
		} else {
			tt.Rows = append(tt.Rows, r)
		}
	}
	sort.Slice(t.Tasks, func(i, j int) bool { return t.Tasks[i].Task < t.Tasks[j].Task })
	for _, tt := range t.Tasks {
		slices.SortStableFunc(tt.Grid, func(a, b *tableRow) int {
			return cmp.Or(cmp.Compare(a.Lambda, b.Lambda), cmp.Compare(a.CMu, b.CMu))
		})
		slices.SortStableFunc(tt.Rows, func(a, b *tableRow) int {
			return cmp.Or(cmp.Compare(variantRank(a.Variant), variantRank(b.Variant)), cmp.Compare(a.Mode, b.Mode),
				cmp.Compare(a.TargetEpsilon, b.TargetEpsilon), cmp.Compare(a.CMu, b.CMu), cmp.Compare(a.Lambda, b.Lambda))
		})
		t.Best = append(t.Best, bestOf(tt, t.AuditModes)...)
		tt.Frontier = buildFrontier(tt, t.AuditModes)
	}
	return t
}

// rowKey is what the cells of one row share.
type rowKey struct {
	task, variant, mode string
	target, cmu, lambda float64
	grid                bool
}

// groupCells groups cells into rows (the baseline's whatever their target,
// C_mu and lambda), in the order of each row's first cell, and returns the
// audit modes the cells carry: principled first, then by name.
func groupCells(cells []*runCell) ([]*tableRow, []string) {
	byKey := map[rowKey]*tableRow{}
	var rows []*tableRow
	modes := map[string]bool{}
	for _, c := range cells {
		k := rowKey{c.Task, c.Variant, c.Mode, c.TargetEpsilon, c.CMu, c.Lambda, c.Grid}
		if c.Variant == "baseline" {
			k.target, k.cmu, k.lambda = 0, 0, 0
		}
		r := byKey[k]
		if r == nil {
			r = &tableRow{Task: k.task, Variant: k.variant, Mode: k.mode, TargetEpsilon: k.target, CMu: k.cmu, Lambda: k.lambda, grid: k.grid}
			byKey[k] = r
			rows = append(rows, r)
		}
		r.Cells = append(r.Cells, c)
		r.Seeds = append(r.Seeds, c.Seed)
		for m := range c.Audits {
			modes[m] = true
		}
	}
	var ms []string
	for m := range modes {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool {
		a, b := ms[i], ms[j]
		if (a == "principled") != (b == "principled") {
			return a == "principled"
		}
		return a < b
	})
	return rows, ms
}

// aggregateRow sets r's statistics over its cells: the utility of each
// metric, the empirical privacy of each audit mode (left out when no cell
// has the audit), the certified guarantee and the wall time.
func aggregateRow(r *tableRow, metrics, modes []string) {
	r.Utility = map[string]stat{}
	for _, m := range metrics {
		var v []float64
		for _, c := range r.Cells {
			x, ok := c.Utility[m]
			if !ok {
				x = math.NaN()
			}
			v = append(v, x)
		}
		r.Utility[m] = newStat(v)
	}
	for _, m := range modes {
		if ps := privacyStats(r.Cells, m); ps != nil {
			if r.Privacy == nil {
				r.Privacy = map[string]*auditStats{}
			}
			r.Privacy[m] = ps
		}
	}
	r.Certified = certifiedStats(r.Cells)
	var secs []float64
	for _, c := range r.Cells {
		secs = append(secs, c.Seconds)
	}
	if st := newStat(secs); st.N > 0 {
		r.WallSeconds = &st
	}
}

// privacyStats are the empirical privacy statistics of the cells' audits
// in mode (nil: no cell has one).
func privacyStats(cells []*runCell, mode string) *auditStats {
	var bdp, rmax, rmean []float64
	ps := &auditStats{Label: privacy.LabelEmpirical, Mode: mode}
	for _, c := range cells {
		a := c.Audits[mode]
		if a == nil {
			continue
		}
		ps.Cells++
		ps.InvalidPairs += a.InvalidPairs
		bdp, rmax, rmean = append(bdp, a.BDPEpsilon), append(rmax, a.RDMax), append(rmean, a.RDMean)
	}
	if ps.Cells == 0 {
		return nil
	}
	ps.BDP, ps.RDMax, ps.RDMean = newStat(bdp), newStat(rmax), newStat(rmean)
	return ps
}

// groups returns the row groups of a table in row order.
func groups(tt *taskTable) []string {
	var gs []string
	for _, r := range tt.Rows {
		if g := r.Group(); !slices.Contains(gs, g) {
			gs = append(gs, g)
		}
	}
	return gs
}

func bestOf(tt *taskTable, modes []string) []*bestRow {
	var out []*bestRow
	for _, g := range groups(tt) {
		var rs []*tableRow
		for _, r := range tt.Rows {
			if r.Group() == g {
				rs = append(rs, r)
			}
		}
		if rs[0].Baseline() {
			out = append(out, &bestRow{Task: tt.Task, Group: g, Row: pickBest(rs, tt.Selection, "")})
			continue
		}
		for _, m := range modes {
			var with []*tableRow
			for _, r := range rs {
				if r.Privacy[m] != nil {
					with = append(with, r)
				}
			}
			if len(with) == 0 {
				continue
			}
			b := pickBest(with, tt.Selection, m)
			out = append(out, &bestRow{Task: tt.Task, Group: g, AuditMode: m, Row: b, Privacy: b.Privacy[m]})
		}
	}
	return out
}

// pickBest is the row with the highest mean selection metric; ties go to the
// lower mean rd_max in mode m, then the smaller lambda.
func pickBest(rs []*tableRow, metric, m string) *tableRow {
	var best *tableRow
	for _, r := range rs {
		u := r.Utility[metric].Mean
		if math.IsNaN(u) {
			continue
		}
		if best == nil {
			best = r
			continue
		}
		bu := best.Utility[metric].Mean
		switch {
		case u > bu:
			best = r
		case u == bu && m != "" && privacy.CompareBounds(r.Privacy[m].RDMax.Mean, best.Privacy[m].RDMax.Mean) < 0:
			best = r
		}
	}
	if best == nil {
		best = rs[0]
	}
	return best
}
