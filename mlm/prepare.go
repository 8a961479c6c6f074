package mlm

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/internal/loop"
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
	statePath, optsPath := filepath.Join(o.Out, StateFile), filepath.Join(o.Out, OptionsFile)
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

// ResumeChanges are the options, by JSON key, that a resumed run may
// change ([Change]): steps, save_every and eval_every.
var ResumeChanges = []string{"steps", "save_every", "eval_every"}

// Resumed returns the options of the run resumed in o.Out: o's Out and
// StopAfterSteps, and, in Change, o's values of the options of
// [ResumeChanges] that given reports given. The other options are the
// saved ones, which [Run] reads.
func Resumed(o Options, given func(name string) bool) Options {
	r := Options{Out: o.Out, Resume: true, StopAfterSteps: o.StopAfterSteps}
	for i, to := range []**int{&r.Change.Steps, &r.Change.SaveEvery, &r.Change.EvalEvery} {
		if given(ResumeChanges[i]) {
			*to = []*int{&o.Steps, &o.SaveEvery, &o.EvalEvery}[i]
		}
	}
	return r
}
