package model

import (
	"fmt"

	"github.com/nvdp-project/nvdp/cuda"
)

// Checked are training options ready to build and train: resolved and
// validated once, by Check for a new run or by Resume for a resumed one.
// Build and train.RunChecked take them without checking them again. The
// zero value is not checked: Build refuses it.
type Checked struct {
	o  Options
	ok bool
}

// Check resolves a copy of o with [Options.Resolve], validates it with
// [Options.Validate], and returns the checked options. The files are
// [Options.CheckFiles]'s to check. Its errors are [*OptionError].
func Check(o Options) (Checked, error) {
	o.Resolve()
	if err := o.Validate(); err != nil {
		return Checked{}, err
	}
	return Checked{o: o, ok: true}, nil
}

// Resume returns the checked options of a run resumed in from.Out: the
// options saved there, read by [LoadOptions], which validates them, with
// from's directory and run-time choices, the [RunTime] that the options file
// does not hold.
//
// Its errors are a missing directory, and those of [RunTime.Validate] and
// [LoadOptions].
func Resume(from Options) (Checked, error) {
	if from.Out == "" {
		return Checked{}, optionError("out", nil, "required: the directory of the run to resume")
	}
	if err := from.RunTime.Validate(); err != nil {
		return Checked{}, err
	}
	saved, err := LoadOptions(from.Out)
	if err != nil {
		return Checked{}, err
	}
	o := *saved
	o.Resume, o.Out = true, from.Out // the directory may have moved since
	o.RunTime = from.RunTime
	return Checked{o: o, ok: true}, nil
}

// OnDevice returns c to train on the GPU d (nil: the CPU), with the
// training noise drawn on the host when hostNoise is set: the run-time
// choices a caller makes once the options are checked, as opening a GPU.
// Its error is that of the one option a device refuses, radius_schedule
// (an [*OptionError]).
func (c Checked) OnDevice(d *cuda.Device, hostNoise bool) (Checked, error) {
	c.o.Device, c.o.HostNoise = d, hostNoise
	if err := c.o.validateRadiusSchedule(); err != nil {
		return Checked{}, err
	}
	return c, nil
}

// Options returns a copy of the checked options.
func (c Checked) Options() Options { return c.o }

// check is the error of options that no Check or Resume made.
func (c Checked) check() error {
	if !c.ok {
		return fmt.Errorf("model options not checked (model.Check, model.Resume)")
	}
	return nil
}
