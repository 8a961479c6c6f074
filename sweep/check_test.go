package sweep

import (
	"slices"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/model"
)

// TestChangedOptions: the options of a resumed cell that differ from the
// sweep's are listed by their train_options.json keys, except where the run
// is and how it was started, and the calibrated constants of a calibrated run.
func TestChangedOptions(t *testing.T) {
	base := model.Options{Task: "sst2", Encoder: "scratch:bert-tiny", Epochs: 3, LR: 1e-3, CMu: 2, Seed: 1}
	drop := 0.1
	small, big := encoder.Config{HiddenSize: 32}, encoder.Config{HiddenSize: 64}
	for _, tc := range []struct {
		name        string
		saved, want func(o *model.Options)
		diff        []string
	}{
		{"same", nil, nil, nil},
		{"epochs and lr", func(o *model.Options) { o.Epochs, o.LR = 5, 2e-3 }, nil, []string{"epochs", "lr"}},
		{"where and how it runs", func(o *model.Options) {
			o.Out, o.Resume, o.GlueDir, o.Vocab, o.StopAfterSteps = "/a", true, "/g", "v.txt", 7
		}, nil, nil},
		{"C_mu of an uncalibrated run", func(o *model.Options) { o.CMu = 4 }, nil, []string{"c_mu"}},
		{"constants of a calibrated run", func(o *model.Options) { o.CMu, o.LogvarMargin, o.CAlphaMin, o.Calibrated = 0.3, 0.7, 0.2, true }, nil, nil},
		{"target of a calibrated run", func(o *model.Options) { o.CMu, o.TargetEpsilon, o.Calibrated = 0.3, 8, true }, nil, []string{"target_epsilon"}},
		{"dropout", nil, func(o *model.Options) { o.Dropout = drop }, []string{"dropout"}},
		{"nested", func(o *model.Options) { o.ScratchConfig = &small }, func(o *model.Options) { o.ScratchConfig = &big }, []string{"scratch_config"}},
		{"nested, equal", func(o *model.Options) { o.ScratchConfig = &small }, func(o *model.Options) { c := small; o.ScratchConfig = &c }, nil},
	} {
		saved, want := base, base
		if tc.saved != nil {
			tc.saved(&saved)
		}
		if tc.want != nil {
			tc.want(&want)
		}
		if diff := changedOptions(saved, want); !slices.Equal(diff, tc.diff) {
			t.Errorf("%s: %v; want %v", tc.name, diff, tc.diff)
		}
	}
}

// TestCheckTarget: a finished calibrated cell must hold the target the
// sweep asks for (epsilon, RD and, with a target, the releases); a cell
// without saved options passes only when no target is asked for.
func TestCheckTarget(t *testing.T) {
	opts := func(mod func(o *model.Options)) *model.Options {
		o := model.DefaultOptions()
		o.Task, o.GlueDir, o.Vocab, o.Out = "sst2", "g", "v.txt", "o"
		mod(&o)
		o.Resolve()
		return &o
	}
	eps := func(e float64, releases int) func(o *model.Options) {
		return func(o *model.Options) { o.TargetEpsilon, o.Releases = e, releases }
	}
	none := func(o *model.Options) { o.HandSetClipping = true }
	for _, tc := range []struct {
		name        string
		saved, want *model.Options // saved nil: no train_options.json
		err         string
	}{
		{"same target", opts(eps(8, 1)), opts(eps(8, 1)), ""},
		{"no target either side", opts(none), opts(none), ""},
		{"other epsilon", opts(eps(8, 1)), opts(eps(9, 1)),
			"holds a run with target epsilon 8 / RD none (1 releases), the sweep wants epsilon 9 / RD none (1 releases)"},
		{"other releases", opts(eps(8, 1)), opts(eps(8, 3)), "(1 releases), the sweep wants epsilon 8 / RD none (3 releases)"},
		{"target asked, none held", opts(none), opts(func(o *model.Options) { o.TargetRD = 3 }),
			"holds a run with target epsilon none / RD none (0 releases), the sweep wants epsilon none / RD 3 (1 releases)"},
		{"target held, none asked", opts(func(o *model.Options) { o.TargetRD = 3 }), opts(none), "holds a run with target epsilon none / RD 3 (1 releases), the sweep wants epsilon none / RD none (0 releases)"},
		{"no saved options, no target", nil, opts(none), ""},
		{"no saved options, a target", nil, opts(eps(1, 1)), "train_options.json"},
	} {
		c := &Cell{ID: "c", Dir: t.TempDir()}
		if tc.saved != nil {
			if err := model.SaveOptions(c.Dir, tc.saved); err != nil {
				t.Fatal(err)
			}
		}
		err := checkTarget(c, *tc.want)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.err)
		}
	}
}
