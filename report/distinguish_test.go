package report

import (
	"context"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/attack"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
)

// The distinguishing reports under a directory are found by name, placed by
// the cell of their model (task, variant, seed, target epsilon) and drawn:
// the ROC figure and the frontier next to the lower bounds, PNG and SVG.
func TestDistinguishPlots(t *testing.T) {
	root := t.TempDir()
	cellDir := filepath.Join(root, "sst2", "gaussian", "epsilon=8", "seed=2")
	var reps []*attack.DistinguishReport
	for i, c := range []float64{0.2, 0.5} {
		pair, g, err := attack.WitnessPair(nvib.GaussianClipSet(c, 1, 4, 2), privacy.DefaultDelta, true)
		if err != nil {
			t.Fatal(err)
		}
		o := attack.DefaultDistinguishOptions()
		o.Releases = 1000
		res, err := attack.Distinguish(context.Background(), pair, o)
		if err != nil {
			t.Fatal(err)
		}
		if err := res.SetCertified(g); err != nil {
			t.Fatal(err)
		}
		rep := &attack.DistinguishReport{Attack: attack.AttackDistinguish, Task: "sst2", Variant: nvib.ModelGaussian, Certified: g,
			Pairs: []attack.PairResult{{Kind: attack.PairWitness, Result: res}}}
		if i == 0 {
			rep.Model = cellDir
		}
		reps = append(reps, rep)
		sub := filepath.Join(root, "attacks", []string{"a", "b"}[i])
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := atomicfile.WriteJSON(filepath.Join(sub, attack.DistinguishFile), rep); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "attacks", "other.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, paths, err := loadDistinguish(root)
	if err != nil || len(loaded) != 2 {
		t.Fatalf("loaded %d reports (%v): %v", len(loaded), paths, err)
	}
	cells := []*runCell{{Dir: cellDir, Task: "sst2", Variant: nvib.ModelGaussian, Seed: 2, TargetEpsilon: 8}}
	pts := distinguishPoints(cells, loaded, paths)
	if len(pts) != 2 || pts[0].Seed != 2 || pts[0].TargetEpsilon != 8 || pts[1].Seed != 0 {
		t.Fatalf("points %+v", pts)
	}
	for i, p := range pts {
		r := reps[i].Pairs[0].Result
		if p.LowerBound != r.EpsilonLowerBound || p.Certified != reps[i].Certified.Epsilon ||
			p.Gaussian != *r.GaussianEpsilon || math.IsNaN(float64(p.Pair)) || p.Kind != attack.PairWitness {
			t.Errorf("point %d: %+v", i, p)
		}
	}
	dir := t.TempDir()
	files, err := PlotDistinguishROC(reps[0], filepath.Join(dir, "roc"))
	if err != nil || len(files) != 2 {
		t.Fatalf("ROC plots %v: %v", files, err)
	}
	checkPNG(t, filepath.Join(dir, "roc.png"), 0.02)
	roc := readFile(t, filepath.Join(dir, "roc.svg"))
	for _, rep := range reps[:1] {
		g, r := rep.Certified, rep.Pairs[0].Result
		for _, want := range []string{"distinguishing attack on gaussian releases", "distinguishing attack on gaussian releases (log-log)",
			fmt.Sprintf("certified (ε=%.3g, δ=%g): allowed below", float64(g.Epsilon), g.Delta),
			fmt.Sprintf("%s: ε ≥ %.3g (%s), AUC %.3f", attack.PairWitness, float64(r.EpsilonLowerBound), r.Method, r.AUC)} {
			if !strings.Contains(roc, ">"+want+"<") {
				t.Errorf("roc.svg lacks the label %q", want)
			}
		}
	}
	files, err = plotDistinguishFrontier(&taskTable{Task: "sst2"}, pts, filepath.Join(dir, "frontier"))
	if err != nil || len(files) != 2 {
		t.Fatalf("frontier plots %v: %v", files, err)
	}
	checkPNG(t, filepath.Join(dir, "frontier.png"), 0.02)
	// Each point is a marker of the variant's colour where its values fall
	// on the plot's log axes: the lower bound filled, the Gaussian epsilon
	// hollow.
	p, err := distinguishPlot("sst2", pts)
	if err != nil {
		t.Fatal(err)
	}
	svg := readFile(t, filepath.Join(dir, "frontier.svg"))
	x0, x1, y0, y1 := svgAxes(t, svg)
	at := func(v, lo, hi, c0, c1 float64) float64 {
		return c0 + (math.Log(v)-math.Log(lo))/(math.Log(hi)-math.Log(lo))*(c1-c0)
	}
	col := hexColor(variantColor(nvib.ModelGaussian))
	glyphs := svgGlyphs(svg)
	for i, pt := range pts {
		for _, m := range []struct {
			y      float64
			filled bool
		}{{max(float64(pt.LowerBound), p.Y.Min), true}, {float64(pt.Gaussian), false}} {
			cx, cy := at(float64(pt.Certified), p.X.Min, p.X.Max, x0, x1), at(m.y, p.Y.Min, p.Y.Max, y0, y1)
			found := false
			for _, g := range glyphs {
				if math.Abs(g.x-cx) < 0.05 && math.Abs(g.y-cy) < 0.05 && g.filled == m.filled && g.colour == col {
					found = true
				}
			}
			if !found {
				t.Errorf("point %d (certified %v, y %v, filled %v): no %s marker at (%.2f, %.2f) in frontier.svg; markers %+v",
					i, float64(pt.Certified), m.y, m.filled, col, cx, cy, glyphs)
			}
		}
	}
	if files, err := plotDistinguishFrontier(&taskTable{Task: "mrpc"}, pts, filepath.Join(dir, "none")); err != nil || len(files) != 0 {
		t.Errorf("a task without points: %v, %v", files, err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// svgGlyph is a circle marker of a gonum SVG: its centre (SVG units, y up
// as the plot's paths are written) and colour (#RRGGBB), filled or not.
type svgGlyph struct {
	x, y   float64
	colour string
	filled bool
}

var (
	glyphRE = regexp.MustCompile(`<path d="M([0-9.]+),([0-9.]+)A4,4 0 1 1 ([0-9.]+),[0-9.]+A4,4 0 1 1 [0-9.]+,[0-9.]+Z" style="([^"]*)"`)
	lineRE  = regexp.MustCompile(`<path d="M([0-9.]+),([0-9.]+)L([0-9.]+),([0-9.]+)" style="fill:none;stroke:#000000;stroke-width:0.5"`)
)

// svgGlyphs are the circle markers of a gonum SVG.
func svgGlyphs(svg string) []svgGlyph {
	var gs []svgGlyph
	for _, m := range glyphRE.FindAllStringSubmatch(svg, -1) {
		a, _ := strconv.ParseFloat(m[1], 64)
		y, _ := strconv.ParseFloat(m[2], 64)
		b, _ := strconv.ParseFloat(m[3], 64)
		g := svgGlyph{x: (a + b) / 2, y: y}
		if c, ok := strings.CutPrefix(m[4], "fill:#"); ok && len(c) >= 6 {
			g.colour, g.filled = "#"+c[:6], true
		} else if i := strings.Index(m[4], "stroke:#"); i >= 0 {
			g.colour = "#" + m[4][i+8:i+14]
		}
		gs = append(gs, g)
	}
	return gs
}

// svgAxes are the ends of a gonum SVG's axis lines (the longest black
// horizontal and vertical lines): the data area's x and y extents.
func svgAxes(t *testing.T, svg string) (x0, x1, y0, y1 float64) {
	t.Helper()
	var w, h float64
	for _, m := range lineRE.FindAllStringSubmatch(svg, -1) {
		var v [4]float64
		for i := range v {
			v[i], _ = strconv.ParseFloat(m[i+1], 64)
		}
		switch {
		case v[1] == v[3] && v[2]-v[0] > w:
			w, x0, x1 = v[2]-v[0], v[0], v[2]
		case v[0] == v[2] && v[3]-v[1] > h:
			h, y0, y1 = v[3]-v[1], v[1], v[3]
		}
	}
	if w == 0 || h == 0 {
		t.Fatal("no axis lines in the SVG")
	}
	return x0, x1, y0, y1
}

func hexColor(c color.Color) string {
	r, g, b, _ := c.RGBA()
	return fmt.Sprintf("#%02X%02X%02X", r>>8, g>>8, b>>8)
}
