package report

import (
	"fmt"
	"image/color"
	"io/fs"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/nvdp-project/nvdp/attack"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/privacy"
)

// What the attacks' points share: where an attack's report sits along a
// frontier (attackModel), finding the reports under a directory
// (loadAttackReports), and the figure of an attack beside the frontier
// (certifiedAxis, seriesKeys, seriesLegend, besideFrontier).

// attackModel is the model an attack's report attacked, placed along a
// frontier: its task, variant, seed and target epsilon (from its cell, when
// the report's model is a cell of the tables; else task and variant from
// the report), the certified epsilon of one release at the attack's delta
// (NaN: unknown), and the report file.
type attackModel struct {
	Task, Variant string
	Seed          uint64
	TargetEpsilon float64
	Certified     jsonfloat.Float
	Report        string
}

// cellsByDir indexes cells by their absolute directory.
func cellsByDir(cells []*runCell) map[string]*runCell {
	byDir := map[string]*runCell{}
	for _, c := range cells {
		byDir[cleanAbs(c.Dir)] = c
	}
	return byDir
}

// placeAttack is the attackModel of a report of model dir (task and
// variant as the report says, g its certified guarantee, nil: unknown) read
// from path.
func placeAttack(byDir map[string]*runCell, dir, task, variant string, g *privacy.Guarantee, path string) attackModel {
	m := attackModel{Task: task, Variant: variant, Certified: jsonfloat.Float(math.NaN()), Report: path}
	if c := byDir[cleanAbs(dir)]; c != nil && dir != "" {
		m.Task, m.Variant, m.Seed, m.TargetEpsilon = c.Task, c.Variant, c.Seed, c.TargetEpsilon
	}
	if g != nil {
		m.Certified = g.Epsilon
	}
	return m
}

// drawable reports whether m has a finite positive certified epsilon, the
// x of the attack figures.
func (m attackModel) drawable(task string) bool {
	x := float64(m.Certified)
	return m.Task == task && x > 0 && !math.IsInf(x, 0)
}

// loadAttackReports reads every file under root named prefix*.json with
// read, in path order. Errors name the file.
func loadAttackReports[R any](root, prefix string, read func(string) (*R, error)) (reports []*R, paths []string, err error) {
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() || !strings.HasPrefix(name, prefix) || filepath.Ext(name) != ".json" {
			return nil
		}
		r, err := read(path)
		if err != nil {
			return err
		}
		reports, paths = append(reports, r), append(paths, path)
		return nil
	})
	return reports, paths, err
}

// certifiedAxis makes p's x axis the certified epsilon on a log scale from
// the decade below xlo to the decade above xhi.
func certifiedAxis(p *plot.Plot, xlo, xhi float64) {
	p.X.Label.Text = "certified ε, log scale"
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.X.Min = math.Pow(10, math.Floor(math.Log10(xlo)))
	p.X.Max = math.Pow(10, math.Ceil(math.Log10(xhi)))
}

// seriesKey is a series of an attack figure: a variant (the frontier's
// colour) and a kind (a pair kind or an attacker: the marker shape).
type seriesKey struct{ variant, kind string }

// seriesKeys orders the series of an attack figure (variants in the
// tables' order, then kinds by name) and gives each kind its shape index
// (frontierGlyphs) in name order.
func seriesKeys[T any](series map[seriesKey][]T) (keys []seriesKey, kinds []string, shape map[string]int) {
	shape = map[string]int{}
	for k := range series {
		keys = append(keys, k)
		shape[k.kind] = 0
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].variant != keys[j].variant {
			return variantRank(keys[i].variant) < variantRank(keys[j].variant)
		}
		return keys[i].kind < keys[j].kind
	})
	for k := range shape {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for i, k := range kinds {
		shape[k] = i
	}
	return keys, kinds, shape
}

// variantColor is a variant's colour in the frontier and attack figures.
func variantColor(variant string) color.Color { return plotutil.Color(variantRank(variant)) }

