package mlm

import (
	"strings"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/progress"
)

// Prepare checks the options of a new run before any work and returns them
// with InitFrom resolved: o is validated, the files other than InitFrom's
// are checked, then InitFrom, when set, is resolved to a local directory
// with [ResolveInitFrom] (a hub model downloaded, its bytes reported to
// report) and its files checked.
//
// Its errors are [*option.Error] naming the option, and a
// [*InitFromError] for an InitFrom that cannot be resolved.
func Prepare(o Options, report progress.Func) (Options, error) {
	if err := o.Validate(); err != nil {
		return o, err
	}
	if spec := o.InitFrom; spec != "" {
		others := o // the other files, before a download
		others.InitFrom = ""
		if err := others.CheckFiles(); err != nil {
			return o, err
		}
		dir, err := ResolveInitFrom(spec, report)
		if err != nil {
			return o, &InitFromError{Spec: spec, Err: err}
		}
		o.InitFrom = dir
	}
	return o, o.CheckFiles()
}

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
