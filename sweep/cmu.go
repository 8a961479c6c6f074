package sweep

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/train"
)

// CMuCandidate is one C_mu of the grid with its dev utility and privacy, as
// means over the grid seeds.
type CMuCandidate struct {
	CMu float64 `json:"c_mu"`
	// Utility is the task's selection metric on dev (MRPC F1, STS-B Spearman, else accuracy).
	Utility  float64 `json:"utility"`
	Seeds    int     `json:"seeds"`
	Eligible bool    `json:"eligible"` // utility within the tolerance of the best
	// RDMax (nats) and BDPEpsilon are the audited worst-case bounds: +Inf
	// (JSON "Infinity") when undefined (a seed's audit had invalid pairs or a
	// non-finite bound), nil (absent) when not computed (a seed's cell has no
	// audit). Files written before package jsonfloat have null for +Inf: it
	// reads as +Inf (UnmarshalJSON).
	RDMax      *jsonfloat.Float `json:"rd_max,omitempty"`
	BDPEpsilon *jsonfloat.Float `json:"bdp_epsilon,omitempty"`
}

// UnmarshalJSON reads a candidate, rd_max and bdp_epsilon with readBound.
func (c *CMuCandidate) UnmarshalJSON(b []byte) error {
	type plain CMuCandidate
	var raw struct {
		plain
		RDMax      json.RawMessage `json:"rd_max"`
		BDPEpsilon json.RawMessage `json:"bdp_epsilon"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*c = CMuCandidate(raw.plain)
	var err error
	if c.RDMax, err = readBound(raw.RDMax); err != nil {
		return fmt.Errorf("rd_max: %w", err)
	}
	if c.BDPEpsilon, err = readBound(raw.BDPEpsilon); err != nil {
		return fmt.Errorf("bdp_epsilon: %w", err)
	}
	return nil
}

// readBound reads a worst-case bound as every version of report.json and
// c_mu_selection.json wrote it: absent is nil (not computed); null is +Inf,
// the undefined bound (before package jsonfloat every non-finite bound was
// written as null, and the current files write it as "Infinity" or "NaN");
// otherwise a jsonfloat.Float.
func readBound(raw json.RawMessage) (*jsonfloat.Float, error) {
	switch {
	case len(raw) == 0:
		return nil, nil
	case bytes.Equal(bytes.TrimSpace(raw), []byte("null")):
		return jsonfloat.New(math.Inf(1)), nil
	}
	var f jsonfloat.Float
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, err
	}
	return &f, nil
}

// CMuSelection is Out/<task>/c_mu_selection.json.
type CMuSelection struct {
	Task       string         `json:"task"`
	Metric     string         `json:"metric"`
	Lambda     float64        `json:"lambda"`
	Tolerance  float64        `json:"tolerance"`
	Best       float64        `json:"best_utility"`
	CMu        float64        `json:"c_mu"`
	Tightest   float64        `json:"tightest_eligible_c_mu"` // eligible C_mu with the smallest rd_max (then BDP)
	Candidates []CMuCandidate `json:"candidates"`
	Reason     string         `json:"reason"`
}

// SelectCMu chooses the mean clipping radius C_mu by the paper's rule, from
// §3.2, "Mean clipping": "the smallest value that preserves near-peak
// validation utility while yielding the tightest worst-case RD/BDP bound".
// The candidates whose dev utility is within tol of the best, an absolute
// tolerance in metric units, are eligible, and the smallest eligible C_mu is
// chosen.
//
// The eligible candidate with the tightest worst-case bound is recorded too,
// ordered by rd_max, then BDP eps_mu, then the smaller C_mu; an undefined or
// uncomputed bound is the loosest, as in [privacy.CompareBounds]. When it
// differs from the choice, the reason says so: a smaller radius bounds the
// worst case tighter in theory, by Eq. rdp, but the audited maximum is an
// empirical quantity.
//
// It returns an error for no candidates, a NaN utility, a duplicate C_mu, or
// a negative or NaN tolerance.
func SelectCMu(cands []CMuCandidate, tol float64) (CMuSelection, error) {
	if len(cands) == 0 {
		return CMuSelection{}, fmt.Errorf("C_mu selection: no candidates")
	}
	if !(tol >= 0) {
		return CMuSelection{}, fmt.Errorf("C_mu selection: tolerance %v must be >= 0", tol)
	}
	cs := slices.Clone(cands)
	sort.Slice(cs, func(i, j int) bool { return cs[i].CMu < cs[j].CMu })
	best := math.Inf(-1)
	for i, c := range cs {
		if math.IsNaN(c.Utility) {
			return CMuSelection{}, fmt.Errorf("C_mu selection: C_mu %v has no utility (NaN)", c.CMu)
		}
		if i > 0 && c.CMu == cs[i-1].CMu {
			return CMuSelection{}, fmt.Errorf("C_mu selection: duplicate C_mu %v", c.CMu)
		}
		best = max(best, c.Utility)
	}
	sel := CMuSelection{Tolerance: tol, Best: best, CMu: math.NaN(), Tightest: math.NaN()}
	tight := -1
	var elig []string
	for i := range cs {
		// A tiny slack so that a tolerance equal to a difference of decimal values counts.
		cs[i].Eligible = cs[i].Utility >= best-tol-1e-12
		if !cs[i].Eligible {
			continue
		}
		if math.IsNaN(sel.CMu) {
			sel.CMu = cs[i].CMu
		}
		if tight < 0 || tighter(cs[i], cs[tight]) {
			tight = i
		}
		elig = append(elig, fmt.Sprintf("%g (%.4f, rd_max %s)", cs[i].CMu, cs[i].Utility, fmtBound(cs[i].RDMax)))
	}
	sel.Tightest = cs[tight].CMu
	sel.Candidates = cs
	sel.Reason = fmt.Sprintf("best dev utility %.4f; within %g of it: C_mu %s; chose the smallest, C_mu = %g",
		best, tol, strings.Join(elig, ", "), sel.CMu)
	if sel.Tightest == sel.CMu {
		sel.Reason += ", which also has the tightest worst-case bound among them"
	} else {
		chosen := slices.IndexFunc(cs, func(c CMuCandidate) bool { return c.CMu == sel.CMu })
		sel.Reason += fmt.Sprintf("; note: C_mu = %g has a tighter audited worst case (rd_max %s vs %s)", sel.Tightest,
			fmtBound(cs[tight].RDMax), fmtBound(cs[chosen].RDMax))
	}
	return sel, nil
}

// tighter reports whether a's worst case is tighter than b's: a smaller
// rd_max, then a smaller BDP epsilon, then a smaller C_mu.
func tighter(a, b CMuCandidate) bool {
	if c := compareBounds(a.RDMax, b.RDMax); c != 0 {
		return c < 0
	}
	if c := compareBounds(a.BDPEpsilon, b.BDPEpsilon); c != 0 {
		return c < 0
	}
	return a.CMu < b.CMu
}

// compareBounds is privacy.CompareBounds with a bound not computed (nil)
// as undefined.
func compareBounds(a, b *jsonfloat.Float) int {
	v := func(f *jsonfloat.Float) float64 {
		if f == nil {
			return math.NaN()
		}
		return float64(*f)
	}
	return privacy.CompareBounds(v(a), v(b))
}

// fmtBound writes a bound for the reason text: 4 significant digits,
// "undefined" when non-finite, "not audited" when not computed.
func fmtBound(f *jsonfloat.Float) string {
	switch {
	case f == nil:
		return "not audited"
	case math.IsInf(float64(*f), 1) || math.IsNaN(float64(*f)):
		return "undefined"
	}
	return strconv.FormatFloat(float64(*f), 'g', 4, 64)
}

// selectTask selects C_mu for task from its grid cells (the mean utility
// and bounds over the grid seeds of each C_mu) and writes the selection to
// Out/<task>/c_mu_selection.json.
func selectTask(o *Options, task string, grid []*Cell) (*CMuSelection, error) {
	t, err := glue.LookupTask(task)
	if err != nil {
		return nil, err
	}
	var cands []CMuCandidate
	for _, c := range grid {
		if c.Task != task {
			continue
		}
		r, err := train.ReadReport(c.Dir)
		if err != nil {
			return nil, fmt.Errorf("grid cell %s: %w", c.ID, err)
		}
		u, ok := r.Utility[t.Metric]
		if !ok {
			return nil, fmt.Errorf("grid cell %s: report has no %s", c.ID, t.Metric)
		}
		rd, eps, err := auditedBounds(c.Dir)
		if err != nil {
			return nil, fmt.Errorf("grid cell %s: %w", c.ID, err)
		}
		i := slices.IndexFunc(cands, func(x CMuCandidate) bool { return x.CMu == c.CMu })
		if i < 0 {
			cands = append(cands, CMuCandidate{CMu: c.CMu})
			i = len(cands) - 1
		}
		cands[i].add(u, rd, eps)
	}
	sel, err := SelectCMu(cands, *o.CMuTolerance)
	if err != nil {
		return nil, err
	}
	sel.Task, sel.Metric, sel.Lambda = task, t.Metric, *o.CMuLambda
	if err := atomicfile.WriteJSON(filepath.Join(o.Out, task, CMuSelectionFile), sel); err != nil {
		return nil, fmt.Errorf("C_mu selection: %w", err)
	}
	return &sel, nil
}

// add folds one grid seed's utility and bounds into the running means of
// c (the worst case over seeds is their mean too, as in the tables); a bound
// not computed for one seed is not computed for the mean.
func (c *CMuCandidate) add(u float64, rd, eps *jsonfloat.Float) {
	n := float64(c.Seeds)
	mean := func(m, x *jsonfloat.Float) *jsonfloat.Float {
		if x == nil || (m == nil && n > 0) {
			return nil
		}
		var prev float64
		if m != nil {
			prev = float64(*m)
		}
		return jsonfloat.New((prev*n + float64(*x)) / (n + 1))
	}
	c.Utility = (c.Utility*n + u) / (n + 1)
	c.RDMax, c.BDPEpsilon = mean(c.RDMax, rd), mean(c.BDPEpsilon, eps)
	c.Seeds++
}

// auditedBounds reads the worst-case bounds of the audit in dir/report.json
// (train.PrivacySummary's rd_max and bdp_epsilon, whose decoder reads every
// version of the file, older nulls included): nil when the cell has no audit
// (no privacy block, no pairs), +Inf when the audit had invalid pairs; an
// undefined bound (NaN) counts as +Inf in the comparisons (privacy.CompareBounds).
func auditedBounds(dir string) (rd, eps *jsonfloat.Float, err error) {
	r, err := train.ReadReport(dir)
	if err != nil {
		return nil, nil, err
	}
	switch p := r.Privacy; {
	case p == nil || p.Pairs == 0:
		return nil, nil, nil
	case p.InvalidPairs > 0:
		return jsonfloat.New(math.Inf(1)), jsonfloat.New(math.Inf(1)), nil
	default:
		return jsonfloat.New(float64(p.RDMax)), p.BDPEpsilon, nil
	}
}
