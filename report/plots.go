package report

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/sweep"
	"github.com/nvdp-project/nvdp/train"
)

// plotFormats are the image formats every figure is written in.
var plotFormats = []string{"png", "svg"}

// Figure sizes.
const (
	figW = 16 * vg.Centimeter
	figH = 11 * vg.Centimeter
)

// tradeoffPoint is one point of a privacy-utility scatter: a row's mean privacy
// (x) and mean selection metric x 100 (y).
type tradeoffPoint struct {
	X, Y   float64
	Group  string
	Lambda float64
	Row    *tableRow // the row the point is drawn for (nil when not given)
}

// paretoFront returns the points not dominated by another (lower or equal x
// and higher or equal y, one of them strictly), sorted by x: the best
// utility reachable at each privacy level. Non-finite points are ignored.
func paretoFront(pts []tradeoffPoint) []tradeoffPoint {
	var ps []tradeoffPoint
	for _, p := range pts {
		if !math.IsNaN(p.X) && !math.IsInf(p.X, 0) && !math.IsNaN(p.Y) && !math.IsInf(p.Y, 0) {
			ps = append(ps, p)
		}
	}
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].X != ps[j].X {
			return ps[i].X < ps[j].X
		}
		return ps[i].Y > ps[j].Y
	})
	var front []tradeoffPoint
	best := math.Inf(-1)
	for _, p := range ps {
		if p.Y > best {
			front = append(front, p)
			best = p.Y
		}
	}
	return front
}

// stepLine is the step line of a Pareto front (sorted by x, as paretoFront
// returns it): each point's utility holds until the next point's x.
func stepLine(front []tradeoffPoint) plotter.XYs {
	var xy plotter.XYs
	for i, f := range front {
		if i > 0 {
			xy = append(xy, plotter.XY{X: f.X, Y: front[i-1].Y})
		}
		xy = append(xy, plotter.XY{X: f.X, Y: f.Y})
	}
	return xy
}

// legendRoom is the y range of a plot whose data span [ylo, yhi] and whose
// legend, in a top corner, has the given number of entries: the entries
// beyond the first four take ~6% of the height each.
func legendRoom(ylo, yhi float64, entries int) (lo, hi float64) {
	dy := max(yhi-ylo, 1)
	return ylo - 0.08*dy, yhi + max(0.5, 0.5+0.12*float64(entries-4))*dy
}

// saveAll writes p as path.<format> for every plotFormats entry.
func saveAll(p *plot.Plot, w, h vg.Length, path string) ([]string, error) {
	var out []string
	for _, f := range plotFormats {
		file := path + "." + f
		if err := p.Save(w, h, file); err != nil {
			return out, fmt.Errorf("plot %s: %w", file, err)
		}
		out = append(out, file)
	}
	return out, nil
}

// saveTiles draws plots side by side (one row) and writes every format.
func saveTiles(ps []*plot.Plot, w, h vg.Length, path string) ([]string, error) {
	return saveGrid([][]*plot.Plot{ps}, w, h, path)
}

// saveGrid draws plots in a grid (rows of equal length; nil leaves a tile
// empty) and writes every format.
func saveGrid(ps [][]*plot.Plot, w, h vg.Length, path string) ([]string, error) {
	var out []string
	for _, f := range plotFormats {
		file := path + "." + f
		var c vg.CanvasWriterTo
		switch f {
		case "png":
			c = vgimg.PngCanvas{Canvas: vgimg.New(w, h)}
		case "svg":
			c = vgsvg.New(w, h)
		default:
			return out, fmt.Errorf("plot %s: unsupported format %s", file, f)
		}
		dc := draw.New(c)
		tiles := draw.Tiles{Rows: len(ps), Cols: len(ps[0]), PadX: vg.Millimeter, PadY: vg.Millimeter,
			PadTop: vg.Millimeter, PadBottom: vg.Millimeter, PadLeft: vg.Millimeter, PadRight: vg.Millimeter}
		cs := plot.Align(ps, tiles, dc)
		for i, row := range ps {
			for j, p := range row {
				if p != nil {
					p.Draw(cs[i][j])
				}
			}
		}
		fh, err := os.Create(file)
		if err != nil {
			return out, err
		}
		if _, err := c.WriteTo(fh); err != nil {
			fh.Close()
			return out, fmt.Errorf("plot %s: %w", file, err)
		}
		if err := fh.Close(); err != nil {
			return out, err
		}
		out = append(out, file)
	}
	return out, nil
}