// seriesLegend adds the legend of an attack figure's series: a circle in
// each variant's colour (in keys' order), then a gray marker of each kind's
// shape labelled kindLabel(kind).
func seriesLegend(p *plot.Plot, keys []seriesKey, kinds []string, kindLabel func(string) string) error {
	seen := map[string]bool{}
	for _, k := range keys {
		if !seen[k.variant] {
			seen[k.variant] = true
			if err := legendMarker(p, variantColor(k.variant), draw.CircleGlyph{}, variantTitle(k.variant)); err != nil {
				return err
			}
		}
	}
	for i, k := range kinds {
		filled, _ := frontierGlyphs(i)
		if err := legendMarker(p, color.Gray{Y: 90}, filled, kindLabel(k)); err != nil {
			return err
		}
	}
	return nil
}

// besideFrontier draws a task's certified frontier (utility against
// certified epsilon, frontierPlot; first, when the tables have one) and
// then the attack's tiles in one row. Writes path.png and path.svg; returns
// the files.
func besideFrontier(tt *taskTable, tiles []*plot.Plot, path string) ([]string, error) {
	if tt.Frontier != nil {
		left, err := frontierPlot(tt.Frontier)
		if err != nil {
			return nil, err
		}
		if left != nil {
			tiles = append([]*plot.Plot{left}, tiles...)
		}
	}
	return saveTiles(tiles, vg.Length(len(tiles))*figW, figH, path)
}

// The learned attacks (`nvdp attack invert` and `nvdp attack attribute`)
// along the frontier: their points, tables and figures.

// Metrics of the learned attacks (learnedPoint.Metric): the inversion's
// token F1 and exact-token accuracy (attack.TokenScores), the attribute
// inference's AUC and accuracy (attack.AttributeResult).
const (
	metricTokenF1  = "f1"
	metricAccuracy = "accuracy"
	metricAUC      = "auc"
)

// learnedPoint is one metric of one learned attacker (an inversion decoder
// or an attribute classifier) on one model along a frontier: its score on
// the release with its interval, the same attacker on the model's encoder
// output (the non-private reference), the chance levels, and for the AUC
// the certified bound.
type learnedPoint struct {
	attackModel
	Attack   string // attack.AttackInvert or attack.AttackAttribute
	Property string // the attribute's property ("" for the inversion)
	Attacker string // the decoder or classifier
	Metric   string // metricTokenF1, metricAccuracy or metricAUC
	// Release is the score on the release, ReleaseCI its interval
	// (bootstrap; Clopper-Pearson for the attribute's accuracy).
	Release   float64
	ReleaseCI [2]float64
	// Encoder is the same attacker on the encoder output.
	Encoder jsonfloat.Float
	// Shuffled is the inversion's chance level of this decoder (its release
	// guesses shuffled across the victims' positions; NaN for the
	// attribute), Majority the score of the majority guess (the most frequent
	// public token; the majority class).
	Shuffled, Majority jsonfloat.Float
	// Bound is attack.CertifiedAUC of the certified (epsilon, delta) for the
	// AUC, NaN otherwise: no attacker of one release has a larger AUC.
	Bound jsonfloat.Float
}

// Chance is the best score of guesses that carry nothing of the text:
// the larger of Shuffled and Majority (NaN ones left out).
func (p learnedPoint) Chance() float64 {
	c := math.NaN()
	for _, v := range []jsonfloat.Float{p.Shuffled, p.Majority} {
		if !math.IsNaN(float64(v)) && !(c >= float64(v)) {
			c = float64(v)
		}
	}
	return c
}

// learnedAttack describes a learned attack in the report: its metrics (in
// table order), how its chance levels are named (majority; shuffled, ""
// for none) and whether its scores are drawn on a log scale (the
// inversion's span from a release's 0.005 to the encoder output's 0.8).
type learnedAttack struct {
	name, title, chance, majority, shuffled string
	metrics                                 []string
	logY                                    bool
}

var learnedAttacks = []learnedAttack{
	{attack.AttackInvert, "inversion", "the larger of the decoder's guesses shuffled and the majority token",
		"the majority token everywhere", "the guesses shuffled (best attacker)", []string{metricTokenF1, metricAccuracy}, true},
	{attack.AttackAttribute, "attribute inference", "the majority baseline", "the majority class", "", []string{metricAUC, metricAccuracy}, false},
}

