package report

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/sweep"
)

// Stat is the mean and sample standard deviation (n - 1; 0 for one value)
// of a quantity over seeds. NaN values are left out (N counts the others); a
// +Inf value makes the mean +Inf.
type Stat struct {
	Mean float64
	Std  float64
	N    int
}

// NewStat summarises v.
func NewStat(v []float64) Stat {
	var s Stat
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
		return Stat{Mean: math.NaN(), Std: math.NaN()}
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
func (s Stat) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Mean jsonfloat.Float `json:"mean"`
		Std  jsonfloat.Float `json:"std"`
		N    int             `json:"n"`
	}{jsonfloat.Float(s.Mean), jsonfloat.Float(s.Std), s.N})
}

// PrivacyStats are a row's privacy in one audit mode over its seeds: empirical
// numbers (Label "empirical"): RD max / mean over the audited pairs and the
// BDP estimate, not guarantees.
type PrivacyStats struct {
	Label        string `json:"label"` // privacy.LabelEmpirical
	Mode         string `json:"mode"`
	BDP          Stat   `json:"bdp_epsilon"`
	RDMax        Stat   `json:"rd_max"`
	RDMean       Stat   `json:"rd_mean"`
	InvalidPairs int64  `json:"invalid_pairs"` // summed over seeds
	Cells        int    `json:"cells"`         // seeds audited in this mode
}

// CertifiedStats are a row's certified guarantee over its seeds (Label
// "certified"): the certified RD at the audit order, the (epsilon, delta)
// guarantee and the certified BDP, from the clip constants (every pair of
// inputs; not the training data). Order and Delta are NaN when the cells
// disagree.
type CertifiedStats struct {
	Label   string  `json:"label"` // privacy.LabelCertified
	Scope   string  `json:"scope"` // privacy.CertifiedScope(1, 0, 0)
	Order   float64 `json:"-"`
	Delta   float64 `json:"-"`
	RD      Stat    `json:"rd_certified"`
	Epsilon Stat    `json:"epsilon"`
	BDP     Stat    `json:"bdp_epsilon_certified"`
	Cells   int     `json:"cells"`            // seeds with a certified block
	Reason  string  `json:"reason,omitempty"` // why the bound is infinite (first cell)
}

// MarshalJSON writes order and delta as jsonfloat numbers ("NaN": the
// cells disagree).
func (c CertifiedStats) MarshalJSON() ([]byte, error) {
	type plain CertifiedStats
	return json.Marshal(struct {
		plain
		Order jsonfloat.Float `json:"order"`
		Delta jsonfloat.Float `json:"delta"`
	}{plain(c), jsonfloat.Float(c.Order), jsonfloat.Float(c.Delta)})
}

func certifiedStats(cells []*Cell) *CertifiedStats {
	cs := &CertifiedStats{Label: privacy.LabelCertified, Scope: privacy.CertifiedScope(1, 0, 0)}
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
	cs.RD, cs.Epsilon, cs.BDP = NewStat(rd), NewStat(eps), NewStat(bdp)
	return cs
}

// Row is one line of a task table: a variant (training mode, target
// epsilon, C_mu) at one lambda, over its seeds.
type Row struct {
	Task    string `json:"task"`
	Variant string `json:"variant"`
	Mode    string `json:"mode"`
	// TargetEpsilon is the certified epsilon the row's cells were calibrated to (0: none).
	TargetEpsilon float64                  `json:"target_epsilon,omitempty"`
	CMu           float64                  `json:"c_mu,omitempty"` // C_mu; the radius C for gaussian
	Lambda        float64                  `json:"lambda"`
	Seeds         []uint64                 `json:"seeds"`
	Utility       map[string]Stat          `json:"utility"`
	Privacy       map[string]*PrivacyStats `json:"privacy,omitempty"` // by audit mode (empirical)
	// Certified is the certified guarantee (nil: no cell carries one).
	Certified *CertifiedStats `json:"certified,omitempty"`
	// WallSeconds is the cells' wall time (report.json seconds; nil: no cell says).
	WallSeconds *Stat   `json:"wall_seconds,omitempty"`
	Cells       []*Cell `json:"-"`
	grid        bool
}

// Baseline reports whether the row is the non-private baseline.
func (r *Row) Baseline() bool { return r.Variant == "baseline" }

