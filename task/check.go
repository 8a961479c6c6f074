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
		return nil, option.Combination("%s cuda: "+escape(why.Error())+"; run %s "+escape(i.Name)+" with %s cpu", "device", "task", "device")
	case cuda.DeviceAuto:
		cpu = why
	}
	if hostNoise {
		return cpu, option.Combination("%s: task "+escape(i.Name)+" draws its noise on the CPU only", "host_noise")
	}
	return cpu, nil
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
			asked = append(asked, "%s "+escape(show(df.Option, df.Given))+" (saved "+escape(show(df.Option, df.Saved))+")")
		}
	}
	if len(asked) == 0 {
		return nil
	}
	return option.Combination("%s continues the run in "+escape(o.Out)+" with the options saved in its "+escape(file)+
		"; these flags ask for others: "+strings.Join(asked, ", ")+
		"; leave them out (or give the saved values) to resume it, or start a new run in another %s", append(names, "out")...)
}

// escape is s in a format of [option.Combination], its % doubled.
func escape(s string) string { return strings.ReplaceAll(s, "%", "%%") }
