package attack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"

	"github.com/nvdp-project/nvdp/audit"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/progress"
)

// Kinds of candidate pairs (PairResult.Kind; docs/attacks.md).
const (
	// PairWitness attains the certified bound, as [privacy.Certify]'s witness:
	// the attack on it comes closest to the certified epsilon.
	PairWitness = "witness"
	// PairArgmax is the pair of a posterior file with the largest empirical RD:
	// the audit's argmax, [audit.Report].Argmax.
	PairArgmax = "argmax"
	// PairRandom is a uniformly drawn pair of a posterior file.
	PairRandom = "random"
	// PairTexts is the pair of two texts given, under the model.
	PairTexts = "texts"
	// PairIndex is a pair of a posterior file given by its indices.
	PairIndex = "index"
)

// DistinguishFile is the conventional name of a [DistinguishReport] beside the
// model it attacks, written by `nvdp attack distinguish --out`. `nvdp report`
// finds the reports under a directory by their JSON, whatever their name.
const DistinguishFile = "attack_distinguish.json"

// DistinguishReport is the JSON output of `nvdp attack distinguish`: the
// release attacked, its certified guarantee of one release at the attack's
// delta, and one result per candidate pair.
type DistinguishReport struct {
	// Attack is "distinguish" (what the file holds).
	Attack string `json:"attack"`
	// Model is the model directory (empty for a posterior file alone),
	// Task and Variant its task and variant (nvib.ModelNVDPClipped,
	// nvib.ModelGaussian).
	Model   string `json:"model,omitempty"`
	Task    string `json:"task,omitempty"`
	Variant string `json:"variant,omitempty"`
	// Posteriors is the posterior file the pairs were taken from, if any;
	// Split the dataset split whose posteriors under Model they were taken
	// from, if any.
	Posteriors string `json:"posteriors,omitempty"`
	Split      string `json:"split,omitempty"`
	// Certified is the certified guarantee of one release (nil: the
	// posterior file carries no clip constants).
	Certified *privacy.Guarantee `json:"certified,omitempty"`
	Pairs     []PairResult       `json:"pairs"`
	// Plots are the ROC figures written (PNG and SVG).
	Plots []string `json:"plots,omitempty"`
}

// AttackDistinguish is DistinguishReport.Attack.
const AttackDistinguish = "distinguish"

// ReadDistinguishReport reads a [DistinguishReport] written by `nvdp attack
// distinguish --json`. Its errors name the file: not JSON, not a distinguish
// report because attack is not "distinguish", and a pair without its result.
func ReadDistinguishReport(path string) (*DistinguishReport, error) {
	return readReport("distinguish", path, func(r *DistinguishReport) error {
		if r.Attack != AttackDistinguish {
			return fmt.Errorf("attack %q, want %q", r.Attack, AttackDistinguish)
		}
		for i, p := range r.Pairs {
			if p.Result == nil {
				return fmt.Errorf("pair %d (%s) has no result", i, p.Kind)
			}
		}
		return nil
	})
}

// PairResult is the test of one pair: its kind; where it comes from, Index in
// the posterior file or the Texts; and, for an argmax pair, the audit's RD of
// it at AuditOrder.
type PairResult struct {
	Kind       string             `json:"kind"`
	Index      []int              `json:"index,omitempty"`
	Texts      []string           `json:"texts,omitempty"`
	AuditRD    *jsonfloat.Float   `json:"audit_rd,omitempty"`
	AuditOrder float64            `json:"audit_order,omitempty"`
	Result     *DistinguishResult `json:"result"`
}

// WitnessPair returns the pair of set that attains its certificate at the
// order of its (epsilon, delta) guarantee, and that guarantee. The pair is
// [privacy.Certify]'s witness at the best order of
// [privacy.CertifyCurve](set, nil, standard, 1, delta). gaussian says the
// release is that of a gaussian model.
//
// It returns an error for an invalid set or delta, and for a set that
// certifies no finite epsilon, since no pair attains an infinite bound.
func WitnessPair(set privacy.ClipSet, delta float64, gaussian bool) (Pair, *privacy.Guarantee, error) {
	g, err := privacy.CertifyCurve(set, privacy.CurveOptions{Direction: privacy.DirectionStandard, Releases: 1, Delta: delta})
	if err != nil {
		return Pair{}, nil, err
	}
	if math.IsInf(float64(g.Epsilon), 1) {
		return Pair{}, nil, fmt.Errorf("the clipping certifies no finite epsilon: no witness pair")
	}
	c, err := privacy.Certify(set, float64(g.BestOrder), privacy.DirectionStandard)
	if err != nil {
		return Pair{}, nil, err
	}
	pair, err := pairFromPosteriors(c.Witness, 0, 1)
	if err != nil {
		return Pair{}, nil, fmt.Errorf("witness: %w", err)
	}
	pair.Gaussian = gaussian
	return pair, g, nil
}