// metricTitle is the display name of a learned attack's metric.
func metricTitle(attackName, metric string) string {
	switch {
	case metric == metricTokenF1:
		return "token F1"
	case metric == metricAUC:
		return "AUC"
	case attackName == attack.AttackInvert:
		return "exact-token accuracy"
	}
	return "accuracy"
}

// loadLearned reads every inversion (attack.InvertFile: attack_invert*.json)
// and attribute (attack.AttributeFile: attack_attribute*.json) report under
// root, in path order, and returns their points, each placed by the cell
// whose directory is its model, when there is one. Errors name the file.
func loadLearned(root string, cells []*runCell) ([]learnedPoint, error) {
	byDir := cellsByDir(cells)
	inv, ipaths, err := loadAttackReports(root, strings.TrimSuffix(attack.InvertFile, ".json"), attack.ReadInvertReport)
	if err != nil {
		return nil, err
	}
	attr, apaths, err := loadAttackReports(root, strings.TrimSuffix(attack.AttributeFile, ".json"), attack.ReadAttributeReport)
	if err != nil {
		return nil, err
	}
	var pts []learnedPoint
	nan := math.NaN()
	for k, r := range inv {
		m := r.Model
		base := learnedPoint{attackModel: placeAttack(byDir, m.Dir, m.Task, m.Variant, r.Certified, ipaths[k]), Attack: attack.AttackInvert}
		var rs []learnedResult
		for _, x := range r.Results {
			rs = append(rs, learnedResult{x.Features, x.Decoder, map[string]learnedScore{
				metricTokenF1: {x.F1, x.F1CI, x.Shuffled.F1}, metricAccuracy: {x.Accuracy, x.AccuracyCI, x.Shuffled.Accuracy}}})
		}
		pts = appendLearned(pts, base, rs, func(string) float64 { return nan })
	}
	for k, r := range attr {
		m := r.Model
		base := learnedPoint{attackModel: placeAttack(byDir, m.Dir, m.Task, m.Variant, r.Certified, apaths[k]), Attack: attack.AttackAttribute,
			Property: r.Property.Name}
		var rs []learnedResult
		for _, x := range r.Results {
			rs = append(rs, learnedResult{x.Features, x.Classifier, map[string]learnedScore{
				metricAUC: {x.AUC, x.AUCCI, nan}, metricAccuracy: {x.Accuracy, x.AccuracyCI, nan}}})
		}
		pts = appendLearned(pts, base, rs, func(metric string) float64 {
			if metric == metricAUC {
				return r.CertifiedAUC
			}
			return nan
		})
	}
	sort.SliceStable(pts, func(i, j int) bool {
		a, b := pts[i], pts[j]
		if a.Task != b.Task {
			return a.Task < b.Task
		}
		if a.Attack != b.Attack {
			return a.Attack > b.Attack // invert first
		}
		if a.Variant != b.Variant {
			return variantRank(a.Variant) < variantRank(b.Variant)
		}
		return float64(a.Certified) < float64(b.Certified)
	})
	return pts, nil
}

// learnedResult is a result of a learned attack as the report reads it:
// the features read, the attacker, and its score per metric.
type learnedResult struct {
	features, attacker string
	scores             map[string]learnedScore
}

// learnedScore is a score with its interval and the attacker's shuffled
// chance level (NaN: none).
type learnedScore struct {
	value    float64
	ci       [2]float64
	shuffled float64
}

// appendLearned appends to pts, per attacker on the release in rs and per
// metric, the point of base with its score, the same attacker's score on
// the encoder output, the chance result's score (Majority) and bound(metric).
func appendLearned(pts []learnedPoint, base learnedPoint, rs []learnedResult, bound func(string) float64) []learnedPoint {
	var chance learnedResult
	enc := map[string]learnedResult{}
	for _, r := range rs {
		switch r.features {
		case attack.FeaturesNone:
			chance = r
		case attack.FeaturesEncoder:
			enc[r.attacker] = r
		}
	}
	a, _ := lookupLearned(base.Attack) // ok: the callers' attacks
	for _, r := range rs {
		if r.features != attack.FeaturesRelease {
			continue
		}
		for _, m := range a.metrics {
			sc := r.scores[m]
			p := base
			p.Attacker, p.Metric, p.Release, p.ReleaseCI = r.attacker, m, sc.value, sc.ci
			p.Encoder, p.Shuffled = jsonfloat.Float(enc[r.attacker].scores[m].value), jsonfloat.Float(sc.shuffled)
			p.Majority, p.Bound = jsonfloat.Float(chance.scores[m].value), jsonfloat.Float(bound(m))
			pts = append(pts, p)
		}
	}
	return pts
}

