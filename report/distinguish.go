package report

import (
	"fmt"
	excerptpkg "github.com/nvdp-project/nvdp/internal/excerpt"
	"image/color"
	"math"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/nvdp-project/nvdp/attack"
	"github.com/nvdp-project/nvdp/jsonfloat"
)

// PlotDistinguishROC draws the ROC curves of a distinguishing attack, from
// `nvdp attack distinguish` as docs/attacks.md describes, side by side on
// linear and on log-log axes. It writes path.png and path.svg and returns the
// files.
//
// For each pair it draws the likelihood-ratio test's TPR against FPR, the
// thinned ROC of its 2K releases, labelled with its kind, headline lower
// bound and AUC. It also draws the chance diagonal and, dashed, when the
// report carries the certified guarantee, the boundary that (epsilon,
// delta)-DP allows:
//
//	TPR <= min(1, delta + e^eps FPR, 1 - e^-eps (1 - delta - FPR))
//
// No test's ROC can pass above it unless the certificate is wrong.
func PlotDistinguishROC(rep *attack.DistinguishReport, path string) ([]string, error) {
	var tiles []*plot.Plot
	for _, logScale := range []bool{false, true} {
		p, err := rocPlot(rep, logScale)
		if err != nil {
			return nil, err
		}
		tiles = append(tiles, p)
	}
	return saveTiles(tiles, 2*figW, figH, path)
}

// rocPlot is one tile of PlotDistinguishROC.
func rocPlot(rep *attack.DistinguishReport, logScale bool) (*plot.Plot, error) {
	p := plot.New()
	what := rep.Variant
	if what == "" {
		what = filepath.Base(rep.Posteriors)
	}
	p.Title.Text = fmt.Sprintf("distinguishing attack on %s releases", what)
	p.X.Label.Text, p.Y.Label.Text = "false-positive rate", "true-positive rate"
	lo := 1.0
	if logScale {
		p.Title.Text += " (log-log)"
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
		for _, pr := range rep.Pairs {
			lo = min(lo, 1/float64(pr.Result.Releases))
		}
		lo = math.Pow(10, math.Floor(math.Log10(lo)))
		p.X.Min, p.Y.Min = lo, lo
	} else {
		lo = 0
	}
	p.X.Max, p.Y.Max = 1, 1
	p.Legend.Top, p.Legend.Left = false, false // bottom right: below the curves
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	p.Add(plotter.NewGrid())
	xs := gridXs(lo, logScale)
	if err := addCurve(p, xs, func(x float64) float64 { return x }, "chance", func(l *plotter.Line) {
		l.Color, l.Dashes = color.Gray{Y: 120}, []vg.Length{vg.Points(1), vg.Points(2)}
	}); err != nil {
		return nil, err
	}
	if g := rep.Certified; g != nil && !math.IsInf(float64(g.Epsilon), 1) {
		eps, delta := float64(g.Epsilon), g.Delta
		bound := func(x float64) float64 {
			up := delta
			if x > 0 { // e^eps may be +Inf
				up += math.Exp(eps) * x
			}
			return min(1, up, 1-math.Exp(-eps)*(1-delta-x))
		}
		if err := addCurve(p, xs, bound, fmt.Sprintf("certified (ε=%.3g, δ=%g): allowed below", eps, delta), func(l *plotter.Line) {
			l.Color, l.Width, l.Dashes = color.RGBA{R: 200, A: 255}, vg.Points(1.5), []vg.Length{vg.Points(6), vg.Points(3)}
		}); err != nil {
			return nil, err
		}
	}
	for i, pr := range rep.Pairs {
		var xy plotter.XYs
		if !logScale {
			xy = append(xy, plotter.XY{})
		}
		for _, pt := range pr.Result.ROC {
			if logScale && (pt.FPR <= 0 || pt.TPR <= 0) {
				continue
			}
			xy = append(xy, plotter.XY{X: pt.FPR, Y: pt.TPR})
		}
		if len(xy) == 0 {
			continue
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return nil, err
		}
		l.Color, l.Width = plotutil.Color(i), vg.Points(1.2)
		p.Add(l)
		r := pr.Result
		p.Legend.Add(fmt.Sprintf("%s: ε ≥ %.3g (%s), AUC %.3f", pairLabel(pr), float64(r.EpsilonLowerBound), r.Method, r.AUC), l)
	}
	return p, nil
}