// ArgmaxPair returns the audit's argmax of p: the ordered pair (i, j) with
// the largest Eq. rdp bound at order, and that bound. It runs [audit.Audit]
// in principled mode over every ordered pair, with default options otherwise,
// and reports progress as [audit.Audit] does. Its errors are the audit's, and
// no finite pair.
func ArgmaxPair(ctx context.Context, p *privacy.Posteriors, order float64, report progress.Func) (i, j int, rd float64, err error) {
	opt := audit.DefaultOptions()
	opt.Order, opt.Progress, opt.MaxStoredPairs, opt.ListInvalid = order, report, 0, 0
	r, err := audit.Audit(ctx, p, opt)
	if err != nil {
		return 0, 0, 0, err
	}
	if len(r.Argmax) != 2 {
		return 0, 0, 0, fmt.Errorf("audit of %d posteriors: no pair with a finite bound", p.M)
	}
	return r.Argmax[0], r.Argmax[1], float64(r.RDMax), nil
}

// RandomPairs draws count distinct ordered pairs (i, j) of m posteriors, with
// i != j, uniformly from PCG(seed, 0x7061697273). It returns an error when
// m < 2, or count is < 1 or above m(m-1).
func RandomPairs(m, count int, seed uint64) ([][2]int, error) {
	if m < 2 {
		return nil, fmt.Errorf("random pairs of %d posteriors: want at least 2", m)
	}
	if count < 1 || int64(count) > int64(m)*int64(m-1) {
		return nil, fmt.Errorf("%d random pairs of %d posteriors: want 1 to %d", count, m, int64(m)*int64(m-1))
	}
	rng := rand.New(rand.NewPCG(seed, 0x7061697273)) // "pairs"
	seen := map[[2]int]bool{}
	var out [][2]int
	for len(out) < count {
		i, j := rng.IntN(m), rng.IntN(m-1)
		if j >= i {
			j++
		}
		if p := [2]int{i, j}; !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, nil
}

// readArgmax reads the audit's argmax pair and its order from an audit JSON
// file, as [ParseArgmax] parses it. Its errors name the file.
func readArgmax(path string) (i, j int, order float64, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, 0, err
	}
	return ParseArgmax(path, data)
}

// ParseArgmax parses the argmax pair and the Renyi order of an audit from
// the output of `nvdp audit --json`, with top-level "argmax" and "order", or
// from the report.json of `nvdp run`, with "privacy": {"full": {"argmax",
// "order"}}.
//
// Its errors name name. They are: not JSON; no argmax, as in an audit without
// a finite pair or a reference-mode audit; and an argmax that is not two
// different indices >= 0.
func ParseArgmax(name string, data []byte) (i, j int, order float64, err error) {
	type auditArgmax struct {
		Argmax []int   `json:"argmax"`
		Order  float64 `json:"order"`
	}
	var f struct {
		auditArgmax
		Privacy *struct {
			Full *auditArgmax `json:"full"`
		} `json:"privacy"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&f); err != nil {
		return 0, 0, 0, fmt.Errorf("audit %s: %w", name, err)
	}
	a := f.auditArgmax
	if a.Argmax == nil && f.Privacy != nil && f.Privacy.Full != nil {
		a = *f.Privacy.Full
	}
	switch {
	case a.Argmax == nil:
		return 0, 0, 0, fmt.Errorf("audit %s: no argmax (want the JSON of 'nvdp audit --json' or a run's report.json, of a principled audit with a finite pair)", name)
	case len(a.Argmax) != 2 || a.Argmax[0] < 0 || a.Argmax[1] < 0 || a.Argmax[0] == a.Argmax[1]:
		return 0, 0, 0, fmt.Errorf("audit %s: argmax %v: want two different indices >= 0", name, a.Argmax)
	}
	return a.Argmax[0], a.Argmax[1], a.Order, nil
}