// lineOver draws y(x), the largest y of the points at each x (NaN ys left
// out) and at least lo, as a line styled by style with a legend entry
// (nothing without a point).
func lineOver(p *plot.Plot, pts []learnedPoint, lo float64, y func(learnedPoint) float64, label string, style func(*plotter.Line)) error {
	at := map[float64]float64{}
	for _, pt := range pts {
		x, v := float64(pt.Certified), y(pt)
		if old, ok := at[x]; !math.IsNaN(v) && (!ok || v > old) {
			at[x] = v
		}
	}
	if len(at) == 0 {
		return nil
	}
	var xy plotter.XYs
	for x, v := range at {
		xy = append(xy, plotter.XY{X: x, Y: max(v, lo)})
	}
	sort.Slice(xy, func(i, j int) bool { return xy[i].X < xy[j].X })
	l, err := plotter.NewLine(xy)
	if err != nil {
		return err
	}
	style(l)
	p.Add(l)
	if label != "" {
		p.Legend.Add(label, l)
	}
	return nil
}

// learnedPlot draws one metric of a learned attack on a task's models
// against their certified epsilon (log x; the score on a log scale for the
// inversion, linear otherwise): per variant (the frontier's colour) and
// attacker (marker shape) the score on the release with its interval,
// joined along epsilon; per variant the best attacker on the encoder output
// (dashed: the non-private reference); the chance levels (gray: the
// majority guess dotted, the best attacker's shuffled guesses dash-dotted)
// and, for the AUC, the certified bound (red, dashed: attack.CertifiedAUC).
// The legend is in the room below the scores. nil when no point has a
// certified epsilon.
func learnedPlot(task string, a learnedAttack, metric string, pts []learnedPoint) (*plot.Plot, error) {
	d := learnedData(task, a, metric, pts)
	if d == nil {
		return nil, nil
	}
	return drawLearned(a, d)
}

// learnedFigure is what learnedPlot draws, as plain data.
type learnedFigure struct {
	title, yLabel string
	all           []learnedPoint            // the drawable points of the metric
	byVariant     map[string][]learnedPoint // the same by variant
	keys          []seriesKey               // the series, in drawing order (seriesKeys)
	kinds         []string
	shape         map[string]int
	series        map[seriesKey][]learnedPoint // each series' points by certified epsilon
	xlo, xhi      float64                      // the certified epsilons' range
	logY          bool
	yMin          float64 // the y axis' bottom (its top is 1)
}

// learnedData is the data of learnedPlot; nil when no point of the task
// has a certified epsilon.
func learnedData(task string, a learnedAttack, metric string, pts []learnedPoint) *learnedFigure {
	d := &learnedFigure{byVariant: map[string][]learnedPoint{}, series: map[seriesKey][]learnedPoint{},
		xlo: math.Inf(1), xhi: math.Inf(-1), logY: a.logY}
	ylo := 1.0
	for _, pt := range pts {
		if pt.Attack != a.name || pt.Metric != metric || !pt.drawable(task) {
			continue
		}
		k := seriesKey{pt.Variant, pt.Attacker}
		d.series[k] = append(d.series[k], pt)
		d.byVariant[pt.Variant] = append(d.byVariant[pt.Variant], pt)
		d.all = append(d.all, pt)
		d.xlo, d.xhi = min(d.xlo, float64(pt.Certified)), max(d.xhi, float64(pt.Certified))
		for _, y := range []float64{pt.ReleaseCI[0], float64(pt.Shuffled), float64(pt.Majority), float64(pt.Encoder)} {
			if y > 0 {
				ylo = min(ylo, y)
			}
		}
	}
	if len(d.all) == 0 {
		return nil
	}
	d.keys, d.kinds, d.shape = seriesKeys(d.series)
	for _, k := range d.keys {
		s := d.series[k]
		sort.Slice(s, func(i, j int) bool { return s[i].Certified < s[j].Certified })
	}
	title := metricTitle(a.name, metric)
	if d.all[0].Property != "" {
		title += " (" + d.all[0].Property + ")"
	}
	d.title = fmt.Sprintf("%s: %s attack, %s", taskTitle(task), a.title, title)
	d.yLabel = title // short: a rotated label longer than the axis squeezes the tile
	if a.logY {
		d.yLabel += ", log scale"
		// As many decades below the lowest score as the scores span: the
		// legend's room.
		decades := math.Ceil(-math.Log10(ylo))
		d.yMin = math.Pow(10, -2*decades)
	}
	return d
}