// gridXs are the false-positive rates the reference curves are drawn at.
func gridXs(lo float64, logScale bool) []float64 {
	var xs []float64
	for i := range 401 {
		f := float64(i) / 400
		if logScale {
			xs = append(xs, math.Exp(math.Log(lo)*(1-f)))
		} else {
			xs = append(xs, f)
		}
	}
	return xs
}

// addCurve adds y = f(x) at xs as a styled line with a legend entry.
func addCurve(p *plot.Plot, xs []float64, f func(float64) float64, label string, style func(*plotter.Line)) error {
	xy := make(plotter.XYs, len(xs))
	for i, x := range xs {
		xy[i] = plotter.XY{X: x, Y: f(x)}
	}
	l, err := plotter.NewLine(xy)
	if err != nil {
		return err
	}
	style(l)
	p.Add(l)
	p.Legend.Add(label, l)
	return nil
}

// pairLabel names a pair in a legend: its kind and where it comes from.
func pairLabel(pr attack.PairResult) string {
	switch {
	case len(pr.Texts) == 2:
		return fmt.Sprintf("%s (%s | %s)", pr.Kind, excerpt(pr.Texts[0]), excerpt(pr.Texts[1]))
	case len(pr.Index) == 2:
		return fmt.Sprintf("%s (%d, %d)", pr.Kind, pr.Index[0], pr.Index[1])
	}
	return pr.Kind
}

func excerpt(s string) string {
	return excerptpkg.Runes(s, 20)
}

// distinguishPoint is one attacked pair of one model along a frontier: the
// model (attackModel: task, variant, seed, target epsilon and certified
// epsilon of one release at the attack's delta), the pair's kind and the
// attack's lower bounds.
type distinguishPoint struct {
	attackModel
	Kind string
	// LowerBound is the headline bound, Threshold and PrivacyLoss the two
	// methods' bounds, Gaussian the exact Gaussian-mechanism epsilon of a
	// mean-only pair (NaN otherwise), Pair the pair's RDP epsilon.
	LowerBound, Threshold, PrivacyLoss, Gaussian, Pair jsonfloat.Float
}

// loadDistinguish reads every distinguishing report under root: the files
// named attack_distinguish*.json (attack.DistinguishFile), in path order.
// Errors name the file.
func loadDistinguish(root string) (reports []*attack.DistinguishReport, paths []string, err error) {
	return loadAttackReports(root, strings.TrimSuffix(attack.DistinguishFile, ".json"), attack.ReadDistinguishReport)
}

// distinguishPoints are the points of reports (read from paths), each
// placed by the cell whose directory is its model, when there is one.
func distinguishPoints(cells []*runCell, reports []*attack.DistinguishReport, paths []string) []distinguishPoint {
	byDir := cellsByDir(cells)
	var pts []distinguishPoint
	for k, rep := range reports {
		base := distinguishPoint{attackModel: placeAttack(byDir, rep.Model, rep.Task, rep.Variant, rep.Certified, paths[k])}
		for _, pr := range rep.Pairs {
			r := pr.Result
			p := base
			p.Kind = pr.Kind
			p.LowerBound, p.Threshold, p.PrivacyLoss = r.EpsilonLowerBound, r.ThresholdTest.Epsilon, r.PrivacyLossTest.Epsilon
			p.Pair, p.Gaussian = r.PairEpsilon, jsonfloat.Float(math.NaN())
			if r.GaussianEpsilon != nil {
				p.Gaussian = *r.GaussianEpsilon
			}
			pts = append(pts, p)
		}
	}
	return pts
}

func cleanAbs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}

