package attack

import (
	"context"
	"fmt"

	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/progress"
	"github.com/nvdp-project/nvdp/release"
)

// PairSpec says which candidate pairs a distinguishing attack, `nvdp attack
// distinguish`, tests: a Kind and what it needs. See docs/attacks.md.
type PairSpec struct {
	// Kind is PairWitness, PairArgmax, PairRandom, PairTexts or PairIndex.
	Kind string `json:"pair"`
	// Texts are PairTexts' two texts, under the model.
	Texts []string `json:"texts,omitempty"`
	// Index is PairIndex's pair of the posterior file.
	Index [2]int `json:"pair_index"`
	// Audit, for PairArgmax, is an audit JSON to read the argmax from
	// (its [audit.Report].Argmax) instead of auditing the posteriors ("": audit them).
	Audit string `json:"audit,omitempty"`
	// RandomPairs is how many pairs PairRandom draws (with the attack's
	// seed).
	RandomPairs int `json:"random_pairs"`
}

// candidate is one pair to attack and where it comes from; its Result has no
// Result yet.
type candidate struct {
	Pair   Pair
	Result PairResult
}

// candidatePairs returns the pairs of s to attack, from the model r and the
// posterior file p, either of which may be nil; source names p in errors. By
// kind:
//
//   - [PairWitness]: the pair attaining r's certificate at delta, or p's two
//     posteriors, as in a witness file of `nvdp certify --witness`;
//   - [PairTexts]: the posteriors of s.Texts under r;
//   - [PairIndex]: p's pair s.Index;
//   - [PairArgmax]: p's pair with the largest empirical RD, audited at the
//     default order with progress to report, or read from s.Audit;
//   - [PairRandom]: s.RandomPairs pairs of p drawn with seed.
//
// Where an option is at fault, the error is an [*option.Error] naming it:
// posteriors, texts, audit, pair or random_pairs.
func candidatePairs(ctx context.Context, s PairSpec, r *release.Releaser, p *privacy.Posteriors, source string, delta float64, seed uint64,
	report progress.Func) ([]candidate, error) {
	fromFile := func(i, j int) (candidate, error) {
		pair, err := pairFromPosteriors(p, i, j)
		if err != nil {
			return candidate{}, fmt.Errorf("posteriors of %s: %w", source, err)
		}
		return candidate{Pair: pair, Result: PairResult{Kind: s.Kind, Index: []int{i, j}}}, nil
	}
	one := func(c candidate, err error) ([]candidate, error) { return []candidate{c}, err }
	switch s.Kind {
	case PairWitness:
		if p != nil {
			if p.M != 2 {
				return nil, option.MentionErrorf([]string{"pair_index"}, "posteriors", source,
					"holds %d posteriors; a witness file ('nvdp certify --witness FILE') holds 2: use pair_index i,j for others", p.M)
			}
			return one(fromFile(0, 1))
		}
		pair, _, err := WitnessPair(r.ClipSet(), delta, r.Model().Variant == nvib.ModelGaussian)
		if err != nil {
			return nil, err
		}
		return []candidate{{Pair: pair, Result: PairResult{Kind: s.Kind}}}, nil
	case PairTexts:
		post, err := r.Posteriors(ctx, s.Texts)
		if err == nil {
			var pair Pair
			if pair, err = pairFromPosteriors(post, 0, 1); err == nil {
				return []candidate{{Pair: pair, Result: PairResult{Kind: s.Kind, Texts: s.Texts}}}, nil
			}
		}
		return nil, option.Errorf("texts", nil, "%v", err)
	case PairIndex:
		return one(fromFile(s.Index[0], s.Index[1]))
	case PairArgmax:
		var i, j int
		var rd *jsonfloat.Float
		order := privacy.DefaultOrder
		if s.Audit != "" {
			var err error
			if i, j, order, err = readArgmax(s.Audit); err != nil {
				return nil, option.Errorf("audit", nil, "%v", err)
			}
		} else {
			a, b, v, err := ArgmaxPair(ctx, p, order, report)
			if err != nil {
				return nil, option.Errorf("pair", PairArgmax, "%v", err)
			}
			i, j, rd = a, b, jsonfloat.New(v)
		}
		c, err := fromFile(i, j)
		c.Result.AuditRD, c.Result.AuditOrder = rd, order
		return one(c, err)
	case PairRandom:
		pairs, err := RandomPairs(p.M, s.RandomPairs, seed)
		if err != nil {
			return nil, option.Errorf("random_pairs", nil, "%v", err)
		}
		var out []candidate
		for _, ij := range pairs {
			c, err := fromFile(ij[0], ij[1])
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		return out, nil
	}
	return nil, option.Errorf("pair", s.Kind, "want %s, %s, %s, %s or %s", PairWitness, PairArgmax, PairRandom, PairTexts, PairIndex)
}

// distinguishPairs runs [Distinguish] with opt on each candidate and appends
// its result, set against rep.Certified, to rep.Pairs. The pairs are Gaussian
// pairs when rep's model is a gaussian one; a nil rep.Certified means none.
// Its errors name the pair's kind.
func distinguishPairs(ctx context.Context, rep *DistinguishReport, cands []candidate, opt DistinguishOptions) error {
	for _, c := range cands {
		if rep.Variant == nvib.ModelGaussian {
			c.Pair.Gaussian = true
		}
		res, err := Distinguish(ctx, c.Pair, opt)
		if err != nil {
			return fmt.Errorf("pair %s: %w", c.Result.Kind, err)
		}
		if rep.Certified != nil {
			if err := res.SetCertified(rep.Certified); err != nil {
				return err
			}
		}
		c.Result.Result = res
		rep.Pairs = append(rep.Pairs, c.Result)
	}
	return nil
}

// fileGuarantee returns the certified guarantee at delta of the clip
// constants in a posterior file's metadata, by [privacy.ClipSetFromMetadata]
// and [privacy.CertifyCurve], or nil when the file carries none.
func fileGuarantee(p *privacy.Posteriors, delta float64) (*privacy.Guarantee, error) {
	set, ok, err := privacy.ClipSetFromMetadata(p)
	if err != nil || !ok {
		return nil, err
	}
	return privacy.CertifyCurve(set, privacy.CurveOptions{Direction: privacy.DirectionStandard, Releases: 1, Delta: delta})
}