// drawLearned draws d: the chance levels, the certified bound, the encoder
// output's scores, then each series' scores on the release and the legend.
func drawLearned(a learnedAttack, d *learnedFigure) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text, p.Y.Label.Text = d.title, d.yLabel
	certifiedAxis(p, d.xlo, d.xhi)
	p.Legend.Top, p.Legend.Left = false, false // bottom right, in the room below the scores
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	p.Add(plotter.NewGrid())
	p.Y.Min, p.Y.Max = d.yMin, 1
	if d.logY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: 1}
	}
	if err := learnedReferences(p, a, d); err != nil {
		return nil, err
	}
	for _, k := range d.keys {
		filled, _ := frontierGlyphs(d.shape[k.kind])
		if err := addReleaseScores(p, d.series[k], variantColor(k.variant), filled); err != nil {
			return nil, err
		}
	}
	return p, seriesLegend(p, d.keys, d.kinds, func(k string) string { return k + " on the release (95% interval)" })
}

// learnedReferences draws the lines a learned attack's scores are read
// against: the chance levels (gray), the certified bound (red, dashed) and
// per variant the best attacker on the encoder output (dashed), each at
// least the axis' bottom.
func learnedReferences(p *plot.Plot, a learnedAttack, d *learnedFigure) error {
	gray := color.Gray{Y: 110}
	for _, c := range []struct {
		label  string
		y      func(learnedPoint) float64
		dashes []vg.Length
	}{
		{a.majority, func(pt learnedPoint) float64 { return float64(pt.Majority) }, []vg.Length{vg.Points(1), vg.Points(3)}},
		{a.shuffled, func(pt learnedPoint) float64 { return float64(pt.Shuffled) }, []vg.Length{vg.Points(6), vg.Points(2), vg.Points(1), vg.Points(2)}},
	} {
		if c.label == "" {
			continue
		}
		if err := lineOver(p, d.all, p.Y.Min, c.y, "chance: "+c.label, func(l *plotter.Line) {
			l.Color, l.Width, l.Dashes = gray, vg.Points(1.5), c.dashes
		}); err != nil {
			return err
		}
	}
	if err := lineOver(p, d.all, p.Y.Min, func(pt learnedPoint) float64 { return float64(pt.Bound) }, "certified bound (attack.CertifiedAUC): allowed below",
		func(l *plotter.Line) {
			l.Color, l.Width, l.Dashes = color.RGBA{R: 200, A: 255}, vg.Points(1.5), []vg.Length{vg.Points(6), vg.Points(3)}
		}); err != nil {
		return err
	}
	for i, v := range sortedVariants(d.byVariant) {
		label := ""
		if i == 0 {
			label = "dashed: encoder output (non-private), best attacker"
		}
		if err := lineOver(p, d.byVariant[v], p.Y.Min, func(pt learnedPoint) float64 { return float64(pt.Encoder) }, label, func(l *plotter.Line) {
			l.Color, l.Dashes = variantColor(v), []vg.Length{vg.Points(4), vg.Points(2)}
		}); err != nil {
			return err
		}
	}
	return nil
}