// distinguishPlot draws the lower bounds of a task's points against their
// certified epsilon (log-log): per variant (the frontier's colour, one
// legend entry) and pair kind (marker shape, one legend entry) the headline
// bound (filled) and, for mean-only pairs, the Gaussian mechanism's exact
// epsilon (hollow), with the diagonal y = x (the certificate: no bound may
// pass above it); the legend is in the room left below the points. nil
// when no point has a certified epsilon.
func distinguishPlot(task string, pts []distinguishPoint) (*plot.Plot, error) {
	series := map[seriesKey][]distinguishPoint{}
	xlo, xhi, ylo := math.Inf(1), math.Inf(-1), math.Inf(1)
	for _, pt := range pts {
		if !pt.drawable(task) {
			continue
		}
		k := seriesKey{pt.Variant, pt.Kind}
		series[k] = append(series[k], pt)
		xlo, xhi = min(xlo, float64(pt.Certified)), max(xhi, float64(pt.Certified))
		if pt.LowerBound > 0 {
			ylo = min(ylo, float64(pt.LowerBound))
		}
	}
	if len(series) == 0 {
		return nil, nil
	}
	keys, kinds, shape := seriesKeys(series)
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: distinguishing attack against the certificate", taskTitle(task))
	certifiedAxis(p, xlo, xhi)
	p.Y.Label.Text = "ε lower bound (95%), log scale"
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = false, false // bottom right, in the room below the points
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Add(plotter.NewGrid())
	p.Y.Min, p.Y.Max = min(p.X.Min, math.Pow(10, math.Floor(math.Log10(ylo))))/1000, p.X.Max
	diag, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: p.X.Min}, {X: p.X.Max, Y: p.X.Max}})
	if err != nil {
		return nil, err
	}
	diag.Color, diag.Width, diag.Dashes = color.RGBA{R: 200, A: 255}, vg.Points(1.5), []vg.Length{vg.Points(6), vg.Points(3)}
	p.Add(diag)
	p.Legend.Add("certified ε (lower bounds must stay below)", diag)
	for _, k := range keys {
		var lb, ge plotter.XYs
		for _, pt := range series[k] {
			lb = append(lb, plotter.XY{X: float64(pt.Certified), Y: max(float64(pt.LowerBound), p.Y.Min)})
			if !math.IsNaN(float64(pt.Gaussian)) {
				ge = append(ge, plotter.XY{X: float64(pt.Certified), Y: float64(pt.Gaussian)})
			}
		}
		col := variantColor(k.variant)
		filled, hollow := frontierGlyphs(shape[k.kind])
		if err := addScatter(p, lb, col, filled, ""); err != nil {
			return nil, err
		}
		if err := addScatter(p, ge, col, hollow, ""); err != nil {
			return nil, err
		}
	}
	if err := seriesLegend(p, keys, kinds, func(k string) string { return k + " pair: ε lower bound" }); err != nil {
		return nil, err
	}
	_, hollow := frontierGlyphs(0)
	if err := legendMarker(p, color.Gray{Y: 90}, hollow, "hollow: the pair's exact Gaussian-mechanism ε"); err != nil {
		return nil, err
	}
	return p, nil
}

// addScatter adds the points xy (none: nothing) as markers of colour col and
// shape, with a legend entry unless label is "".
func addScatter(p *plot.Plot, xy plotter.XYs, col color.Color, shape draw.GlyphDrawer, label string) error {
	if len(xy) == 0 {
		return nil
	}
	sc, err := plotter.NewScatter(xy)
	if err != nil {
		return err
	}
	sc.GlyphStyle.Color, sc.GlyphStyle.Shape, sc.GlyphStyle.Radius = col, shape, vg.Points(4)
	p.Add(sc)
	if label != "" {
		p.Legend.Add(label, sc)
	}
	return nil
}

// legendMarker adds a legend entry with a marker of colour col and shape
// (nothing drawn in the plot).
func legendMarker(p *plot.Plot, col color.Color, shape draw.GlyphDrawer, label string) error {
	sc, err := plotter.NewScatter(plotter.XYs{{X: 1, Y: 1}})
	if err != nil {
		return err
	}
	sc.GlyphStyle.Color, sc.GlyphStyle.Shape, sc.GlyphStyle.Radius = col, shape, vg.Points(4)
	p.Legend.Add(label, sc)
	return nil
}

// plotDistinguishFrontier draws a task's certified frontier (utility
// against certified epsilon, frontierPlot; left, when the tables have one)
// next to the distinguishing attack's lower bounds against the same
// certified epsilon (right). Writes path.png and path.svg; returns the
// files (none when no point of the task has a certified epsilon).
func plotDistinguishFrontier(tt *taskTable, pts []distinguishPoint, path string) ([]string, error) {
	right, err := distinguishPlot(tt.Task, pts)
	if err != nil || right == nil {
		return nil, err
	}
	return besideFrontier(tt, []*plot.Plot{right}, path)
}

// writeDistinguishPlots writes plotDistinguishFrontier of every task of t
// with attack points (<task>_frontier_distinguish).
func writeDistinguishPlots(t *Tables, dir string) ([]string, error) {
	var files []string
	for _, tt := range t.Tasks {
		f, err := plotDistinguishFrontier(tt, t.Distinguish, filepath.Join(dir, tt.Task+"_frontier_distinguish"))
		files = append(files, f...)
		if err != nil {
			return files, err
		}
	}
	return files, nil
}
