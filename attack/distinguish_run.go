package attack

import (
	"context"
	"fmt"

	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/release"
	"github.com/nvdp-project/nvdp/train"
)

// DistinguishInputs say what a distinguishing attack, `nvdp attack
// distinguish`, attacks: a model, the posteriors its pairs come from and the
// pairs. See [RunDistinguish] and docs/attacks.md, "Pairs".
type DistinguishInputs struct {
	// Model is a model directory (nvdp-clipped or gaussian); "": none, the
	// pairs and the certified guarantee come from Posteriors.
	Model string `json:"model,omitempty"`
	// Posteriors is a posterior file: a witness of `nvdp certify --witness`
	// or the posteriors to take pairs from. "": with a model, the posteriors
	// of Split under it, computed in memory, where the pair needs them.
	Posteriors string `json:"posteriors,omitempty"`
	// Split and GlueDir choose the posteriors computed under Model without
	// Posteriors: the split (dev, test or train) and its GLUE directory ("":
	// the model's).
	Split   string `json:"split,omitempty"`
	GlueDir string `json:"glue_dir,omitempty"`
	// Pair is the candidate pairs.
	Pair PairSpec `json:"pair"`
	// Given reports which inputs were given explicitly, by JSON key (nil:
	// none), for the checks of inputs given together in Validate: texts or
	// pair_index given is the pair, whose kind is then PairTexts or
	// PairIndex; pair, random_pairs and split are checked against the
	// others only where given, as their defaults always combine.
	Given option.Given `json:"-"`
}

// Validate reports the first invalid input, or inputs given together that
// do not combine, before any file is read.
//
// A [*option.CombinationError] names the inputs given together by their
// JSON keys: texts and pair_index (one pair), texts or pair_index with
// pair, neither model nor posteriors, texts without a model, audit without
// pair argmax, random_pairs without pair random, split or glue_dir without
// a model or with posteriors. An [*option.Error] names one input: pair (an
// unknown kind), texts (not two) or random_pairs (< 1).
func (in DistinguishInputs) Validate() error {
	s, g := in.Pair, in.Given
	kind := in.pairKind()
	given, pairGiven := g.Any("texts", "pair_index")
	switch {
	case g.Has("texts") && g.Has("pair_index"):
		return option.Combination("%s and %s: give one pair", "texts", "pair_index")
	case pairGiven && g.Has("pair"):
		return option.Combination("%s and %s: %s is the pair", given, "pair", given)
	case in.Model == "" && in.Posteriors == "":
		return option.Combination("%s DIR or %s FILE is required", "model", "posteriors")
	case kind == PairTexts && in.Model == "":
		return option.Combination("%s needs %s (the texts' posteriors come from the model)", "texts", "model")
	case (g.Has("audit") || s.Audit != "") && kind != PairArgmax:
		return option.Combination("%s gives the argmax pair: use it with %s argmax", "audit", "pair")
	case g.Has("random_pairs") && kind != PairRandom:
		return option.Combination("%s is for %s random", "random_pairs", "pair")
	case (g.Has("split") || g.Has("glue_dir") || in.GlueDir != "") && (in.Posteriors != "" || in.Model == ""):
		return option.Combination("%s and %s choose the posteriors computed under %s; with %s FILE that file is used", "split", "glue_dir", "model", "posteriors")
	case kind != PairWitness && kind != PairArgmax && kind != PairRandom && kind != PairTexts && kind != PairIndex:
		return option.MentionErrorf([]string{"texts", "pair_index"}, "pair", kind, "want witness, argmax or random (or texts, pair_index)")
	case kind == PairTexts && len(s.Texts) != 2:
		return option.Errorf("texts", nil, "%d texts, want 2 (A,B; quote a text with a comma: '\"a, b\",c')", len(s.Texts))
	case s.RandomPairs < 1:
		return option.Errorf("random_pairs", s.RandomPairs, "want >= 1")
	}
	return nil
}

// pairKind is the kind of the pair: PairTexts or PairIndex where texts or
// pair_index was given (Given), else Pair.Kind.
func (in DistinguishInputs) pairKind() string {
	switch {
	case in.Given.Has("texts"):
		return PairTexts
	case in.Given.Has("pair_index"):
		return PairIndex
	}
	return in.Pair.Kind
}

