package task

import (
	"fmt"
	"strings"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/option"
)

// CheckDevice checks the device asked for a run of the task, before any
// work: device as [cuda.Select] takes it, and hostNoise, the noise drawn
// on the host ([model.RunTime]). A task with a GPU twin (DeviceErr nil)
// runs on any. A task without one refuses [cuda.DeviceCUDA], a
// [*option.CombinationError] naming device and task, and hostNoise, one
// naming host_noise; with [cuda.DeviceAuto] it runs on the CPU, and cpu
// is the reason, DeviceErr (nil: the device asked for runs it). cpu is
// set with an error too: the reason comes first.
func (i Info) CheckDevice(device string, hostNoise bool) (cpu, err error) {
	why := i.DeviceErr
	if why == nil {
		return nil, nil
	}
	switch device {
	case cuda.DeviceCUDA:
		return nil, option.Combination("%s cuda: "+option.Escape(why.Error())+"; run %s "+option.Escape(i.Name)+" with %s cpu", "device", "task", "device")
	case cuda.DeviceAuto:
		cpu = why
	}
	if hostNoise {
		return cpu, option.Combination("%s: task "+option.Escape(i.Name)+" draws its noise on the CPU only", "host_noise")
	}
	return cpu, nil
}

// OpenDevice opens the device a run of the task runs on with open (a nil
// device: the CPU): a task without a GPU twin (DeviceErr) runs on the CPU
// and opens none, [Info.CheckDevice] having refused the options that ask
// otherwise. Errors are open's, as it returns them.
func (i Info) OpenDevice(open func() (*cuda.Device, error)) (*cuda.Device, error) {
	if i.DeviceErr != nil {
		return nil, nil
	}
	return open()
}

// ResumeConflicts checks the options given explicitly (given; nil: none)
// to a resume of the run in o.Out, before any work: the run continues with
// the options saved in its directory, so an option given with another
// value than the saved one ([ResumeDifferences]) is an error, a
// [*option.CombinationError] naming resume, each such option with its
// given and saved values, and out. An option given with the saved value
// is fine, as are the differences of options not given (the saved ones
// are used). show writes an option's value as the caller takes it (nil:
// fmt.Sprint), such as a flag's "auto" or "off".
func ResumeConflicts(o *model.Options, d *Data, given option.Given, show func(option string, v any) string) error {
	if show == nil {
		show = func(_ string, v any) string { return fmt.Sprint(v) }
	}
	diffs, file := ResumeDifferences(o, d)
	names := []string{"resume"}
	var asked []string
	for _, df := range diffs {
		if given.Has(df.Option) {
			names = append(names, df.Option)
			asked = append(asked, "%s "+option.Escape(show(df.Option, df.Given))+" (saved "+option.Escape(show(df.Option, df.Saved))+")")
		}
	}
	if len(asked) == 0 {
		return nil
	}
	return option.Combination("%s continues the run in "+option.Escape(o.Out)+" with the options saved in its "+option.Escape(file)+
		"; these options ask for others: "+strings.Join(asked, ", ")+
		"; leave them out (or give the saved values) to resume it, or start a new run in another %s", append(names, "out")...)
}

// RunRequest is what a run asks of its task besides its options: where
// the task comes from, the device, and which options were given.
type RunRequest struct {
	// FromOut takes the task of the model in the run's directory when
	// the options name none: a resume, or a pipeline that skips training.
	FromOut bool
	// Device and HostNoise are the device asked for, as [Info.CheckDevice]
	// takes them.
	Device    string
	HostNoise bool
	// Given reports the options given explicitly (nil: none); Show writes
	// an option's value in a conflict of a resume ([ResumeConflicts]).
	Given option.Given
	Show  func(option string, v any) string
}

// ForRun returns the task of a training run of o with d, as `nvdp train`
// and `nvdp run` resolve it before any work: o.Task ([Lookup]), or, with
// r.FromOut and no o.Task, the task of the model in o.Out ([Open]); the
// device it runs on ([Info.CheckDevice], whose cpu it returns); for a
// resume (o.Resume), the options given against those saved
// ([ResumeConflicts]); then the task's defaults for the options not given
// ([Task.Apply], which sets them in o).
//
// Errors: Lookup's; an [*option.Error] naming out (its directory holds no
// model, the cause kept); those of CheckDevice, ResumeConflicts and Apply.
func ForRun(o *model.Options, d *Data, r RunRequest) (t Task, cpu, err error) {
	if r.FromOut && o.Task == "" {
		m, err := Open(o.Out)
		if err != nil {
			return nil, nil, option.Wrap("out", err)
		}
		t = m.Task
	} else if t, err = Lookup(o.Task); err != nil {
		return nil, nil, err
	}
	if cpu, err = t.Info().CheckDevice(r.Device, r.HostNoise); err != nil {
		return nil, cpu, err
	}
	if o.Resume {
		if err := ResumeConflicts(o, d, r.Given, r.Show); err != nil {
			return nil, cpu, err
		}
	}
	if err := t.Apply(o, r.Given); err != nil {
		return nil, cpu, err
	}
	return t, cpu, nil
}
