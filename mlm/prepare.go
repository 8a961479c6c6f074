package mlm

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/internal/loop"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/progress"
)

// Prepared is a pretraining run whose options [Prepare] checked once.
type Prepared struct{ o Options }

// Prepare checks the options of a run once, before any work, and returns
// the run for [Prepared.Run]. For a new run, o is validated, the files
// other than InitFrom's are checked, then InitFrom, when set, is resolved
// to a local directory with [ResolveInitFrom] (a hub model downloaded, its
// bytes reported to report), the files checked with it, and o.Out must hold
// no run ([ErrRunExists]). A resumed run's options are those saved in o.Out,
// which must hold a checkpoint ([ErrNoCheckpoint]), with o.Change applied
// and validated.
//
// Its errors are [*option.Error] naming the option (one read from the saved
// options file wrapped with the file's path), and an [*InitFromError] for
// an InitFrom that cannot be resolved.
func Prepare(o Options, report progress.Func) (Prepared, error) {
	statePath, optsPath := filepath.Join(o.Out, stateFile), filepath.Join(o.Out, OptionsFile)
	if o.Resume {
		o, err := checkResumed(o, statePath, optsPath)
		return Prepared{o}, err
	}
	if o.Change != (Change{}) {
		return Prepared{}, errors.New("pretrain: Options.Change changes a resumed run's options; give the options themselves to a new run")
	}
	if err := o.Validate(); err != nil {
		return Prepared{}, err
	}
	if spec := o.InitFrom; spec != "" {
		others := o // the other files, before a download; the config is InitFrom's
		others.InitFrom, others.ModelConfig = "", &encoder.Config{}
		if err := others.CheckFiles(); err != nil {
			return Prepared{}, err
		}
		dir, err := ResolveInitFrom(spec, report)
		if err != nil {
			return Prepared{}, &InitFromError{Spec: spec, Err: err}
		}
		o.InitFrom = dir
		if o.Vocab == "" {
			o.Vocab = dir // the initial checkpoint's own tokenizer files
		}
	}
	if err := o.CheckFiles(); err != nil {
		return Prepared{}, err
	}
	if err := loop.Check(statePath, false); err != nil {
		return Prepared{}, fmt.Errorf("pretrain: %w", err)
	}
	return Prepared{o}, nil
}

// Options returns the checked options.
func (p Prepared) Options() Options { return p.o }

// InitFromError is the error of an InitFrom that names no checkpoint
// this program can read: Spec as given, Err why.
type InitFromError struct {
	Spec string
	Err  error
}

func (e *InitFromError) Error() string { return e.Spec + ": " + e.Err.Error() }
func (e *InitFromError) Unwrap() error { return e.Err }

// ResolveInitFrom returns the local directory of the checkpoint spec
// names: hf:DIR, DIR or hf:owner/name, a hub model downloaded into the
// cache when it is not there, its bytes reported to report
// ([encoder.ResolveHF]).
func ResolveInitFrom(spec string, report progress.Func) (string, error) {
	return encoder.ResolveHF(strings.TrimPrefix(spec, "hf:"), encoder.LoadOptions{Progress: report})
}

// Requested returns the options of the run that o asks for, given which
// of them were given explicitly (given; nil: none): o for a new run, and
// for o.Resume the run resumed in o.Out (resumed). [Prepare] checks them.
//
// Errors: a [*option.CombinationError] for init_from given with config
// (the checkpoint has its config) or with o.Resume (the checkpoint holds
// the weights), and for a resumed run given any option other than out and
// resumeChanges, which it names in sorted order: the saved options are
// used.
func Requested(o Options, given option.Given) (Options, error) {
	if !o.Resume {
		if o.InitFrom != "" && given.Has("config") {
			return o, option.Combination("%s takes the model config from the checkpoint; do not give %s", "init_from", "config")
		}
		return o, nil
	}
	if o.InitFrom != "" {
		return o, option.Combination("%s starts a run; %s continues one (its checkpoint already holds the weights)", "init_from", "resume")
	}
	var fixed []string
	for _, k := range option.Keys(o) {
		if given.Has(k) && k != "out" && !slices.Contains(resumeChanges, k) {
			fixed = append(fixed, k)
		}
	}
	if len(fixed) > 0 {
		slices.Sort(fixed)
		format := strings.Repeat("%s, ", len(fixed)-1) + "%s: a resumed run uses the options saved in " + OptionsFile +
			"; only %s, %s and %s change them"
		return o, option.Combination(format, append(fixed, resumeChanges...)...)
	}
	return resumed(o, given), nil
}

// resumeChanges are the options, by JSON key, that a resumed run may
// change ([Change]): steps, save_every and eval_every.
var resumeChanges = []string{"steps", "save_every", "eval_every"}

// resumed returns the options of the run resumed in o.Out: o's Out and
// StopAfterSteps, and, in Change, o's values of the options of
// resumeChanges that given reports given. The other options are the
// saved ones, which [Run] reads.
func resumed(o Options, given func(name string) bool) Options {
	r := Options{Out: o.Out, Resume: true, StopAfterSteps: o.StopAfterSteps}
	for i, to := range []**int{&r.Change.Steps, &r.Change.SaveEvery, &r.Change.EvalEvery} {
		if given(resumeChanges[i]) {
			*to = []*int{&o.Steps, &o.SaveEvery, &o.EvalEvery}[i]
		}
	}
	return r
}
