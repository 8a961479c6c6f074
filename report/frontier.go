package report

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/sweep"
)

// frontierEntry is one line of a task's certified privacy-utility frontier: a
// private row (variant, training mode, target epsilon, lambda) over its
// seeds, or the non-private baseline. Its numbers come from the tableRow; they
// are labelled as what they are: Certified is the guarantee of the release
// (every pair of inputs), Empirical the audit of the audited texts (RD max
// and the BDP estimate: not guarantees).
type frontierEntry struct {
	// Series is the curve the row belongs to: variantTitle of the variant
	// (" [reference]" for reference training).
	Series        string  `json:"series"`
	Variant       string  `json:"variant"`
	Mode          string  `json:"mode"`
	TargetEpsilon float64 `json:"target_epsilon,omitempty"` // 0: none
	Lambda        float64 `json:"lambda"`
	Seeds         int     `json:"seeds"`
	// Utility is the task's selection metric (raw, not x 100).
	Utility   stat       `json:"utility"`
	Certified *certStats `json:"certified,omitempty"`
	// Constant is the constant that sets the row's privacy (calibrated to
	// TargetEpsilon when it is > 0): C_mu or the gaussian radius C.
	Constant *calibratedConstant `json:"calibrated_constant,omitempty"`
	// Empirical is the row's audit in certFrontier.AuditMode (nil: not audited).
	Empirical   *auditStats `json:"empirical,omitempty"`
	WallSeconds *stat       `json:"wall_seconds,omitempty"`
	// Pareto marks the rows on their series' certified Pareto front
	// (paretoFront of (certified epsilon, mean utility) over the shown rows).
	Pareto bool `json:"pareto_certified"`
	// Shown is whether the row is on the frontier plot: a finite certified
	// epsilon > 0 and a utility (else it is named in certFrontier.NotShown).
	Shown bool      `json:"shown"`
	Row   *tableRow `json:"-"`
}

// Label names the row in notes: series, target epsilon, lambda and, for a
// row without a target, its constant ("NVDP-Clipped target ε=4 λ=1e-2",
// "NVDP λ=1e-2").
func (fr *frontierEntry) Label() string {
	s := fr.Series
	if fr.TargetEpsilon > 0 {
		s += fmt.Sprintf(" target ε=%g", fr.TargetEpsilon)
	} else if fr.Constant != nil {
		s += fmt.Sprintf(" %s=%g", fr.Constant.Name, fr.Constant.Value)
	}
	if hasLambda(fr.Variant, fr.Lambda) {
		s += " λ=" + sweep.FormatLambda(fr.Lambda)
	}
	return s
}

// certFrontier is a task's certified privacy-utility frontier: the selection
// metric against the certified epsilon, per private variant (Series), with
// the empirical audit of the same rows, the non-private baseline and the
// chance level.
type certFrontier struct {
	Task   string `json:"task"`
	Metric string `json:"metric"` // the selection metric
	// AuditMode is the audit the empirical numbers come from: principled
	// when the rows carry it (the first of Tables.AuditModes they carry).
	AuditMode string `json:"audit_mode,omitempty"`
	// UtilitySplit is the split of the utility axis (taskTable.UtilitySplit).
	UtilitySplit string `json:"utility_split"`
	// EmpiricalDelta is the delta of the BDP estimates (NaN: they differ).
	EmpiricalDelta jsonfloat.Float `json:"empirical_delta"`
	// Series are the private variants in row order.
	Series []string `json:"series"`
	// Rows are the private rows with a certified block (finite or not), in
	// table order.
	Rows     []*frontierEntry `json:"rows"`
	Baseline *frontierEntry   `json:"baseline,omitempty"`
	// Chance is the selection metric of the majority-class predictor (0
	// for correlations) from the cells' report.json collapse; NaN ("NaN")
	// when no cell has it.
	Chance jsonfloat.Float `json:"chance"`
	// NotShown names the rows left out of the plot and why; InfiniteCells
	// counts the cells among them whose certified epsilon is +Inf.
	NotShown      []string `json:"not_shown,omitempty"`
	InfiniteCells int      `json:"infinite_cells"`
	// EmpiricalNotShown names the shown rows whose BDP estimate is not
	// drawn (infinite: invalid pairs; undefined; not audited).
	EmpiricalNotShown []string `json:"empirical_not_shown,omitempty"`
	// Reference is what one release at each certified epsilon allows on a
	// binary task (nil otherwise; referenceNote says why).
	Reference     *referenceCurve `json:"reference,omitempty"`
	ReferenceNote string          `json:"reference_note,omitempty"`
}