func fileSafe(s string) string {
	r := strings.NewReplacer(" ", "_", "(", "", ")", "", "[", "", "]", "", "=", "", "/", "_", "ε", "eps")
	return strings.ToLower(r.Replace(s))
}

// privacyValue is x of a scatter: "rd_max" or "bdp_epsilon".
//
// A row with invalid pairs has no finite worst case, whatever the maximum over
// its finite pairs is: +Inf on either axis (it is named in the legend instead
// of being drawn at a finite x).
func privacyValue(p *auditStats, x string) float64 {
	if p.InvalidPairs > 0 {
		return math.Inf(1)
	}
	if x == "bdp_epsilon" {
		return p.BDP.Mean
	}
	return p.RDMax.Mean
}

// certifiedValue is x of a row's certified point: the certified RD at the
// audit order ("rd_max") or the certified BDP ("bdp_epsilon"); +Inf for an
// unbounded clipping.
func certifiedValue(c *certStats, x string) float64 {
	if x == "bdp_epsilon" {
		return c.BDP.Mean
	}
	return c.RD.Mean
}

// showCertified reports whether a trade-off plot in audit mode shows the
// certified guarantee: principled audits only (Eq. rdp summed over every
// component and dimension, the quantity the certificate bounds; the
// reference audit's per-component averages are another scale).
func showCertified(mode string) bool { return mode == string(privacy.ModePrincipled) }

func xLabel(x, mode string) string {
	if x == "bdp_epsilon" {
		if showCertified(mode) {
			return "BDP ε_μ: " + mode + " audit estimate / certified"
		}
		return "BDP ε_μ estimate (" + mode + " audit)"
	}
	if showCertified(mode) {
		return "RD, nats: " + mode + " audit max (empirical) / certified"
	}
	return "RD max, nats (" + mode + " audit, empirical)"
}

// auditedSplit is the split the rows' audits ran on ("dev" when unknown).
func auditedSplit(tt *taskTable, mode string) string {
	for _, r := range tt.Rows {
		for _, c := range r.Cells {
			if a := c.Audits[mode]; a != nil && a.Split != "" {
				return a.Split
			}
		}
	}
	return "dev"
}

// plotTradeoff draws a task's privacy-utility scatter in audit mode `mode`:
// x the mean rd_max or BDP eps_mu ("rd_max" | "bdp_epsilon"), y the mean dev
// selection metric x 100; one colour and marker per model group, points
// labelled with lambda, the Pareto front over all private models as a dashed
// step line, and the non-private baseline as a horizontal line. In
// principled mode each row with certified data also gets its certified
// guarantee (certified RD at the audit order, or the certified BDP) as a
// cross of the group's colour at the same utility, joined to the audited
// point by a thin line; legends say "empirical audit (<split> pairs)" and
// "certified". The x axis is logarithmic when all x > 0 and max/min > 30.
// Writes path.png and path.svg; returns the files (none when the task has
// no audited row).
func plotTradeoff(tt *taskTable, mode, x, path string) ([]string, error) {
	d := tradeoffData(tt, mode, x)
	if d == nil {
		return nil, nil
	}
	p, err := drawTradeoff(d)
	if err != nil {
		return nil, err
	}
	return saveAll(p, figW, figH, path)
}

// tradeoffGroup is one model group of a trade-off plot: its audited points
// with their lambda labels, its certified points, and its style index
// (colour and marker: the group's index among all groups of the table).
type tradeoffGroup struct {
	name   string
	style  int
	pts    plotter.XYs
	labels []string
	cert   plotter.XYs
}

// tradeoff is what a trade-off plot draws (plotTradeoff), as plain data.
type tradeoff struct {
	title, xLabel, yLabel string
	split                 string          // the audited split, for the legend
	groups                []tradeoffGroup // the groups with audited points, in table order
	all, certAll          []tradeoffPoint // every audited and every certified point
	links                 []plotter.XYs   // audited point -> certified point, per row
	undefined             []string        // rows whose bound is +Inf or undefined (named in the legend)
	certInfinite          []string        // groups with an infinite certified bound
	baseline              float64         // the baseline's utility x 100; NaN: none
	logX                  bool
	x, y                  [2]float64 // the axes' ranges (y with room for the labels and the legend)
}