// RunDistinguish attacks the candidate pairs of in with opt: it checks both,
// loads the model (any release, proved or not: an attack measures it) and
// the posteriors the pairs need, finds the pairs (see [PairSpec]) and runs
// [Distinguish] on each. The report records the model, the
// posteriors' source and the certified guarantee at opt.Delta: the model's,
// else the one of the posterior file's clip constants. opt.Progress receives the
// audit of an argmax pair and the releases drawn.
//
// Where an input or option is at fault, the error is an [*option.Error]
// naming it: model, posteriors, delta, or those of [DistinguishInputs.Validate]
// (also a [*option.CombinationError]), texts, audit, pair,
// random_pairs and [DistinguishOptions.Validate]; computing a split's posteriors, a
// [*SplitError].
func RunDistinguish(ctx context.Context, in DistinguishInputs, opt DistinguishOptions) (*DistinguishReport, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	in.Pair.Kind = in.pairKind()
	rep := &DistinguishReport{Attack: AttackDistinguish}
	r, file, err := in.load(rep, opt.Delta)
	if err != nil {
		return nil, err
	}
	cands, err := candidatePairs(ctx, in.Pair, r, file, in.source(), opt.Delta, opt.Seed, opt.Progress)
	if err != nil {
		if in.Pair.Kind == PairWitness && file == nil {
			return nil, option.Errorf("model", option.Show(in.Model), "%v", err)
		}
		return nil, err
	}
	if err := distinguishPairs(ctx, rep, cands, opt); err != nil {
		return nil, err
	}
	return rep, nil
}

// load loads in.Model (nil without it) and, unless the pair needs none, the
// posteriors of the pairs, recording in rep the model, the posteriors'
// source and the certified guarantee at delta.
func (in DistinguishInputs) load(rep *DistinguishReport, delta float64) (*release.Releaser, *privacy.Posteriors, error) {
	var r *release.Releaser
	var err error
	if in.Model != "" {
		if r, err = release.Load(in.Model, release.Options{AllowUnproved: true}); err != nil {
			return nil, nil, option.Errorf("model", nil, "%v", err)
		}
		if err := r.SetDelta(delta); err != nil {
			return nil, nil, option.Errorf("delta", nil, "%v", err)
		}
		info := r.Model()
		rep.Model, rep.Task, rep.Variant, rep.Certified = in.Model, info.Task, info.Variant, r.Guarantee()
	}
	if in.Pair.Kind == PairTexts || (in.Pair.Kind == PairWitness && in.Posteriors == "") {
		return r, nil, nil
	}
	file, err := in.posteriors(r)
	if err != nil {
		return nil, nil, err
	}
	rep.Posteriors = in.Posteriors
	if in.Posteriors == "" {
		rep.Split = in.Split
	}
	if rep.Certified == nil {
		if rep.Certified, err = fileGuarantee(file, delta); err != nil {
			return nil, nil, option.Errorf("posteriors", option.Show(rep.Posteriors), "%v", err)
		}
	}
	return r, file, nil
}

// posteriors reads in.Posteriors or, without it, computes the model's
// posteriors of in.Split in memory ([train.SplitPosteriors]); with a model,
// their shape must be the model's release.
func (in DistinguishInputs) posteriors(r *release.Releaser) (*privacy.Posteriors, error) {
	if in.Posteriors != "" {
		p, err := privacy.ReadPosteriors(in.Posteriors)
		if err != nil {
			return nil, option.Errorf("posteriors", nil, "%v", err)
		}
		if r != nil {
			if n, pp := r.Shape(); p.N != n || p.P != pp {
				return nil, option.Errorf("posteriors", option.Show(in.Posteriors), "posteriors of [N %d, P %d], the model releases [N %d, P %d]", p.N, p.P, n, pp)
			}
		}
		return p, nil
	}
	b, err := model.Load(in.Model)
	if err != nil {
		return nil, option.Errorf("model", nil, "%v", err)
	}
	p, err := train.SplitPosteriors(b, in.Split, in.GlueDir)
	if err != nil {
		return nil, &SplitError{Model: in.Model, Split: in.Split, Err: err}
	}
	return p, nil
}

// SplitError is the error of computing the posteriors of a split under a
// model ([DistinguishInputs] without Posteriors): which, and why.
type SplitError struct {
	Model, Split string
	Err          error // an [*option.Error] where an option is at fault
}

func (e *SplitError) Error() string {
	return fmt.Sprintf("model %s, split %s: %v", e.Model, e.Split, e.Err)
}

func (e *SplitError) Unwrap() error { return e.Err }

// source names the posteriors the pairs come from.
func (in DistinguishInputs) source() string {
	if in.Posteriors != "" {
		return in.Posteriors
	}
	return fmt.Sprintf("the %s split under %s", in.Split, in.Model)
}
