package mlm

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/option"
)

// TestResolveInitFrom: hf:DIR and DIR are the directory; a missing one is
// an error saying so.
func TestResolveInitFrom(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		spec, want, err string
	}{
		{"hf:" + dir, dir, ""},
		{dir, dir, ""},
		{"hf:" + dir + "/missing", "", "directory does not exist"},
		{"./missing-dir", "", "directory does not exist"},
	} {
		got, err := ResolveInitFrom(tc.spec, nil)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.spec, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.spec, got, err, tc.want)
		}
	}
}

// TestPrepare: a new run's options are validated, its files checked (the
// others before InitFrom is resolved), and InitFrom resolved to its
// directory; an InitFrom that does not resolve is an *InitFromError naming
// the spec.
func TestPrepare(t *testing.T) {
	corpus := filepath.Join(t.TempDir(), "corpus.txt")
	writeFile(t, corpus, "a line\n")
	base := DefaultOptions()
	base.Corpus, base.Vocab, base.Steps, base.Out = corpus, corpus, 2, t.TempDir()
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		name   string
		mod    func(o *Options)
		option string // of an *option.Error; "": none
		init   bool   // an *InitFromError
	}{
		{"valid", func(*Options) {}, "", false},
		{"steps", func(o *Options) { o.Steps = 0 }, "steps", false},
		{"corpus", func(o *Options) { o.Corpus = missing }, "corpus", false},
		{"corpus before init_from", func(o *Options) { o.Corpus, o.InitFrom = missing, "hf:"+missing }, "corpus", false},
		{"init_from", func(o *Options) { o.InitFrom = "hf:" + missing }, "", true},
		{"init_from no config", func(o *Options) { o.InitFrom = "hf:" + t.TempDir() }, "init_from", false},
	} {
		o := base
		tc.mod(&o)
		_, err := Prepare(o, nil)
		var oe *option.Error
		var ie *InitFromError
		gotOption := ""
		if errors.As(err, &oe) {
			gotOption = oe.Option
		}
		if gotOption != tc.option || errors.As(err, &ie) != tc.init || (err == nil) != (tc.option == "" && !tc.init) {
			t.Errorf("%s: %v, want option %q, init-from error %v", tc.name, err, tc.option, tc.init)
		}
		if ie != nil && !strings.HasPrefix(ie.Error(), "hf:"+missing+": ") {
			t.Errorf("%s: %q does not name the spec", tc.name, ie.Error())
		}
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "config.json"), "{}")
	o := base
	o.InitFrom = "hf:" + dir
	if got, err := Prepare(o, nil); err != nil || got.Options().InitFrom != dir || got.Options().Vocab != base.Vocab {
		t.Errorf("init_from hf:%s: %+v, %v; want %s", dir, got.Options(), err, dir)
	}
}

// TestResumed: a resumed run keeps o's Out and StopAfterSteps and changes
// only the options given among steps, save_every and eval_every.
func TestResumed(t *testing.T) {
	o := DefaultOptions()
	o.Out, o.StopAfterSteps, o.Steps, o.SaveEvery, o.EvalEvery, o.LR = "dir", 3, 40, 7, 0, 1
	r := resumed(o, func(name string) bool { return name == "steps" || name == "eval_every" || name == "lr" })
	if r.Out != "dir" || !r.Resume || r.StopAfterSteps != 3 || r.LR != 0 {
		t.Errorf("resumed %+v", r)
	}
	if r.Change.Steps == nil || *r.Change.Steps != 40 || r.Change.SaveEvery != nil || r.Change.EvalEvery == nil || *r.Change.EvalEvery != 0 {
		t.Errorf("change %+v", r.Change)
	}
}

// TestRequested: a new run is o as given, init_from with config refused;
// a resumed run is resumed's, refused with init_from or with any option
// but out and resumeChanges, those named in sorted order.
func TestRequested(t *testing.T) {
	given := option.GivenNames
	o := DefaultOptions()
	o.Out, o.Steps, o.SaveEvery = "out", 7, 3
	for _, tc := range []struct {
		name    string
		mod     func(o *Options)
		given   option.Given
		options []string // the combination's; nil: valid
		msg     string
	}{
		{"new run", func(o *Options) {}, given("steps", "config", "out"), nil, ""},
		{"init from", func(o *Options) { o.InitFrom = "hf:x" }, given("init_from", "steps"), nil, ""},
		{"init from and config", func(o *Options) { o.InitFrom = "hf:x" }, given("init_from", "config"), []string{"init_from", "config"},
			"init_from takes the model config from the checkpoint; do not give config"},
		{"resume", func(o *Options) { o.Resume = true }, given("out", "steps", "save_every", "eval_every"), nil, ""},
		{"resume and init from", func(o *Options) { o.Resume, o.InitFrom = true, "hf:x" }, given("init_from"), []string{"init_from", "resume"}, ""},
		{"resume with saved options", func(o *Options) { o.Resume = true }, given("seq", "lr", "steps"), []string{"lr", "seq", "steps", "save_every", "eval_every"},
			"lr, seq: a resumed run uses the options saved in " + OptionsFile + "; only steps, save_every and eval_every change them"},
		{"resume with one", func(o *Options) { o.Resume = true }, given("corpus"), []string{"corpus", "steps", "save_every", "eval_every"}, ""},
	} {
		in := o
		tc.mod(&in)
		got, err := Requested(in, tc.given)
		var ce *option.CombinationError
		switch {
		case tc.options == nil && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.options == nil && !in.Resume && (got.InitFrom != in.InitFrom || got.Steps != in.Steps || got.Config != in.Config):
			t.Errorf("%s: %+v, want the options as given", tc.name, got)
		case tc.options == nil && in.Resume && (!got.Resume || got.Out != "out" || got.Seq != 0 || got.Change.Steps == nil || *got.Change.Steps != 7):
			t.Errorf("%s: %+v, want resumed's", tc.name, got)
		case tc.options == nil:
		case !errors.As(err, &ce) || !slices.Equal(ce.Options, tc.options):
			t.Errorf("%s: %v, want a combination of %q", tc.name, err, tc.options)
		case tc.msg != "" && err.Error() != tc.msg:
			t.Errorf("%s: %q, want %q", tc.name, err, tc.msg)
		}
	}
}
