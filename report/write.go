package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/sweep"
)

// variantTitle is the display name of a model variant: "Non-private
// baseline", "NVDP", "NVDP-Clipped", "Gaussian mechanism", else the variant.
func variantTitle(v string) string {
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
func fmtStat(s stat, f func(float64) string) string {
	if s.N <= 1 || math.IsNaN(s.Std) {
		return f(s.Mean)
	}
	return f(s.Mean) + " ± " + f(s.Std)
}

// glueMetricTitle is the display name of a GLUE metric.
func glueMetricTitle(m string) string {
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

// taskTitle is the paper's name of a task.
func taskTitle(t string) string {
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

func lambdaCell(r *tableRow) string {
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

func seedsCell(r *tableRow) string { return strconv.Itoa(len(r.Seeds)) }

// writeMarkdown writes the per-task tables and the best-trade-off summary.
func writeMarkdown(w io.Writer, t *Tables) error {
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
	if len(t.Missing) > 0 {
		fmt.Fprintf(&b, "Partial sweep: %s of its sweep.json without report.json, left out: %s.\n", plural(len(t.Missing), "cell"), MissingList(t.Missing))
	}
	b.WriteString("Utility: metric x 100 on each run's utility split (dev for the GLUE tasks, test for lid); mean ± std over seeds (sample std).\n\n")
	b.WriteString(whichIsWhich)
	b.WriteString("\n\n")
	for _, tt := range t.Tasks {
		var ms []string
		for _, m := range tt.Metrics {
			ms = append(ms, glueMetricTitle(m))
		}
		fmt.Fprintf(&b, "### %s (%s)\n\n", taskTitle(tt.Task), strings.Join(ms, " / "))
		mdTable(&b, t, tt, tt.Rows)
		if len(tt.Grid) > 0 {
			fmt.Fprintf(&b, "C_mu grid (nvdp-clipped; selection on dev %s):\n\n", glueMetricTitle(tt.Selection))
			mdTable(&b, t, tt, tt.Grid)
		}
		if s := tt.CMu; s != nil {
			fmt.Fprintf(&b, "C_mu selection (lambda %s, %s, tolerance %g): C_mu = %g. %s\n\n", sweep.FormatLambda(s.Lambda),
				glueMetricTitle(s.Metric), s.Tolerance, s.CMu, s.Reason)
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
					mdRow(&b, append([]string{taskTitle(tt.Task), glueMetricTitle(metric), bst.Group, lambdaCell(bst.Row),
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
	var rows []*tableRow
	for _, tt := range t.Tasks {
		rows = append(append(rows, tt.Rows...), tt.Grid...)
	}
	return certHeadersOf(rows)
}

// certShared is the Renyi order and delta every certified row of rows
// shares (NaN where they differ or no row is certified).
func certShared(rows []*tableRow) (order, delta float64) {
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
func certHeadersOf(rows []*tableRow) (rd, eps string) {
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
func certCells(c *certStats) []string {
	if c == nil {
		return []string{"–", "–"}
	}
	// The seeds of a row share the clip constants: one value, shown alone.
	f := func(st stat, fm func(float64) string) string {
		if st.Std == 0 {
			return fm(st.Mean)
		}
		return fmtStat(st, fm)
	}
	return []string{f(c.RD, fmtRD), f(c.Epsilon, fmtBDP)}
}

func mdTable(b *strings.Builder, t *Tables, tt *taskTable, rows []*tableRow) {
	if len(rows) == 0 {
		return
	}
	modes := t.AuditModes
	hdr := []string{"Model", "λ", "Seeds"}
	for _, m := range tt.Metrics {
		hdr = append(hdr, glueMetricTitle(m))
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

func privCells(p *auditStats) []string {
	if p == nil {
		return []string{"–", "–"}
	}
	return []string{fmtStat(p.BDP, fmtBDP), withInvalid(fmtStat(p.RDMax, fmtRD)+" / "+fmtStat(p.RDMean, fmtRD), p)}
}

// withInvalid appends the count of invalid pairs to an RD cell: its numbers
// are then over the finite pairs only, and the worst case is unbounded.
func withInvalid(rd string, p *auditStats) string {
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

// writeCSV writes the tables in long format, one line per row, metric and
// audit mode. The baseline has empty privacy columns, and C_mu grid rows have
// c_mu_grid true. Numbers are raw, so utility is not multiplied by 100.
//
// The bdp_* columns, an estimate, and the rd_* columns, empirical over the
// audited pairs, are the audit's. The certified_* and *_certified_* columns
// are the row's certified guarantee, the clipping's guarantee for every pair
// of inputs; they are the same on each of its lines, and empty without
// certified data.
//
// The last columns are the frontier's, from taskTable.Frontier:
// target_epsilon, empty for none; calibrated_constant and its value, C_mu or
// C for gaussian; the wall time; the task's chance level; and
// pareto_certified, true or false for the frontier's private rows that are
// drawn and empty otherwise.
//
// With learned attacks, Tables.Learned, the learnedCSVHeader columns follow,
// empty on those lines, and each task's lines are followed by one line per
// learned point. Such a line has the attack, property, seed, attacker,
// metric, the score on the release with its interval, the encoder-output
// reference, the shuffled and majority chance levels, the certified bound and
// the report file. Its task, variant, epsilon_certified_mean, the certified
// epsilon of the attacked model, and target_epsilon are set, and its other
// columns are empty.
func writeCSV(w io.Writer, t *Tables) error {
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

// tablesCSVHeader is the header of writeCSV's columns of the tables' rows.
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
func frontierCSV(tt *taskTable) (pareto map[*tableRow]string, chance string) {
	pareto = map[*tableRow]string{}
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
func rowCSV(r *tableRow, metrics, modes []string, chance, pareto string) [][]string {
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
func rowCSVTail(r *tableRow, chance, pareto string) []string {
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

// writeJSON writes the tables as one JSON object, with non-finite numbers as
// jsonfloat strings, "NaN" and "Infinity".
func writeJSON(w io.Writer, t *Tables) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(t)
}