// Group is the row's model label without lambda: "NVDP", "NVDP-Clipped
// (C_mu=2)", "Gaussian mechanism (C=1)", "Non-private baseline", with
// " [reference]" for models trained in reference mode. A row calibrated to a
// target says the target instead of the constant it chose:
// "NVDP-Clipped (target ε=4)".
func (r *Row) Group() string {
	s := VariantTitle(r.Variant)
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

// VariantTitle is the display name of a model variant: "Non-private
// baseline", "NVDP", "NVDP-Clipped", "Gaussian mechanism", else the variant.
func VariantTitle(v string) string {
	switch v {
	case "baseline":
		return "Non-private baseline"
	case "nvdp":
		return "NVDP"
	case "nvdp-clipped":
		return "NVDP-Clipped"
	case "gaussian":
		return "Gaussian mechanism"
	}
	return v
}

// Constant is the constant a row's privacy is set by (calibrated to its
// target epsilon, or given by hand): C_mu, the mean-ball radius of
// nvdp-clipped, or C, the embedding-ball radius of gaussian (report.json
// c_mu for both).
type Constant struct {
	Name  string  `json:"name"` // "C_mu" | "C"
	Value float64 `json:"value"`
}

// rowConstant is r's Constant (nil for the other variants, or C_mu 0).
func rowConstant(r *Row) *Constant {
	if !(r.CMu > 0) {
		return nil
	}
	switch r.Variant {
	case "nvdp-clipped":
		return &Constant{Name: "C_mu", Value: r.CMu}
	case "gaussian":
		return &Constant{Name: "C", Value: r.CMu}
	}
	return nil
}

// TaskTable is the table of one task (paper Tables 3-5, one task column).
type TaskTable struct {
	Task string `json:"task"`
	// Metrics are the task's GLUE metrics in the paper's order (MRPC accuracy / F1, STS-B
	// Pearson / Spearman, else accuracy); Selection is the one models are selected on.
	Metrics   []string `json:"metrics"`
	Selection string   `json:"selection_metric"`
	// UtilitySplit is the split the rows' utility is on (dev for the GLUE
	// tasks, test for lid): the first cell's.
	UtilitySplit string `json:"utility_split"`
	Rows         []*Row `json:"rows"`
	// Grid are the C_mu grid runs (nvdp-clipped rows by C_mu), kept out of Rows and Best.
	Grid []*Row              `json:"c_mu_grid,omitempty"`
	CMu  *sweep.CMuSelection `json:"c_mu_selection,omitempty"`
	// Frontier is the certified privacy-utility frontier (nil: no private
	// row carries a certified guarantee).
	Frontier *Frontier `json:"frontier,omitempty"`
}

// Tables are the sweep's tables.
type Tables struct {
	Tasks []*TaskTable `json:"tasks"`
	// AuditModes are the audit modes any cell carries (principled first).
	AuditModes []string `json:"audit_modes"`
	Best       []*Best  `json:"best"`
	// Distinguish are the distinguishing attacks' points (DistinguishPoints;
	// set by the caller, not by Build), drawn by WritePlots.
	Distinguish []DistinguishPoint `json:"distinguish,omitempty"`
	// Learned are the learned attacks' points (LoadLearned; set by the
	// caller), in the tables (WriteMarkdown, WriteCSV, WriteJSON) and drawn
	// by WritePlots.
	Learned []LearnedPoint `json:"learned_attacks,omitempty"`
}

// Best is one entry of the best-trade-off summary (paper Table 1): per task,
// variant group and audit mode, the lambda with the best mean selection metric
// (ties: the lower mean rd_max) with its privacy.
type Best struct {
	Task      string        `json:"task"`
	Group     string        `json:"group"`
	AuditMode string        `json:"audit_mode,omitempty"` // "" for the baseline
	Row       *Row          `json:"row"`
	Privacy   *PrivacyStats `json:"privacy,omitempty"`
}

// taskMetrics are the utility metrics of a task's tables and its selection
// metric: a GLUE task's; for another task (lid) the metrics its cells
// report, losses left out, and the selection metric the runs were judged by
// (their collapse check's), else the first metric.
func taskMetrics(task string, cells []*Cell) ([]string, string) {
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

// Build aggregates the cells into per-task tables (C_mu grid cells in their own rows, Grid):
// rows ordered baseline, NVDP, NVDP-Clipped (then by C_mu), lambda ascending.
// selections are the C_mu selections by task (may be nil).
func Build(cells []*Cell, selections map[string]*sweep.CMuSelection) *Tables {
	rows, modes := groupCells(cells)
	t := &Tables{AuditModes: modes}
	byTask := map[string]*TaskTable{}
	for _, r := range rows {
		tt := byTask[r.Task]
		if tt == nil {
			tt = &TaskTable{Task: r.Task}
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
		slices.SortStableFunc(tt.Grid, func(a, b *Row) int {
			return cmp.Or(cmp.Compare(a.Lambda, b.Lambda), cmp.Compare(a.CMu, b.CMu))
		})
		slices.SortStableFunc(tt.Rows, func(a, b *Row) int {
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
func groupCells(cells []*Cell) ([]*Row, []string) {
	byKey := map[rowKey]*Row{}
	var rows []*Row
	modes := map[string]bool{}
	for _, c := range cells {
		k := rowKey{c.Task, c.Variant, c.Mode, c.TargetEpsilon, c.CMu, c.Lambda, c.Grid}
		if c.Variant == "baseline" {
			k.target, k.cmu, k.lambda = 0, 0, 0
		}
		r := byKey[k]
		if r == nil {
			r = &Row{Task: k.task, Variant: k.variant, Mode: k.mode, TargetEpsilon: k.target, CMu: k.cmu, Lambda: k.lambda, grid: k.grid}
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
func aggregateRow(r *Row, metrics, modes []string) {
	r.Utility = map[string]Stat{}
	for _, m := range metrics {
		var v []float64
		for _, c := range r.Cells {
			x, ok := c.Utility[m]
			if !ok {
				x = math.NaN()
			}
			v = append(v, x)
		}
		r.Utility[m] = NewStat(v)
	}
	for _, m := range modes {
		if ps := privacyStats(r.Cells, m); ps != nil {
			if r.Privacy == nil {
				r.Privacy = map[string]*PrivacyStats{}
			}
			r.Privacy[m] = ps
		}
	}
	r.Certified = certifiedStats(r.Cells)
	var secs []float64
	for _, c := range r.Cells {
		secs = append(secs, c.Seconds)
	}
	if st := NewStat(secs); st.N > 0 {
		r.WallSeconds = &st
	}
}

// privacyStats are the empirical privacy statistics of the cells' audits
// in mode (nil: no cell has one).
func privacyStats(cells []*Cell, mode string) *PrivacyStats {
	var bdp, rmax, rmean []float64
	ps := &PrivacyStats{Label: privacy.LabelEmpirical, Mode: mode}
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
	ps.BDP, ps.RDMax, ps.RDMean = NewStat(bdp), NewStat(rmax), NewStat(rmean)
	return ps
}

// groups returns the row groups of a table in row order.
func groups(tt *TaskTable) []string {
	var gs []string
	for _, r := range tt.Rows {
		if g := r.Group(); !slices.Contains(gs, g) {
			gs = append(gs, g)
		}
	}
	return gs
}

func bestOf(tt *TaskTable, modes []string) []*Best {
	var out []*Best
	for _, g := range groups(tt) {
		var rs []*Row
		for _, r := range tt.Rows {
			if r.Group() == g {
				rs = append(rs, r)
			}
		}
		if rs[0].Baseline() {
			out = append(out, &Best{Task: tt.Task, Group: g, Row: pickBest(rs, tt.Selection, "")})
			continue
		}
		for _, m := range modes {
			var with []*Row
			for _, r := range rs {
				if r.Privacy[m] != nil {
					with = append(with, r)
				}
			}
			if len(with) == 0 {
				continue
			}
			b := pickBest(with, tt.Selection, m)
			out = append(out, &Best{Task: tt.Task, Group: g, AuditMode: m, Row: b, Privacy: b.Privacy[m]})
		}
	}
	return out
}

// pickBest is the row with the highest mean selection metric; ties go to the
// lower mean rd_max in mode m, then the smaller lambda.
func pickBest(rs []*Row, metric, m string) *Row {
	var best *Row
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

// Number formats of the tables: utility x 100 with one decimal (as the
// paper), BDP eps_mu with two decimals, RD with three significant digits
// (integers from 100 up). +Inf is "inf", NaN "n/a".
func fmtUtil(v float64) string {
	return fmtNum(v*100, func(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) })
}
func fmtBDP(v float64) string {
	return fmtNum(v, func(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) })
}
func fmtRD(v float64) string {
	return fmtNum(v, func(x float64) string {
		if math.Abs(x) >= 100 {
			return strconv.FormatFloat(x, 'f', 0, 64)
		}
		return strconv.FormatFloat(x, 'g', 3, 64)
	})
}

func fmtNum(v float64, f func(float64) string) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	return f(v)
}

// fmtStat writes "mean ± std" with f (the mean alone for one seed).
func fmtStat(s Stat, f func(float64) string) string {
	if s.N <= 1 || math.IsNaN(s.Std) {
		return f(s.Mean)
	}
	return f(s.Mean) + " ± " + f(s.Std)
}

// MetricTitle is the display name of a GLUE metric.
func MetricTitle(m string) string {
	switch m {
	case glue.MetricAccuracy:
		return "Accuracy"
	case glue.MetricF1:
		return "F1"
	case glue.MetricPearson:
		return "Pearson"
	case glue.MetricSpearman:
		return "Spearman"
	case glue.MetricMatthews:
		return "MCC"
	}
	return m
}

// TaskTitle is the paper's name of a task.
func TaskTitle(t string) string {
	switch t {
	case "sst2":
		return "SST-2"
	case "mrpc":
		return "MRPC"
	case "rte":
		return "RTE"
	case "stsb":
		return "STS-B"
	case "qnli":
		return "QNLI"
	}
	return t
}

func lambdaCell(r *Row) string {
	if !hasLambda(r.Variant, r.Lambda) {
		return "–"
	}
	return sweep.FormatLambda(r.Lambda)
}

// hasLambda reports whether a row's lambda means something: not for the
// baseline, nor for gaussian rows without one (the Gaussian release has no
// KL term; its report.json says lambda 0 or nothing).
func hasLambda(variant string, lambda float64) bool {
	return variant != "baseline" && !(variant == "gaussian" && lambda == 0)
}

func seedsCell(r *Row) string { return strconv.Itoa(len(r.Seeds)) }

// WriteMarkdown writes the per-task tables and the best-trade-off summary.
func WriteMarkdown(w io.Writer, t *Tables) error {
	var b strings.Builder
	var encs, tmodes []string
	n, ng := 0, 0
	for _, tt := range t.Tasks {
		for _, r := range append(slices.Clone(tt.Rows), tt.Grid...) {
			for _, c := range r.Cells {
				if r.grid {
					ng++
				} else {
					n++
				}
				if !slices.Contains(encs, c.Encoder) {
					encs = append(encs, c.Encoder)
				}
				if !slices.Contains(tmodes, c.Mode) {
					tmodes = append(tmodes, c.Mode)
				}
			}
		}
	}
	grid := ""
	if ng > 0 {
		grid = fmt.Sprintf(" (+ %d C_mu grid cells)", ng)
	}
	fmt.Fprintf(&b, "%d cells%s; encoder %s; training mode %s.\n", n, grid, strings.Join(encs, ", "), strings.Join(tmodes, ", "))
	b.WriteString("Utility: metric x 100 on each run's utility split (dev for the GLUE tasks, test for lid); mean ± std over seeds (sample std).\n\n")
	b.WriteString(whichIsWhich)
	b.WriteString("\n\n")
	for _, tt := range t.Tasks {
		var ms []string
		for _, m := range tt.Metrics {
			ms = append(ms, MetricTitle(m))
		}
		fmt.Fprintf(&b, "### %s (%s)\n\n", TaskTitle(tt.Task), strings.Join(ms, " / "))
		mdTable(&b, t, tt, tt.Rows)
		if len(tt.Grid) > 0 {
			fmt.Fprintf(&b, "C_mu grid (nvdp-clipped; selection on dev %s):\n\n", MetricTitle(tt.Selection))
			mdTable(&b, t, tt, tt.Grid)
		}
		if s := tt.CMu; s != nil {
			fmt.Fprintf(&b, "C_mu selection (lambda %s, %s, tolerance %g): C_mu = %g. %s\n\n", sweep.FormatLambda(s.Lambda),
				MetricTitle(s.Metric), s.Tolerance, s.CMu, s.Reason)
		}
		frontierMarkdown(&b, tt)
		learnedMarkdown(&b, tt.Task, t.Learned)
	}
	for _, m := range t.AuditModes {
		fmt.Fprintf(&b, "### Best trade-off (as paper Table 1), %s audit\n\n", m)
		b.WriteString("Per task and model, the lambda with the best mean dev selection metric, with its privacy.\n\n")
		cRD, cEps := certHeaders(t)
		mdRow(&b, []string{"Task", "Metric", "Model", "λ", "Score", "BDP ε_μ estimate", "RD max (empirical)", cRD, cEps})
		mdRow(&b, []string{"---", "---", "---", "---:", "---:", "---:", "---:", "---:", "---:"})
		for _, tt := range t.Tasks {
			for _, metric := range tt.Metrics {
				for _, bst := range t.Best {
					if bst.Task != tt.Task || (bst.AuditMode != m && bst.AuditMode != "") {
						continue
					}
					bdp, rd := "–", "–"
					if bst.Privacy != nil {
						bdp, rd = fmtStat(bst.Privacy.BDP, fmtBDP), withInvalid(fmtStat(bst.Privacy.RDMax, fmtRD), bst.Privacy)
					}
					mdRow(&b, append([]string{TaskTitle(tt.Task), MetricTitle(metric), bst.Group, lambdaCell(bst.Row),
						fmtStat(bst.Row.Utility[metric], fmtUtil), bdp, rd}, certCells(bst.Row.Certified)...))
				}
			}
		}
		b.WriteString("\n")
	}
	if len(t.AuditModes) == 0 {
		b.WriteString("(no audited cells: baseline only)\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// whichIsWhich is the note under the tables' title that says which privacy
// number is which.
const whichIsWhich = "Which number is which: **RD max / avg (empirical)** is the maximum / mean of Eq. rdp (nats) over the ordered pairs " +
	"of the audited split's texts (dev unless `--audit-split`), an empirical audit, not a guarantee; **BDP ε_μ estimate** is the accountant's estimate over " +
	"those pairs (principled: Student-t, confidence 1-1e-16, pairs treated as independent; reference: the released code's " +
	"accountant) at the audited δ_μ. **Certified RD / certified ε** (certified) are the guarantee of the clipping: the supremum " +
	"of Eq. rdp over every pair of inputs the clip constants allow, at the audit's Renyi order, and its (ε, δ) conversion " +
	"minimised over orders; one release of one text against any other text, not the training data (docs/privacy.md). " +
	"\"–\": no certified data (baseline, or a cell written before certification); inf: no finite guarantee (no clipping)."

// certHeaders are the certified columns' headers, with the Renyi order and
// delta when every certified row shares them.
func certHeaders(t *Tables) (rd, eps string) {
	var rows []*Row
	for _, tt := range t.Tasks {
		rows = append(append(rows, tt.Rows...), tt.Grid...)
	}
	return certHeadersOf(rows)
}

// certShared is the Renyi order and delta every certified row of rows
// shares (NaN where they differ or no row is certified).
func certShared(rows []*Row) (order, delta float64) {
	order, delta = math.NaN(), math.NaN()
	first := true
	for _, r := range rows {
		c := r.Certified
		if c == nil {
			continue
		}
		if first {
			order, delta, first = c.Order, c.Delta, false
		}
		if c.Order != order {
			order = math.NaN()
		}
		if c.Delta != delta {
			delta = math.NaN()
		}
	}
	return order, delta
}

// certHeadersOf are certHeaders for the rows given.
func certHeadersOf(rows []*Row) (rd, eps string) {
	order, delta := certShared(rows)
	rd, eps = "Certified RD (audit order)", "Certified ε"
	if !math.IsNaN(order) {
		rd = fmt.Sprintf("Certified RD (order %g)", order)
	}
	if !math.IsNaN(delta) {
		eps = "Certified ε (δ=" + sweep.FormatLambda(delta) + ")"
	}
	return rd, eps
}

// certCells are a row's certified columns: RD at the audit order and epsilon
// ("–" without certified data).
func certCells(c *CertifiedStats) []string {
	if c == nil {
		return []string{"–", "–"}
	}
	// The seeds of a row share the clip constants: one value, shown alone.
	f := func(st Stat, fm func(float64) string) string {
		if st.Std == 0 {
			return fm(st.Mean)
		}
		return fmtStat(st, fm)
	}
	return []string{f(c.RD, fmtRD), f(c.Epsilon, fmtBDP)}
}

func mdTable(b *strings.Builder, t *Tables, tt *TaskTable, rows []*Row) {
	if len(rows) == 0 {
		return
	}
	modes := t.AuditModes
	hdr := []string{"Model", "λ", "Seeds"}
	for _, m := range tt.Metrics {
		hdr = append(hdr, MetricTitle(m))
	}
	for _, m := range modes {
		hdr = append(hdr, "BDP ε_μ estimate ("+m+")", "RD max / avg, empirical ("+m+")")
	}
	cRD, cEps := certHeaders(t)
	hdr = append(hdr, cRD, cEps)
	mdRow(b, hdr)
	sep := make([]string, len(hdr))
	for i := range sep {
		sep[i] = "---"
		if i > 0 {
			sep[i] = "---:"
		}
	}
	mdRow(b, sep)
	for _, r := range rows {
		cells := []string{r.Group(), lambdaCell(r), seedsCell(r)}
		for _, m := range tt.Metrics {
			cells = append(cells, fmtStat(r.Utility[m], fmtUtil))
		}
		for _, m := range modes {
			cells = append(cells, privCells(r.Privacy[m])...)
		}
		cells = append(cells, certCells(r.Certified)...)
		mdRow(b, cells)
	}
	b.WriteString("\n")
}

func privCells(p *PrivacyStats) []string {
	if p == nil {
		return []string{"–", "–"}
	}
	return []string{fmtStat(p.BDP, fmtBDP), withInvalid(fmtStat(p.RDMax, fmtRD)+" / "+fmtStat(p.RDMean, fmtRD), p)}
}

// withInvalid appends the count of invalid pairs to an RD cell: its numbers
// are then over the finite pairs only, and the worst case is unbounded.
func withInvalid(rd string, p *PrivacyStats) string {
	if p.InvalidPairs > 0 {
		return rd + fmt.Sprintf(" (%d invalid pairs)", p.InvalidPairs)
	}
	return rd
}

func mdRow(b *strings.Builder, cells []string) {
	b.WriteString("| ")
	b.WriteString(strings.Join(cells, " | "))
	b.WriteString(" |\n")
}

// WriteCSV writes one line per row, metric and audit mode (long format; the
// baseline has empty privacy columns; C_mu grid rows have c_mu_grid true). Numbers are raw (utility not x 100).
// bdp_* (an estimate) and rd_* (empirical: over the audited pairs) are the
// audit's; the certified_* / *_certified_* columns (the row's certified
// guarantee, the same on each of its lines; empty without certified data)
// are the clipping's guarantee for every pair of inputs. The last columns
// are the frontier's (TaskTable.Frontier): target_epsilon (empty: none),
// calibrated_constant and its value (C_mu, or C for gaussian), the wall time,
// the task's chance level, and pareto_certified (true / false for the
// frontier's private rows that are drawn, empty otherwise). With learned
// attacks (Tables.Learned) the learnedCSVHeader columns follow, empty on
// those lines, and each task's lines are followed by one line per learned
// point (LearnedPoint: attack, property, seed, attacker, metric, the score
// on the release with its interval, the encoder-output reference, the
// shuffled and majority chance levels, the certified bound, the report
// file), with task, variant, epsilon_certified_mean (the certified epsilon
// of the attacked model) and target_epsilon set and the other columns
// empty.
func WriteCSV(w io.Writer, t *Tables) error {
	cw := csv.NewWriter(w)
	hdr := tablesCSVHeader()
	width := len(hdr)
	write := cw.Write
	if len(t.Learned) > 0 { // the learned attacks' columns, empty on the tables' rows
		hdr = append(hdr, learnedCSVHeader...)
		write = func(rec []string) error { return cw.Write(append(rec, make([]string, len(learnedCSVHeader))...)) }
	}
	if err := cw.Write(hdr); err != nil {
		return err
	}
	for _, tt := range t.Tasks {
		pareto, chance := frontierCSV(tt)
		for _, r := range append(slices.Clone(tt.Rows), tt.Grid...) {
			for _, line := range rowCSV(r, tt.Metrics, t.AuditModes, chance, pareto[r]) {
				if err := write(line); err != nil {
					return err
				}
			}
		}
		for _, pt := range t.Learned {
			if pt.Task == tt.Task {
				if err := cw.Write(learnedCSV(pt, width, slices.Index(hdr, "epsilon_certified_mean"), slices.Index(hdr, "target_epsilon"))); err != nil {
					return err
				}
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// tablesCSVHeader is the header of WriteCSV's columns of the tables' rows.
func tablesCSVHeader() []string {
	return []string{"task", "variant", "mode", "c_mu", "lambda", "seeds", "metric", "utility_mean", "utility_std",
		"audit_mode", "bdp_mean", "bdp_std", "rd_max_mean", "rd_max_std", "rd_avg_mean", "rd_avg_std", "invalid_pairs", "c_mu_grid",
		"certified_order", "certified_delta", "rd_certified_mean", "rd_certified_std", "epsilon_certified_mean", "epsilon_certified_std",
		"bdp_epsilon_certified_mean", "bdp_epsilon_certified_std",
		"target_epsilon", "calibrated_constant", "calibrated_constant_value", "wall_seconds_mean", "wall_seconds_std", "chance",
		"pareto_certified"}
}

// csvFloat is a number of the CSV tables: the shortest decimal that reads
// back as v.
func csvFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// frontierCSV are the frontier's columns of tt's rows: pareto_certified of
// the drawn private rows and the chance level ("" without a frontier or a
// chance level).
func frontierCSV(tt *TaskTable) (pareto map[*Row]string, chance string) {
	pareto = map[*Row]string{}
	if f := tt.Frontier; f != nil {
		for _, fr := range f.Rows {
			if fr.Shown {
				pareto[fr.Row] = strconv.FormatBool(fr.Pareto)
			}
		}
		if c := float64(f.Chance); !math.IsNaN(c) {
			chance = csvFloat(c)
		}
	}
	return pareto, chance
}

// rowCSV are the CSV lines of r: one per metric and audit mode (one per
// metric without an audit).
func rowCSV(r *Row, metrics, modes []string, chance, pareto string) [][]string {
	lambda := csvFloat(r.Lambda)
	if !hasLambda(r.Variant, r.Lambda) {
		lambda = ""
	}
	cmu := ""
	if r.CMu > 0 {
		cmu = csvFloat(r.CMu)
	}
	tail := rowCSVTail(r, chance, pareto)
	var lines [][]string
	for _, m := range metrics {
		u := r.Utility[m]
		base := []string{r.Task, r.Variant, r.Mode, cmu, lambda, strconv.Itoa(len(r.Seeds)), m, csvFloat(u.Mean), csvFloat(u.Std)}
		if len(r.Privacy) == 0 {
			lines = append(lines, append(append(base, "", "", "", "", "", "", "", "", strconv.FormatBool(r.grid)), tail...))
			continue
		}
		for _, am := range modes {
			p := r.Privacy[am]
			if p == nil {
				continue
			}
			line := append(slices.Clone(base), am, csvFloat(p.BDP.Mean), csvFloat(p.BDP.Std), csvFloat(p.RDMax.Mean), csvFloat(p.RDMax.Std),
				csvFloat(p.RDMean.Mean), csvFloat(p.RDMean.Std), strconv.FormatInt(p.InvalidPairs, 10), strconv.FormatBool(r.grid))
			lines = append(lines, append(line, tail...))
		}
	}
	return lines
}

// rowCSVTail are the last columns of r's lines, the same on each: the
// certified guarantee and the frontier's columns.
func rowCSVTail(r *Row, chance, pareto string) []string {
	cert := make([]string, 8)
	if c := r.Certified; c != nil {
		cert = []string{csvFloat(c.Order), csvFloat(c.Delta), csvFloat(c.RD.Mean), csvFloat(c.RD.Std), csvFloat(c.Epsilon.Mean),
			csvFloat(c.Epsilon.Std), csvFloat(c.BDP.Mean), csvFloat(c.BDP.Std)}
	}
	front := make([]string, 7)
	if r.TargetEpsilon > 0 {
		front[0] = csvFloat(r.TargetEpsilon)
	}
	if c := rowConstant(r); c != nil {
		front[1], front[2] = c.Name, csvFloat(c.Value)
	}
	if w := r.WallSeconds; w != nil {
		front[3], front[4] = csvFloat(w.Mean), csvFloat(w.Std)
	}
	front[5], front[6] = chance, pareto
	return append(cert, front...)
}

// WriteJSON writes the tables as one JSON object (non-finite numbers as
// jsonfloat strings, "NaN" and "Infinity").
func WriteJSON(w io.Writer, t *Tables) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(t)
}
