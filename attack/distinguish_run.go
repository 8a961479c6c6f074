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
}

// Validate reports the first invalid input as an [*option.Error] naming it
// by its JSON key: model (neither a model nor posteriors, or texts without
// a model), pair (an unknown kind), texts (not two) or random_pairs (< 1).
func (in DistinguishInputs) Validate() error {
	s := in.Pair
	switch {
	case in.Model == "" && in.Posteriors == "":
		return option.MentionErrorf([]string{"posteriors"}, "model", nil, "a model directory or posteriors is required")
	case s.Kind != PairWitness && s.Kind != PairArgmax && s.Kind != PairRandom && s.Kind != PairTexts && s.Kind != PairIndex:
		return option.MentionErrorf([]string{"texts", "pair_index"}, "pair", s.Kind, "want witness, argmax or random (or texts, pair_index)")
	case s.Kind == PairTexts && in.Model == "":
		return option.Errorf("texts", nil, "needs a model (the texts' posteriors come from the model)")
	case s.Kind == PairTexts && len(s.Texts) != 2:
		return option.Errorf("texts", nil, "%d texts, want 2 (A,B; quote a text with a comma: '\"a, b\",c')", len(s.Texts))
	case s.RandomPairs < 1:
		return option.Errorf("random_pairs", s.RandomPairs, "want >= 1")
	}
	return nil
}

// RunDistinguish attacks the candidate pairs of in with opt: it checks both,
// loads the model (any release, proved or not: an attack measures it) and
// the posteriors the pairs need, finds the pairs ([Candidates]) and runs the
// test on each ([DistinguishPairs]). The report records the model, the
// posteriors' source and the certified guarantee at opt.Delta: the model's,
// else the posterior file's ([FileGuarantee]). opt.Progress receives the
// audit of an argmax pair and the releases drawn.
//
// Where an input or option is at fault, the error is an [*option.Error]
// naming it: model, posteriors, delta, or those of Validate, [Candidates] and
// [DistinguishOptions.Validate]; computing a split's posteriors, a
// [*SplitError].
func RunDistinguish(ctx context.Context, in DistinguishInputs, opt DistinguishOptions) (*DistinguishReport, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	rep := &DistinguishReport{Attack: AttackDistinguish}
	r, file, err := in.load(rep, opt.Delta)
	if err != nil {
		return nil, err
	}
	cands, err := Candidates(ctx, in.Pair, r, file, in.source(), opt.Delta, opt.Seed, opt.Progress)
	if err != nil {
		if in.Pair.Kind == PairWitness && file == nil {
			return nil, option.Errorf("model", shownPath{in.Model}, "%v", err)
		}
		return nil, err
	}
	if err := DistinguishPairs(ctx, rep, cands, opt); err != nil {
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
		if rep.Certified, err = FileGuarantee(file, delta); err != nil {
			return nil, nil, option.Errorf("posteriors", shownPath{rep.Posteriors}, "%v", err)
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
				return nil, option.Errorf("posteriors", shownPath{in.Posteriors}, "posteriors of [N %d, P %d], the model releases [N %d, P %d]", p.N, p.P, n, pp)
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