// addReleaseScores draws a series' scores on the release (s, by certified
// epsilon) joined along epsilon, with their intervals as error bars and
// markers, each value at least the axis' bottom as it is when drawn.
func addReleaseScores(p *plot.Plot, s []learnedPoint, col color.Color, shape draw.GlyphDrawer) error {
	var e yErrPoints
	for _, pt := range s {
		y, lo, hi := max(pt.Release, p.Y.Min), max(pt.ReleaseCI[0], p.Y.Min), max(pt.ReleaseCI[1], p.Y.Min)
		e.XYs = append(e.XYs, plotter.XY{X: float64(pt.Certified), Y: y})
		e.YErrors = append(e.YErrors, struct{ Low, High float64 }{y - lo, hi - y})
	}
	l, err := plotter.NewLine(e.XYs)
	if err != nil {
		return err
	}
	l.Color = col
	bars, err := plotter.NewYErrorBars(e)
	if err != nil {
		return err
	}
	bars.Color = col
	p.Add(l, bars)
	return addScatter(p, e.XYs, col, shape, "")
}

func sortedVariants[T any](m map[string]T) []string {
	vs := make([]string, 0, len(m))
	for v := range m {
		vs = append(vs, v)
	}
	sort.Slice(vs, func(i, j int) bool { return variantRank(vs[i]) < variantRank(vs[j]) })
	return vs
}

// plotLearnedFrontier draws a task's certified frontier (left, when the
// tables have one) next to a learned attack's metrics against the same
// certified epsilon, one tile per metric (learnedPlot): for
// attack.AttackInvert token F1 and exact-token accuracy, for
// attack.AttackAttribute AUC and accuracy. Writes path.png and path.svg;
// returns the files (none when no point of the task has a certified
// epsilon). Errors: an unknown attack.
func plotLearnedFrontier(tt *taskTable, attackName string, pts []learnedPoint, path string) ([]string, error) {
	a, err := lookupLearned(attackName)
	if err != nil {
		return nil, err
	}
	var tiles []*plot.Plot
	for _, m := range a.metrics {
		p, err := learnedPlot(tt.Task, a, m, pts)
		if err != nil {
			return nil, err
		}
		if p != nil {
			tiles = append(tiles, p)
		}
	}
	if len(tiles) == 0 {
		return nil, nil
	}
	return besideFrontier(tt, tiles, path)
}

func lookupLearned(name string) (learnedAttack, error) {
	for _, a := range learnedAttacks {
		if a.name == name {
			return a, nil
		}
	}
	return learnedAttack{}, fmt.Errorf("report: no learned attack %q (want %s or %s)", name, attack.AttackInvert, attack.AttackAttribute)
}

// writeLearnedPlots writes plotLearnedFrontier of every task of t and
// learned attack with points (<task>_frontier_<attack>).
func writeLearnedPlots(t *Tables, dir string) ([]string, error) {
	var files []string
	for _, tt := range t.Tasks {
		for _, a := range learnedAttacks {
			f, err := plotLearnedFrontier(tt, a.name, t.Learned, filepath.Join(dir, tt.Task+"_frontier_"+a.name))
			files = append(files, f...)
			if err != nil {
				return files, err
			}
		}
	}
	return files, nil
}

// learnedRow is a row of a learned attack's table: one attacker on one
// model, its points by metric.
type learnedRow struct {
	first learnedPoint
	by    map[string]learnedPoint
}

// learnedRows groups the points of a task's learned attack a into rows, in
// the points' order.
func learnedRows(task string, a learnedAttack, pts []learnedPoint) []*learnedRow {
	var rows []*learnedRow
	index := map[[2]string]*learnedRow{}
	for _, pt := range pts {
		if pt.Task != task || pt.Attack != a.name {
			continue
		}
		k := [2]string{pt.Report, pt.Attacker}
		r := index[k]
		if r == nil {
			r = &learnedRow{first: pt, by: map[string]learnedPoint{}}
			index[k] = r
			rows = append(rows, r)
		}
		r.by[pt.Metric] = pt
	}
	return rows
}

