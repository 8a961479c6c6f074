package mlm

import (
	"errors"
	"path/filepath"
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
	r := Resumed(o, func(name string) bool { return name == "steps" || name == "eval_every" || name == "lr" })
	if r.Out != "dir" || !r.Resume || r.StopAfterSteps != 3 || r.LR != 0 {
		t.Errorf("resumed %+v", r)
	}
	if r.Change.Steps == nil || *r.Change.Steps != 40 || r.Change.SaveEvery != nil || r.Change.EvalEvery == nil || *r.Change.EvalEvery != 0 {
		t.Errorf("change %+v", r.Change)
	}
}