// buildFrontier is the frontier of tt (grid rows left out); nil when no
// private row carries a certified block. modes are the tables' audit modes.
func buildFrontier(tt *taskTable, modes []string) *certFrontier {
	f := &certFrontier{Task: tt.Task, Metric: tt.Selection, UtilitySplit: tt.UtilitySplit, EmpiricalDelta: jsonfloat.Float(math.NaN())}
	var rows []*tableRow
	var chance []float64
	for _, r := range tt.Rows {
		for _, c := range r.Cells {
			if c.ChanceMetric == tt.Selection {
				chance = append(chance, c.Chance)
			}
		}
		switch {
		case r.Baseline():
			f.Baseline = frontierRow(r, tt.Selection, "")
		case r.Certified != nil:
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	f.Chance = jsonfloat.Float(newStat(chance).Mean)
	for _, m := range modes {
		if slices.ContainsFunc(rows, func(r *tableRow) bool { return r.Privacy[m] != nil }) {
			f.AuditMode = m
			break
		}
	}
	f.EmpiricalDelta = empiricalDelta(rows, f.AuditMode)
	pts := map[string][]tradeoffPoint{}
	for _, r := range rows {
		fr := frontierRow(r, tt.Selection, f.AuditMode)
		f.Rows = append(f.Rows, fr)
		if !slices.Contains(f.Series, fr.Series) {
			f.Series = append(f.Series, fr.Series)
		}
		if f.place(fr) {
			pts[fr.Series] = append(pts[fr.Series], tradeoffPoint{X: fr.Certified.Epsilon.Mean, Y: 100 * fr.Utility.Mean, Group: fr.Series,
				Lambda: fr.Lambda, Row: r})
		}
	}
	f.markPareto(pts)
	_, delta := certShared(rows)
	if f.Reference = buildReference(f, delta); f.Reference == nil {
		f.ReferenceNote = referenceNote(f.Task, f.Metric)
		if f.ReferenceNote == "" {
			f.ReferenceNote = "no reference: the rows' deltas differ, or the chance level or a shown row is missing"
		}
	}
	return f
}

// empiricalDelta is the delta of the rows' audits in mode (NaN: they
// differ, or none).
func empiricalDelta(rows []*tableRow, mode string) jsonfloat.Float {
	delta, first := jsonfloat.Float(math.NaN()), true
	for _, r := range rows {
		for _, c := range r.Cells {
			if a := c.Audits[mode]; a != nil {
				if first {
					delta, first = jsonfloat.Float(a.Delta), false
				} else if float64(delta) != a.Delta {
					delta = jsonfloat.Float(math.NaN())
				}
			}
		}
	}
	return delta
}

// place decides whether fr is shown on the plot (Shown; a finite certified
// epsilon > 0 and a utility) and reports it; a row not shown is named in
// NotShown (its cells with an infinite certified epsilon counted), a shown
// row without a drawable BDP estimate in EmpiricalNotShown.
func (f *certFrontier) place(fr *frontierEntry) bool {
	x, y := fr.Certified.Epsilon.Mean, fr.Utility.Mean
	switch {
	case math.IsInf(x, 1):
		n := 0
		for _, c := range fr.Row.Cells {
			if c.Certified != nil && math.IsInf(c.Certified.Epsilon, 1) {
				n++
			}
		}
		f.InfiniteCells += n
		why := ""
		if fr.Certified.Reason != "" {
			why = ": " + fr.Certified.Reason
		}
		f.NotShown = append(f.NotShown, fmt.Sprintf("%s: certified ε infinite (%s%s)", fr.Label(), plural(n, "cell"), why))
	case !(x > 0):
		f.NotShown = append(f.NotShown, fmt.Sprintf("%s: no certified ε > 0 (%s)", fr.Label(), fmtBDP(x)))
	case math.IsNaN(y) || math.IsInf(y, 0):
		f.NotShown = append(f.NotShown, fr.Label()+": no "+glueMetricTitle(f.Metric))
	default:
		fr.Shown = true
		if ex := empiricalX(fr); !(ex > 0) || math.IsInf(ex, 0) {
			why := "BDP estimate " + fmtBDP(ex)
			if fr.Empirical == nil {
				why = "not audited (" + f.AuditMode + ")"
			} else if fr.Empirical.InvalidPairs > 0 {
				why = fmt.Sprintf("%d invalid pairs", fr.Empirical.InvalidPairs)
			}
			f.EmpiricalNotShown = append(f.EmpiricalNotShown, fr.Label()+": "+why)
		}
	}
	return fr.Shown
}

// markPareto marks the rows on their series' certified Pareto front (pts:
// the shown points by series).
func (f *certFrontier) markPareto(pts map[string][]tradeoffPoint) {
	for _, s := range f.Series {
		for _, p := range paretoFront(pts[s]) {
			for _, fr := range f.Rows {
				if fr.Row == p.Row {
					fr.Pareto = true
				}
			}
		}
	}
}

func frontierRow(r *tableRow, metric, mode string) *frontierEntry {
	s := variantTitle(r.Variant)
	if r.Mode == "reference" {
		s += " [reference]"
	}
	fr := &frontierEntry{Series: s, Variant: r.Variant, Mode: r.Mode, TargetEpsilon: r.TargetEpsilon, Lambda: r.Lambda,
		Seeds: len(r.Seeds), Utility: r.Utility[metric], Certified: r.Certified, Constant: rowConstant(r),
		WallSeconds: r.WallSeconds, Row: r}
	if mode != "" {
		fr.Empirical = r.Privacy[mode]
	}
	return fr
}

// empiricalX is the x of a row's empirical marker: its mean BDP estimate
// (+Inf with invalid pairs, NaN when not audited).
func empiricalX(fr *frontierEntry) float64 {
	if fr.Empirical == nil {
		return math.NaN()
	}
	return privacyValue(fr.Empirical, "bdp_epsilon")
}

// infiniteNote counts the cells left out for an infinite certified epsilon
// (" (2 cells with certified ε = inf)"; "" when none).
func infiniteNote(f *certFrontier) string {
	if f.InfiniteCells == 0 {
		return ""
	}
	return " (" + plural(f.InfiniteCells, "cell") + " with certified ε = inf)"
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// chanceWhat says what the chance level of a metric is.
func chanceWhat(metric string) string {
	if metric == glue.MetricPearson || metric == glue.MetricSpearman {
		return "constant predictor"
	}
	return "majority class"
}

// seriesStyle is the colour index of a series (the same in every task's
// figure): the variant's rank (baseline 0, the red of the baseline line),
// shifted for reference training.
func seriesStyle(fr *frontierEntry) int {
	i := variantRank(fr.Variant)
	if fr.Mode == "reference" {
		i += 5
	}
	return i
}

// frontierGlyphs are the filled (certified) and hollow (empirical) marker
// of series style i.
func frontierGlyphs(i int) (filled, hollow draw.GlyphDrawer) {
	switch i % 3 {
	case 1:
		return draw.BoxGlyph{}, draw.SquareGlyph{}
	case 2:
		return draw.PyramidGlyph{}, draw.TriangleGlyph{}
	}
	return draw.CircleGlyph{}, draw.RingGlyph{}
}

// yErrPoints are points with symmetric y error bars.
type yErrPoints struct {
	plotter.XYs
	plotter.YErrors
}

// frontierSeries is one series of the frontier plot: its certified points
// with error bars (sd over seeds) and their lambda labels (nil: the series
// has one lambda, no labels), the step line of its certified Pareto front
// (nil: fewer than two points on it), its empirical points, and its style.
type frontierSeries struct {
	name   string
	style  int
	cert   yErrPoints
	labels []string
	pareto plotter.XYs
	emp    plotter.XYs
	links  []plotter.XYs // certified point -> empirical point, per row with both
}

// frontierHLine is a horizontal line across the frontier plot.
type frontierHLine struct {
	y     float64
	label string
	style func(*plotter.Line)
}

// frontierFigure is what the frontier plot draws (frontierPlot), as plain
// data.
type frontierFigure struct {
	title, xLabel, yLabel string
	series                []frontierSeries // the series with a shown row
	links                 []plotter.XYs    // certified point -> empirical point
	reference             *referenceCurve
	hlines                []frontierHLine // baseline and chance
	notes                 []string        // the legend's lines on what is not shown
	x                     [2]float64      // the x axis' range
	ylo, yhi              float64         // the data's y range (error bars and lines included)
	entries               int             // legend entries, the reference's left out
}

// frontierPlot draws f (see plotFrontier); nil when no row is shown.
func frontierPlot(f *certFrontier) (*plot.Plot, error) {
	d := frontierData(f)
	if d == nil {
		return nil, nil
	}
	return drawFrontier(d)
}

// frontierData is the data of f's plot; nil when no row is shown.
func frontierData(f *certFrontier) *frontierFigure {
	d := &frontierFigure{ylo: math.Inf(1), yhi: math.Inf(-1)}
	xlo, xhi := math.Inf(1), math.Inf(-1)
	for _, s := range f.Series {
		fs := frontierSeriesOf(f, s)
		if len(fs.cert.XYs) == 0 {
			continue
		}
		d.series = append(d.series, fs)
		d.entries++
		if len(fs.emp) > 0 {
			d.entries++
		}
		for i, c := range fs.cert.XYs {
			xlo, xhi = min(xlo, c.X), max(xhi, c.X)
			d.ylo, d.yhi = min(d.ylo, c.Y-fs.cert.YErrors[i].Low), max(d.yhi, c.Y+fs.cert.YErrors[i].High)
		}
		for _, e := range fs.emp {
			xlo, xhi = min(xlo, e.X), max(xhi, e.X)
		}
		d.links = append(d.links, fs.links...)
	}
	if len(d.series) == 0 {
		return nil
	}
	d.title = fmt.Sprintf("%s: certified privacy-utility frontier", taskTitle(f.Task))
	delta := "δ"
	if _, dl := certShared(frontierRows(f)); !math.IsNaN(dl) {
		delta = "δ=" + sweep.FormatLambda(dl)
	}
	d.xLabel, d.yLabel = "ε ("+delta+"), log scale", f.UtilitySplit+" "+glueMetricTitle(f.Metric)+" (×100)"
	d.reference = f.Reference
	// At least one decade boundary on each side, for the log ticks' labels.
	d.x = [2]float64{min(xlo/1.5, math.Pow(10, math.Floor(math.Log10(xlo)))), max(xhi*1.5, math.Pow(10, math.Ceil(math.Log10(xhi))))}
	d.hlines = frontierHLines(f)
	for _, h := range d.hlines {
		d.ylo, d.yhi = min(d.ylo, h.y), max(d.yhi, h.y)
	}
	d.entries += len(d.hlines)
	d.notes = frontierNotes(f)
	d.entries += len(d.notes)
	return d
}

// frontierSeriesOf is series s of f: the certified and empirical points of
// its shown rows, in row order.
func frontierSeriesOf(f *certFrontier, s string) frontierSeries {
	fs := frontierSeries{name: s}
	var pts []tradeoffPoint
	lambdas := map[float64]bool{}
	for _, fr := range f.Rows {
		if fr.Series != s || !fr.Shown {
			continue
		}
		fs.style = seriesStyle(fr)
		x, y := fr.Certified.Epsilon.Mean, 100*fr.Utility.Mean
		sd := 100 * fr.Utility.Std
		if math.IsNaN(sd) {
			sd = 0
		}
		fs.cert.XYs = append(fs.cert.XYs, plotter.XY{X: x, Y: y})
		fs.cert.YErrors = append(fs.cert.YErrors, struct{ Low, High float64 }{sd, sd})
		pts = append(pts, tradeoffPoint{X: x, Y: y})
		fs.labels = append(fs.labels, "λ="+sweep.FormatLambda(fr.Lambda))
		lambdas[fr.Lambda] = true
		if ex := empiricalX(fr); ex > 0 && !math.IsInf(ex, 0) {
			fs.emp = append(fs.emp, plotter.XY{X: ex, Y: y})
			fs.links = append(fs.links, plotter.XYs{{X: x, Y: y}, {X: ex, Y: y}})
		}
	}
	if len(lambdas) < 2 {
		fs.labels = nil
	}
	if front := paretoFront(pts); len(front) > 1 {
		fs.pareto = stepLine(front)
	}
	return fs
}

// frontierHLines are the frontier plot's horizontal lines: the non-private
// baseline (dashed) and the chance level (dotted), when known.
func frontierHLines(f *certFrontier) []frontierHLine {
	var hl []frontierHLine
	if b := f.Baseline; b != nil && !math.IsNaN(b.Utility.Mean) {
		hl = append(hl, frontierHLine{100 * b.Utility.Mean, fmt.Sprintf("non-private baseline (%s, mean over %s)", fmtUtil(b.Utility.Mean),
			plural(b.Utility.N, "seed")),
			func(l *plotter.Line) {
				l.Color, l.Width, l.Dashes = color.RGBA{R: 200, A: 255}, vg.Points(1.5), []vg.Length{vg.Points(6), vg.Points(3)}
			}})
	}
	if c := float64(f.Chance); !math.IsNaN(c) {
		hl = append(hl, frontierHLine{100 * c, fmt.Sprintf("chance level (%s): %s", chanceWhat(f.Metric), fmtUtil(c)),
			func(l *plotter.Line) {
				l.Color, l.Width, l.Dashes = color.Gray{Y: 60}, vg.Points(1), []vg.Length{vg.Points(1), vg.Points(2)}
			}})
	}
	return hl
}

// frontierNotes are the frontier legend's lines on the rows not shown and
// the empirical estimates not drawn.
func frontierNotes(f *certFrontier) []string {
	var notes []string
	if len(f.NotShown) > 0 {
		notes = append(notes, "not shown"+infiniteNote(f)+":")
		for _, n := range f.NotShown {
			notes = append(notes, "  "+n)
		}
	}
	if len(f.EmpiricalNotShown) > 0 {
		notes = append(notes, "empirical estimate not shown:")
		for _, n := range f.EmpiricalNotShown {
			notes = append(notes, "  "+n)
		}
	}
	return notes
}

// drawFrontier draws d: the series, the reference's curves, the links from
// certified to empirical points, the baseline and chance lines and the
// legend's notes.
func drawFrontier(d *frontierFigure) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = d.title, d.xLabel, d.yLabel
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Add(plotter.NewGrid())
	for _, s := range d.series {
		if err := addFrontierSeries(p, s); err != nil {
			return nil, err
		}
	}
	entries := d.entries
	if r := d.reference; r != nil {
		n, err := referenceLines(p, r) // over the points' x range (p's, so far)
		if err != nil {
			return nil, err
		}
		entries += n
	}
	for _, xy := range d.links {
		if _, err := addLine(p, xy, func(l *plotter.Line) { l.Color, l.Width = color.Gray{Y: 170}, vg.Points(0.5) }); err != nil {
			return nil, err
		}
	}
	p.X.Min, p.X.Max = d.x[0], d.x[1]
	for _, h := range d.hlines {
		l, err := addLine(p, plotter.XYs{{X: p.X.Min, Y: h.y}, {X: p.X.Max, Y: h.y}}, h.style)
		if err != nil {
			return nil, err
		}
		p.Legend.Add(h.label, l)
	}
	for _, n := range d.notes {
		p.Legend.Add(n)
	}
	p.Y.Min, p.Y.Max = legendRoom(d.ylo, d.yhi, entries)
	return p, nil
}

// addFrontierSeries draws a series: its certified points (filled markers)
// with error bars, its Pareto front, the lambda labels and its empirical
// points (hollow markers), with their legend entries.
func addFrontierSeries(p *plot.Plot, s frontierSeries) error {
	col := plotutil.Color(s.style)
	filled, hollow := frontierGlyphs(s.style)
	sc, err := plotter.NewScatter(s.cert.XYs)
	if err != nil {
		return err
	}
	sc.GlyphStyle.Color, sc.GlyphStyle.Shape, sc.GlyphStyle.Radius = col, filled, vg.Points(4)
	eb, err := plotter.NewYErrorBars(s.cert)
	if err != nil {
		return err
	}
	eb.LineStyle.Color = col
	p.Add(eb, sc)
	thumbs := []plot.Thumbnailer{sc}
	what := "certified ε (metric: mean ± sd over seeds)"
	if s.pareto != nil {
		l, err := addLine(p, s.pareto, func(l *plotter.Line) { l.Color, l.Width = col, vg.Points(1.2) })
		if err != nil {
			return err
		}
		thumbs = append(thumbs, l)
		what += "; Pareto front"
	}
	p.Legend.Add(s.name+": "+what, thumbs...)
	if s.labels != nil {
		l, err := pointLabels(s.cert.XYs, s.labels)
		if err != nil {
			return err
		}
		p.Add(l)
	}
	return addScatter(p, s.emp, col, hollow, s.name+": empirical BDP estimate (not a guarantee)")
}

// frontierRows are the Rows of f's private rows.
func frontierRows(f *certFrontier) []*tableRow {
	var rs []*tableRow
	for _, fr := range f.Rows {
		rs = append(rs, fr.Row)
	}
	return rs
}

// plotFrontier draws a task's certified privacy-utility frontier (certFrontier):
// y the mean dev selection metric x 100 with error bars (sample sd over
// seeds), x the certified epsilon on a log axis; per private variant one
// colour, a filled marker per row (target epsilon, lambda) and its certified
// Pareto front as a step line; the same rows at x = their mean BDP eps_mu
// estimate as hollow markers of the variant's colour ("empirical BDP
// estimate (not a guarantee)"), joined to the certified point by a thin grey
// line; the non-private baseline (mean over seeds) as a dashed and the
// chance level (when the reports carry it) as a dotted horizontal line. Rows
// with an infinite certified epsilon are not drawn: the legend names them
// and counts their cells. Writes path.png and path.svg; returns the files
// (none when no row can be drawn).
func plotFrontier(f *certFrontier, path string) ([]string, error) {
	if f == nil {
		return nil, nil
	}
	p, err := frontierPlot(f)
	if err != nil || p == nil {
		return nil, err
	}
	return saveAll(p, figW, figH, path)
}

// frontierMarkdown writes tt's frontier table (nothing without a frontier).
func frontierMarkdown(b *strings.Builder, tt *taskTable) {
	f := tt.Frontier
	if f == nil {
		return
	}
	fmt.Fprintf(b, "Certified privacy-utility frontier (%s %s; figure %s_frontier_certified): **certified** ε and RD are the "+
		"guarantee of one release under the row's constant (every pair of inputs); RD max and the BDP ε_μ estimate are **empirical** "+
		"(%s audit of the audited texts), not guarantees. Pareto: on its model's certified front (no row of the model with a "+
		"certified ε as small has a higher mean).\n\n", f.UtilitySplit, glueMetricTitle(f.Metric), f.Task, f.AuditMode)
	rs := frontierRows(f)
	hdr := frontierMDHeader(f, rs)
	mdRow(b, hdr)
	sep := []string{"---", "---:"}
	for len(sep) < len(hdr) {
		sep = append(sep, "---:")
	}
	mdRow(b, sep)
	_, sharedDelta := certShared(rs)
	if f.Baseline != nil {
		mdRow(b, frontierMDRow(f, f.Baseline, sharedDelta))
	}
	for _, fr := range f.Rows {
		mdRow(b, frontierMDRow(f, fr, sharedDelta))
	}
	b.WriteString("\n")
	frontierMDNotes(b, f)
	b.WriteString("\n")
}

// frontierMDHeader is the header of f's table (rs: its private rows).
func frontierMDHeader(f *certFrontier, rs []*tableRow) []string {
	cRD, cEps := certHeadersOf(rs)
	bdpHdr := "BDP ε_μ estimate, empirical (" + f.AuditMode
	if d := float64(f.EmpiricalDelta); !math.IsNaN(d) {
		bdpHdr += ", δ=" + sweep.FormatLambda(d)
	}
	bdpHdr += ")"
	return []string{"Model", "Target ε", "λ", "Seeds", glueMetricTitle(f.Metric), cEps, cRD, "Calibrated constant",
		"RD max, empirical (" + f.AuditMode + ")", bdpHdr, "Wall time, s", "Pareto (certified)",
		"Achievable at the certified ε (reference)", "Bound at the certified ε"}
}

// frontierMDRow is the line of fr in f's table (sharedDelta: the rows'
// certified delta, NaN when they differ and each cell says its own).
func frontierMDRow(f *certFrontier, fr *frontierEntry, sharedDelta float64) []string {
	target, lambda, constant, pareto := "–", "–", "–", "–"
	if fr.TargetEpsilon > 0 {
		target = strconv.FormatFloat(fr.TargetEpsilon, 'g', -1, 64)
	}
	if hasLambda(fr.Variant, fr.Lambda) {
		lambda = sweep.FormatLambda(fr.Lambda)
	}
	if fr.Variant != "baseline" {
		pareto = "no"
		if fr.Pareto {
			pareto = "yes"
		}
		if !fr.Shown {
			pareto = "not shown"
		}
	}
	if c := fr.Constant; c != nil {
		constant = c.Name + "=" + strconv.FormatFloat(c.Value, 'g', 4, 64)
	}
	cert := certCells(fr.Certified)
	if fr.Certified != nil && math.IsNaN(sharedDelta) {
		cert[1] += " (δ=" + sweep.FormatLambda(fr.Certified.Delta) + ")"
	}
	rd, bdp, wall := "–", "–", "–"
	if e := fr.Empirical; e != nil {
		rd, bdp = withInvalid(fmtStat(e.RDMax, fmtRD), e), fmtStat(e.BDP, fmtBDP)
	}
	if w := fr.WallSeconds; w != nil {
		wall = fmtStat(*w, fmtRD) // three significant digits, integers from 100 s up
	}
	achievable, bound := "–", "–"
	if r := f.Reference; r != nil && fr.Shown {
		if pt, err := r.At(fr.Certified.Epsilon.Mean); err == nil {
			achievable, bound = fmtUtil(float64(pt.Achievable)), fmtUtil(pt.Bound)
		}
	}
	return []string{fr.Series, target, lambda, strconv.Itoa(fr.Seeds), fmtStat(fr.Utility, fmtUtil), cert[1], cert[0],
		constant, rd, bdp, wall, pareto, achievable, bound}
}

// frontierMDNotes writes the notes under f's table: the chance level, the
// rows not drawn, the reference.
func frontierMDNotes(b *strings.Builder, f *certFrontier) {
	if c := float64(f.Chance); !math.IsNaN(c) {
		fmt.Fprintf(b, "Chance level (%s, report.json collapse): %s.\n", chanceWhat(f.Metric), fmtUtil(c))
	}
	if len(f.NotShown) > 0 {
		fmt.Fprintf(b, "Not on the frontier plot%s: %s.\n", infiniteNote(f), strings.Join(f.NotShown, "; "))
	}
	if len(f.EmpiricalNotShown) > 0 {
		fmt.Fprintf(b, "Empirical BDP estimate not drawn: %s.\n", strings.Join(f.EmpiricalNotShown, "; "))
	}
	if f.Reference != nil {
		b.WriteString("Reference (report.Reference): a Gaussian mechanism of mu = GaussianMechanismMu(ε, δ) writing the non-private " +
			"baseline's decision at opposite ends of the mean ball in every row reaches the achievable accuracy; no release at ε " +
			"exceeds the bound (total variation). The achievable reference is NVDP-Clipped's: a gaussian release's pad rows carry no decision.\n")
	} else if f.ReferenceNote != "" {
		fmt.Fprintf(b, "No reference on the frontier: %s.\n", f.ReferenceNote)
	}
}

// referenceLines draws the reference's achievable and bound curves on p
// and returns the legend entries added.
func referenceLines(p *plot.Plot, r *referenceCurve) (int, error) {
	var ach, bound plotter.XYs
	for _, pt := range r.Points {
		if pt.Epsilon < p.X.Min || pt.Epsilon > p.X.Max {
			continue
		}
		bound = append(bound, plotter.XY{X: pt.Epsilon, Y: 100 * pt.Bound})
		if a := float64(pt.Achievable); !math.IsNaN(a) {
			ach = append(ach, plotter.XY{X: pt.Epsilon, Y: 100 * a})
		}
	}
	n := 0
	for _, c := range []struct {
		xy     plotter.XYs
		label  string
		dashes []vg.Length
	}{{ach, "achievable reference: the baseline's decision in every row (Gaussian, μ at ε)", []vg.Length{vg.Points(4), vg.Points(2)}},
		{bound, "bound: no release at ε decides better (total variation)", []vg.Length{vg.Points(1), vg.Points(1.5)}}} {
		if len(c.xy) < 2 {
			continue
		}
		l, err := plotter.NewLine(c.xy)
		if err != nil {
			return n, err
		}
		l.Color, l.Width, l.Dashes = color.RGBA{B: 160, G: 90, A: 255}, vg.Points(1.2), c.dashes
		p.Add(l)
		p.Legend.Add(c.label, l)
		n++
	}
	return n, nil
}