// tradeoffData is the data of tt's trade-off plot in audit mode `mode`
// against x ("rd_max" | "bdp_epsilon"); nil when no row is audited.
func tradeoffData(tt *taskTable, mode, x string) *tradeoff {
	d := &tradeoff{baseline: math.NaN()}
	var base *tableRow
	for gi, g := range groups(tt) {
		grp := tradeoffGroup{name: g, style: gi}
		for _, r := range tt.Rows {
			switch {
			case r.Group() != g:
			case r.Baseline():
				base = r
			default:
				d.addRow(&grp, r, tt.Selection, mode, x)
			}
		}
		if len(grp.pts) > 0 {
			d.groups = append(d.groups, grp)
		}
	}
	if len(d.all) == 0 {
		return nil
	}
	if base != nil {
		d.baseline = 100 * base.Utility[tt.Selection].Mean
	}
	what := "audit"
	if len(d.certAll) > 0 {
		what = "audit and certified"
	}
	d.title = fmt.Sprintf("%s: privacy-utility trade-off (%s %s)", taskTitle(tt.Task), mode, what)
	d.xLabel, d.yLabel = xLabel(x, mode), tt.UtilitySplit+" "+glueMetricTitle(tt.Selection)+" (×100)"
	d.split = auditedSplit(tt, mode)
	d.x, d.logX = tradeoffXRange(append(slices.Clone(d.all), d.certAll...))
	d.y = d.yRange(len(groups(tt)))
	return d
}

// addRow adds r's audited point (and its certified point, in principled
// mode) to grp, or names it among the undefined ones.
func (d *tradeoff) addRow(grp *tradeoffGroup, r *tableRow, metric, mode, x string) {
	ps := r.Privacy[mode]
	if ps == nil {
		return
	}
	pt := tradeoffPoint{X: privacyValue(ps, x), Y: 100 * r.Utility[metric].Mean, Group: grp.name, Lambda: r.Lambda}
	if math.IsNaN(pt.X) || math.IsInf(pt.X, 0) || math.IsNaN(pt.Y) {
		if !math.IsNaN(pt.Y) {
			d.undefined = append(d.undefined, grp.name+" λ="+sweep.FormatLambda(r.Lambda))
		}
		return
	}
	d.all = append(d.all, pt)
	grp.pts = append(grp.pts, plotter.XY{X: pt.X, Y: pt.Y})
	grp.labels = append(grp.labels, "λ="+sweep.FormatLambda(r.Lambda))
	if r.Certified == nil || !showCertified(mode) {
		return
	}
	switch cx := certifiedValue(r.Certified, x); {
	case math.IsInf(cx, 1):
		if !slices.Contains(d.certInfinite, grp.name) {
			d.certInfinite = append(d.certInfinite, grp.name)
		}
	case !math.IsNaN(cx):
		d.certAll = append(d.certAll, tradeoffPoint{X: cx, Y: pt.Y, Group: grp.name, Lambda: r.Lambda})
		grp.cert = append(grp.cert, plotter.XY{X: cx, Y: pt.Y})
		d.links = append(d.links, plotter.XYs{{X: pt.X, Y: pt.Y}, {X: cx, Y: pt.Y}})
	}
}

// tradeoffXRange is the x range of a trade-off plot over pts, and whether
// it is logarithmic (all x > 0 and max/min > 30).
func tradeoffXRange(pts []tradeoffPoint) (r [2]float64, logX bool) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, pt := range pts {
		lo, hi = min(lo, pt.X), max(hi, pt.X)
	}
	if lo > 0 && hi/lo > 30 {
		return [2]float64{lo / 1.5, hi * 2}, true
	}
	dx := hi - lo
	if dx == 0 {
		dx = math.Max(math.Abs(lo), 1)
	}
	r = [2]float64{lo - 0.08*dx, hi + 0.15*dx}
	if lo >= 0 {
		r[0] = math.Max(0, r[0])
	}
	return r, false
}

