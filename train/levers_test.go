package train

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
)

// TestRadiusSchedule: the radius of each step, by hand (start 4, half the
// steps, C_mu 0.5 over 100 steps: 2, 1.25 at a quarter, 0.5 from the half
// on), and nil is C_mu throughout.
func TestRadiusSchedule(t *testing.T) {
	r := &RadiusSchedule{Start: 4, Fraction: 0.5}
	for _, tc := range []struct {
		step int
		want float64
	}{{0, 2}, {25, 1.25}, {49, 0.5 * (4 - 3*49.0/50)}, {50, 0.5}, {99, 0.5}} {
		if got := r.Radius(tc.step, 100, 0.5); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("step %d: radius %v, want %v", tc.step, got, tc.want)
		}
	}
	var none *RadiusSchedule
	if got := none.Radius(0, 100, 0.5); got != 0.5 {
		t.Errorf("nil schedule: %v, want 0.5", got)
	}
}

// TestLeverOptionsValidate: the options of the levers (head_reads,
// radius_schedule) are refused where they do not apply, each error naming
// its option.
func TestLeverOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mod    func(*Options)
		option string // "": valid
	}{
		{"release head", func(o *Options) { o.TargetEpsilon, o.HeadReads = 8, nvib.HeadReadsRelease }, ""},
		{"block head", func(o *Options) { o.TargetEpsilon, o.HeadReads = 8, nvib.HeadReadsBlock }, ""},
		{"unknown head input", func(o *Options) { o.TargetEpsilon, o.HeadReads = 8, "rows" }, "head_reads"},
		{"baseline release head", func(o *Options) { o.Variant, o.HeadReads = nvib.ModelBaseline, nvib.HeadReadsRelease }, "head_reads"},
		{"reference release head", func(o *Options) { o.Mode, o.HeadReads = privacy.ModeReference, nvib.HeadReadsRelease }, "head_reads"},
		{"schedule", func(o *Options) { o.TargetEpsilon, o.RadiusSchedule = 8, &RadiusSchedule{4, 0.5} }, ""},
		{"gaussian schedule", func(o *Options) {
			o.Variant, o.TargetEpsilon, o.RadiusSchedule = nvib.ModelGaussian, 8, &RadiusSchedule{2, 1}
		}, ""},
		{"start 1", func(o *Options) { o.TargetEpsilon, o.RadiusSchedule = 8, &RadiusSchedule{1, 0.5} }, "radius_schedule.start"},
		{"start NaN", func(o *Options) { o.TargetEpsilon, o.RadiusSchedule = 8, &RadiusSchedule{math.NaN(), 0.5} }, "radius_schedule.start"},
		{"fraction 0", func(o *Options) { o.TargetEpsilon, o.RadiusSchedule = 8, &RadiusSchedule{4, 0} }, "radius_schedule.fraction"},
		{"fraction 1.5", func(o *Options) { o.TargetEpsilon, o.RadiusSchedule = 8, &RadiusSchedule{4, 1.5} }, "radius_schedule.fraction"},
		{"nvdp schedule", func(o *Options) { o.Variant, o.RadiusSchedule = nvib.ModelNVDP, &RadiusSchedule{4, 0.5} }, "radius_schedule"},
		{"reference schedule", func(o *Options) { o.Mode, o.RadiusSchedule = privacy.ModeReference, &RadiusSchedule{4, 0.5} }, "radius_schedule"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := targetOptions(tc.mod)
			err := o.Validate()
			var oe *OptionError
			switch {
			case tc.option == "" && err != nil:
				t.Fatal(err)
			case tc.option != "" && (!errors.As(err, &oe) || oe.Option != tc.option):
				t.Fatalf("Validate = %v, want an error of option %s", err, tc.option)
			}
		})
	}
}

// TestLeversTrain: a short run with the release head and a schedule of the
// radius saves the model at C_mu with the head reading the release (no
// NVDP block), and the schedule changes the trained weights (the radius of
// the early steps is not C_mu).
func TestLeversTrain(t *testing.T) {
	glueDir, vocab := synthGlue(t, 64, 16)
	weights := map[string]map[string][]float32{}
	for _, tc := range []struct {
		name  string
		sched *RadiusSchedule
	}{{"fixed", nil}, {"schedule", &RadiusSchedule{Start: 4, Fraction: 1}}} {
		o := synthOptions(t, glueDir, vocab, filepath.Join(t.TempDir(), tc.name))
		o.Epochs, o.CMu, o.HeadReads, o.RadiusSchedule = 1, 0.5, nvib.HeadReadsRelease, tc.sched
		if _, err := Run(context.Background(), o, nil); err != nil {
			t.Fatal(err)
		}
		b := readBundle(t, o.Out)
		if b.Model.Cfg.HeadReads != nvib.HeadReadsRelease || b.Model.Block != nil {
			t.Fatalf("%s: head_reads %q, block %v", tc.name, b.Model.Cfg.HeadReads, b.Model.Block != nil)
		}
		if b.Model.Cfg.Clip.CMu != 0.5 || b.Model.ClipRadius() != 0.5 {
			t.Fatalf("%s: saved C_mu %v, radius %v, want 0.5", tc.name, b.Model.Cfg.Clip.CMu, b.Model.ClipRadius())
		}
		lo, err := LoadOptions(o.Out)
		if err != nil {
			t.Fatal(err)
		}
		if (lo.RadiusSchedule == nil) != (tc.sched == nil) || lo.HeadReads != nvib.HeadReadsRelease {
			t.Fatalf("%s: saved options %+v, %q", tc.name, lo.RadiusSchedule, lo.HeadReads)
		}
		weights[tc.name] = readWeights(t, o.Out)
	}
	w := weights["fixed"]["nvib.mu_proj.weight"]
	if len(w) == 0 || slices.Equal(w, weights["schedule"]["nvib.mu_proj.weight"]) {
		t.Errorf("the schedule of the radius left mu_proj as it was without it (%d weights)", len(w))
	}
}
