package model

import (
	"errors"
	"math"
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