// yRange is the y range of d's points and baseline with room for the point
// labels and the legend (ngroups: the table's groups, the legend's size).
func (d *tradeoff) yRange(ngroups int) [2]float64 {
	ylo, yhi := math.Inf(1), math.Inf(-1)
	for _, pt := range d.all {
		ylo, yhi = min(ylo, pt.Y), max(yhi, pt.Y)
	}
	if !math.IsNaN(d.baseline) {
		ylo, yhi = min(ylo, d.baseline), max(yhi, d.baseline)
	}
	entries := 2 + ngroups + len(d.certAll)/max(len(d.certAll), 1)*ngroups
	if len(d.undefined) > 0 {
		entries++
	}
	if len(d.certInfinite) > 0 {
		entries++
	}
	lo, hi := legendRoom(ylo, yhi, entries)
	return [2]float64{lo, hi}
}

// drawTradeoff draws d: per group its audited points, certified crosses
// and lambda labels, the legend's notes, the links, the Pareto front and
// the baseline.
func drawTradeoff(d *tradeoff) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = d.title, d.xLabel, d.yLabel
	p.Legend.Top = true
	p.Legend.Left = false
	p.Add(plotter.NewGrid())
	for _, g := range d.groups {
		if err := addTradeoffGroup(p, g, d.split); err != nil {
			return nil, err
		}
	}
	if len(d.undefined) > 0 {
		p.Legend.Add("not shown, bound infinite: " + strings.Join(d.undefined, ", "))
	}
	if len(d.certInfinite) > 0 {
		p.Legend.Add("not shown, certified bound infinite: " + strings.Join(d.certInfinite, ", "))
	}
	for _, xy := range d.links {
		if _, err := addLine(p, xy, func(l *plotter.Line) { l.Color, l.Width = color.Gray{Y: 170}, vg.Points(0.5) }); err != nil {
			return nil, err
		}
	}
	if d.logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Y.Min, p.Y.Max = d.y[0], d.y[1]
	p.X.Min, p.X.Max = d.x[0], d.x[1]
	if front := paretoFront(d.all); len(front) > 1 {
		l, err := addLine(p, stepLine(front), func(l *plotter.Line) {
			l.Color, l.Dashes = color.Gray{Y: 90}, []vg.Length{vg.Points(4), vg.Points(3)}
		})
		if err != nil {
			return nil, err
		}
		p.Legend.Add("Pareto front (empirical audit)", l)
	}
	if u := d.baseline; !math.IsNaN(u) {
		l, err := addLine(p, plotter.XYs{{X: p.X.Min, Y: u}, {X: p.X.Max, Y: u}}, func(l *plotter.Line) {
			l.Color, l.Dashes, l.Width = color.RGBA{R: 200, A: 255}, []vg.Length{vg.Points(1), vg.Points(2)}, vg.Points(1.5)
		})
		if err != nil {
			return nil, err
		}
		p.Legend.Add("non-private baseline", l)
	}
	return p, nil
}

// addTradeoffGroup draws a group's audited points (its colour and marker),
// its certified points (crosses) and the points' lambda labels.
func addTradeoffGroup(p *plot.Plot, g tradeoffGroup, split string) error {
	if err := addScatter(p, g.pts, plotutil.Color(g.style), plotutil.Shape(g.style), g.name+", empirical audit ("+split+" pairs)"); err != nil {
		return err
	}
	if len(g.cert) > 0 {
		cs, err := plotter.NewScatter(g.cert)
		if err != nil {
			return err
		}
		cs.GlyphStyle.Color = plotutil.Color(g.style)
		cs.GlyphStyle.Shape = draw.CrossGlyph{}
		cs.GlyphStyle.Radius = vg.Points(5)
		p.Add(cs)
		p.Legend.Add(g.name+", certified", cs)
	}
	l, err := pointLabels(g.pts, g.labels)
	if err != nil {
		return err
	}
	p.Add(l)
	return nil
}

// addLine adds the line through xy, styled by style, to p.
func addLine(p *plot.Plot, xy plotter.XYs, style func(*plotter.Line)) (*plotter.Line, error) {
	l, err := plotter.NewLine(xy)
	if err != nil {
		return nil, err
	}
	style(l)
	p.Add(l)
	return l, nil
}