// learnedMarkdown writes the table of each learned attack with points of
// task: one row per model and attacker, per metric the score on the
// release with its interval, the encoder-output reference, the chance
// level and, where there is one, the certified bound.
func learnedMarkdown(b *strings.Builder, task string, pts []learnedPoint) {
	f3 := func(v float64) string { return fmtNum(v, func(v float64) string { return fmt.Sprintf("%.3f", v) }) }
	for _, a := range learnedAttacks {
		rows := learnedRows(task, a, pts)
		if len(rows) == 0 {
			continue
		}
		hdr := []string{"Model", "Target ε", "Certified ε", "Seed", "Attacker"}
		bound := map[string]bool{}
		for _, m := range a.metrics {
			t := metricTitle(a.name, m)
			hdr = append(hdr, t+" [95% CI]", t+": encoder", t+": chance")
			for _, r := range rows {
				if pt, ok := r.by[m]; ok && !math.IsNaN(float64(pt.Bound)) {
					bound[m] = true
				}
			}
			if bound[m] {
				hdr = append(hdr, t+": certified bound")
			}
		}
		what, bounds := "", ""
		if p := rows[0].first.Property; p != "" {
			what = " of the property " + p
		}
		if len(bound) > 0 {
			bounds = "; **certified bound**: no attacker of one release can exceed it (attack.CertifiedAUC of the certified ε, δ)"
		}
		fmt.Fprintf(b, "Attack: %s%s along the frontier (`nvdp attack %s`, docs/attacks.md; figure %s_frontier_%s): the score on the "+
			"victims' releases with its 95%% interval; **encoder**: the same attacker on the model's encoder output (non-private); "+
			"**chance**: %s%s.\n\n", a.title, what, a.name, task, a.name, a.chance, bounds)
		mdRow(b, hdr)
		sep := []string{"---"}
		for len(sep) < len(hdr) {
			sep = append(sep, "---:")
		}
		mdRow(b, sep)
		for _, r := range rows {
			pt := r.first
			target := "–"
			if pt.TargetEpsilon > 0 {
				target = fmt.Sprint(pt.TargetEpsilon)
			}
			line := []string{variantTitle(pt.Variant), target, fmtRD(float64(pt.Certified)), fmt.Sprint(pt.Seed), pt.Attacker}
			for _, m := range a.metrics {
				p, ok := r.by[m]
				cells := []string{"–", "–", "–"}
				if ok {
					cells = []string{fmt.Sprintf("%s [%s, %s]", f3(p.Release), f3(p.ReleaseCI[0]), f3(p.ReleaseCI[1])),
						f3(float64(p.Encoder)), f3(p.Chance())}
				}
				if bound[m] {
					cells = append(cells, f3(float64(p.Bound)))
				}
				line = append(line, cells...)
			}
			mdRow(b, line)
		}
		b.WriteString("\n")
	}
}

// learnedCSVHeader are the CSV columns of the learned attacks, after the
// tables' own (writeCSV).
var learnedCSVHeader = []string{"attack", "attack_property", "attack_seed", "attacker", "attack_metric", "attack_release",
	"attack_release_lo", "attack_release_hi", "attack_encoder", "attack_shuffled", "attack_majority", "attack_certified_bound", "attack_report"}

// learnedCSV is the CSV line of pt: width columns, task and variant at 0
// and 1, the certified epsilon in epsilon_certified_mean (certCol), the
// target epsilon in target_epsilon (targetCol), then learnedCSVHeader's.
func learnedCSV(pt learnedPoint, width, certCol, targetCol int) []string {
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	line := make([]string, width)
	line[0], line[1], line[certCol] = pt.Task, pt.Variant, g(float64(pt.Certified))
	if pt.TargetEpsilon > 0 {
		line[targetCol] = g(pt.TargetEpsilon)
	}
	return append(line, pt.Attack, pt.Property, strconv.FormatUint(pt.Seed, 10), pt.Attacker, pt.Metric, g(pt.Release),
		g(pt.ReleaseCI[0]), g(pt.ReleaseCI[1]), g(float64(pt.Encoder)), g(float64(pt.Shuffled)), g(float64(pt.Majority)),
		g(float64(pt.Bound)), pt.Report)
}