// plotCurves draws the training curves of a task's model group from each
// cell's metrics.jsonl: dev selection metric (x 100) and mean training loss
// per epoch, one line per lambda and seed (colour by lambda). Writes
// path.png and path.svg; returns nil when no cell has a metrics file.
func plotCurves(tt *taskTable, group, path string) ([]string, error) {
	dev, loss := plot.New(), plot.New()
	dev.Title.Text = fmt.Sprintf("%s %s: dev %s", taskTitle(tt.Task), group, glueMetricTitle(tt.Selection))
	dev.X.Label.Text, dev.Y.Label.Text = "epoch", "dev "+glueMetricTitle(tt.Selection)+" (×100)"
	loss.Title.Text = fmt.Sprintf("%s %s: training loss", taskTitle(tt.Task), group)
	loss.X.Label.Text, loss.Y.Label.Text = "epoch", "train loss (task + λ KL, nats)"
	for _, p := range []*plot.Plot{dev, loss} {
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		p.X.Tick.Marker = integerTicks{}
	}
	n, li := 0, -1
	lastLambda := math.NaN()
	for _, r := range tt.Rows {
		if r.Group() != group {
			continue
		}
		if r.Lambda != lastLambda {
			li++
			lastLambda = r.Lambda
		}
		for si, c := range r.Cells {
			h, err := train.ReadMetrics(filepath.Join(c.Dir, train.MetricsFile))
			if err != nil {
				return nil, err
			}
			if len(h) == 0 {
				continue
			}
			var dv, lv plotter.XYs
			for _, e := range h {
				dv = append(dv, plotter.XY{X: float64(e.Epoch), Y: 100 * float64(e.Selection)})
				if v, ok := e.Train["loss"]; ok {
					lv = append(lv, plotter.XY{X: float64(e.Epoch), Y: float64(v)})
				}
			}
			name := fmt.Sprintf("seed %d", c.Seed)
			if !r.Baseline() {
				name = "λ=" + sweep.FormatLambda(r.Lambda) + " " + name
			}
			for k, xy := range []plotter.XYs{dv, lv} {
				if len(xy) == 0 {
					continue
				}
				l, s, err := plotter.NewLinePoints(xy)
				if err != nil {
					return nil, err
				}
				l.Color, s.Color = plotutil.Color(li), plotutil.Color(li)
				s.Shape = plotutil.Shape(si)
				s.Radius = vg.Points(4)
				l.Dashes = plotutil.Dashes(si)
				p := []*plot.Plot{dev, loss}[k]
				p.Add(l, s)
				if k == 0 {
					p.Legend.Add(name, l, s)
				}
			}
			n++
		}
	}
	if n == 0 {
		return nil, nil
	}
	return saveTiles([]*plot.Plot{dev, loss}, 2*figW, figH, path)
}

// integerTicks marks whole epochs.
type integerTicks struct{}

func (integerTicks) Ticks(lo, hi float64) []plot.Tick {
	step := math.Max(1, math.Ceil((hi-lo)/10))
	var ts []plot.Tick
	for v := math.Ceil(lo); v <= hi+1e-9; v += step {
		ts = append(ts, plot.Tick{Value: v, Label: fmt.Sprintf("%.0f", v)})
	}
	return ts
}

// plotHistograms draws, for a task's model group in audit mode `mode`, the
// histogram of the per-pair RD bounds (audit.Report.Histogram, 20 equal
// bins over [min, max] of the finite pairs) of the first seed at each lambda,
// one panel per lambda. Writes path.png and path.svg; returns nil when no
// cell carries a histogram.
func plotHistograms(tt *taskTable, group, mode, path string) ([]string, error) {
	var ps []*plot.Plot
	for _, r := range tt.Rows {
		if r.Group() != group {
			continue
		}
		for _, c := range r.Cells {
			a := c.Audits[mode]
			if a == nil || a.Histogram == nil || len(a.Histogram.Counts) == 0 ||
				len(a.Histogram.Edges) != len(a.Histogram.Counts)+1 {
				continue
			}
			h := a.Histogram
			bins := make([]plotter.HistogramBin, len(h.Counts))
			for i, n := range h.Counts {
				bins[i] = plotter.HistogramBin{Min: h.Edges[i], Max: h.Edges[i+1], Weight: float64(n)}
			}
			hp := &plotter.Histogram{Bins: bins, Width: h.Edges[1] - h.Edges[0], FillColor: plotutil.Color(len(ps)),
				LineStyle: plotter.DefaultLineStyle}
			p := plot.New()
			p.Title.Text = fmt.Sprintf("%s %s λ=%s seed %d", taskTitle(tt.Task), group, sweep.FormatLambda(r.Lambda), c.Seed)
			p.X.Label.Text = "per-pair RD bound, nats (" + mode + ")"
			p.Y.Label.Text = "ordered pairs"
			p.Add(plotter.NewGrid(), hp)
			ps = append(ps, p)
			break // first seed only
		}
	}
	if len(ps) == 0 {
		return nil, nil
	}
	return saveTiles(ps, vg.Length(len(ps))*figW*0.7, figH, path)
}

// WritePlots writes every figure of t into dir and returns the files
// written:
//
//   - per task and audit mode, the trade-off scatter against rd_max and
//     against BDP eps_mu, <task>_tradeoff_<mode>_<x>;
//   - per task with a frontier, the certified privacy-utility frontier,
//     <task>_frontier_certified, and, when more than one task has one, all of
//     them tiled, all_frontier_certified;
//   - per task and model group, the training curves, <task>_<group>_curves,
//     and the per-pair bound histograms, <task>_<group>_hist_<mode>;
//   - per task with distinguishing attacks in Tables.Distinguish, the
//     frontier next to the attack's lower bounds,
//     <task>_frontier_distinguish;
//   - per task and learned attack with points in Tables.Learned, the frontier
//     next to the attack's scores, <task>_frontier_invert and
//     <task>_frontier_attribute.
func WritePlots(t *Tables, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	add := func(f []string, err error) error {
		files = append(files, f...)
		return err
	}
	var frontiers []*plot.Plot
	for _, tt := range t.Tasks {
		for _, m := range t.AuditModes {
			for _, x := range []string{"rd_max", "bdp_epsilon"} {
				if err := add(plotTradeoff(tt, m, x, filepath.Join(dir, fmt.Sprintf("%s_tradeoff_%s_%s", tt.Task, m, x)))); err != nil {
					return files, err
				}
			}
		}
		if tt.Frontier != nil {
			p, err := frontierPlot(tt.Frontier)
			if err != nil {
				return files, err
			}
			if p != nil {
				frontiers = append(frontiers, p)
				if err := add(saveAll(p, figW, figH, filepath.Join(dir, tt.Task+"_frontier_certified"))); err != nil {
					return files, err
				}
			}
		}
		for _, g := range groups(tt) {
			base := filepath.Join(dir, tt.Task+"_"+fileSafe(g))
			if err := add(plotCurves(tt, g, base+"_curves")); err != nil {
				return files, err
			}
			for _, m := range t.AuditModes {
				if err := add(plotHistograms(tt, g, m, base+"_hist_"+m)); err != nil {
					return files, err
				}
			}
		}
	}
	if err := add(writeDistinguishPlots(t, dir)); err != nil {
		return files, err
	}
	if err := add(writeLearnedPlots(t, dir)); err != nil {
		return files, err
	}
	if n := len(frontiers); n > 1 {
		cols := min(n, 3)
		var grid [][]*plot.Plot
		for i := 0; i < n; i += cols {
			row := make([]*plot.Plot, cols)
			copy(row, frontiers[i:])
			grid = append(grid, row)
		}
		if err := add(saveGrid(grid, vg.Length(cols)*figW, vg.Length(len(grid))*figH, filepath.Join(dir, "all_frontier_certified"))); err != nil {
			return files, err
		}
	}
	return files, nil
}

// pointLabels are the small text labels beside plotted points (7 pt, offset
// right and up), used by the trade-off and frontier plots.
func pointLabels(xys plotter.XYs, labels []string) (*plotter.Labels, error) {
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
	if err != nil {
		return nil, err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].Font.Size = vg.Points(7)
	}
	l.Offset = vg.Point{X: vg.Points(5), Y: vg.Points(2)}
	return l, nil
}
