package task

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/option"
)

// TestCheckDevice: a task without a GPU twin refuses cuda (naming device
// and task) and the host's noise (naming host_noise), and runs on the CPU
// with auto, giving the reason; a task with one runs on any device.
func TestCheckDevice(t *testing.T) {
	lid, _ := Lookup("lid")
	sst2, _ := Lookup("sst2")
	for _, tc := range []struct {
		name      string
		task      Task
		device    string
		hostNoise bool
		cpu       bool
		want      []string // the options of the error; nil: none
	}{
		{"lid cuda", lid, cuda.DeviceCUDA, false, false, []string{"device", "task", "device"}},
		{"lid auto", lid, cuda.DeviceAuto, false, true, nil},
		{"lid cpu", lid, cuda.DeviceCPU, false, false, nil},
		{"lid auto host noise", lid, cuda.DeviceAuto, true, true, []string{"host_noise"}},
		{"lid cpu host noise", lid, cuda.DeviceCPU, true, false, []string{"host_noise"}},
		{"sst2 cuda host noise", sst2, cuda.DeviceCUDA, true, false, nil},
		{"sst2 auto", sst2, cuda.DeviceAuto, false, false, nil},
	} {
		cpu, err := tc.task.Info().CheckDevice(tc.device, tc.hostNoise)
		var ce *option.CombinationError
		switch {
		case (cpu != nil) != tc.cpu || cpu != nil && cpu != tc.task.Info().DeviceErr:
			t.Errorf("%s: cpu %v, want the task's reason %v", tc.name, cpu, tc.cpu)
		case tc.want == nil && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != nil && (!errors.As(err, &ce) || !slices.Equal(ce.Options, tc.want)):
			t.Errorf("%s: %v, want the combination of %v", tc.name, err, tc.want)
		}
	}
}

// savedRun writes the options of a resolved text run (textFixture) into a
// new run directory, as a stopped run leaves them, and returns both.
func savedRun(t *testing.T) (string, model.Options) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "run")
	saved := textFixture(t, out)
	saved.Resolve()
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := model.SaveOptions(out, &saved); err != nil {
		t.Fatal(err)
	}
	return out, saved
}

// TestResumeConflicts: the options given to a resume with other values
// than the saved ones are refused, each with both values (as show writes
// them), naming resume and out; a given option with the saved value, a
// difference not given and a directory without a run are fine.
func TestResumeConflicts(t *testing.T) {
	out, saved := savedRun(t)
	o := saved
	o.Epochs, o.LR, o.Resume = saved.Epochs+1, saved.LR*2, true
	given := option.GivenNames
	show := func(_ string, v any) string { return "<" + fmt.Sprint(v) + ">" }
	for _, tc := range []struct {
		name  string
		given option.Given
		want  []string // the options of the error; nil: none
	}{
		{"epochs given", given("epochs"), []string{"resume", "epochs", "out"}},
		{"epochs and lr given", given("lr", "epochs", "seed"), []string{"resume", "epochs", "lr", "out"}},
		{"the saved seed given", given("seed"), nil},
		{"none given", nil, nil},
	} {
		err := ResumeConflicts(&o, nil, tc.given, show)
		var ce *option.CombinationError
		switch {
		case tc.want == nil && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != nil && (!errors.As(err, &ce) || !slices.Equal(ce.Options, tc.want)):
			t.Errorf("%s: %v, want the combination of %v", tc.name, err, tc.want)
		case tc.want != nil && !strings.Contains(err.Error(), "epochs <2> (saved <1>)"):
			t.Errorf("%s: %v: the values not as show writes them", tc.name, err)
		}
	}
	err := ResumeConflicts(&o, nil, given("epochs"), nil)
	if want := "resume continues the run in " + out + " with the options saved in its " + model.OptionsFile + "; these options ask for others: epochs 2 (saved 1); " +
		"leave them out (or give the saved values) to resume it, or start a new run in another out"; err == nil || err.Error() != want {
		t.Errorf("message %v, want %q", err, want)
	}
	o.Out = t.TempDir()
	if err := ResumeConflicts(&o, nil, given("epochs"), nil); err != nil {
		t.Errorf("no run: %v", err)
	}
}

// TestForRun: a run's task is its named one or, from its directory, the
// saved model's; the device, a resume's conflicts and the task's defaults
// are checked and applied in turn, each error naming its options.
func TestForRun(t *testing.T) {
	_, saved := savedRun(t)
	given := option.GivenNames
	for _, tc := range []struct {
		name     string
		set      func(o *model.Options)
		r        RunRequest
		task     string   // the task returned; "": none
		cpu      bool     // a reason to run on the CPU returned
		errOpt   string   // the option of an *option.Error
		combined []string // the options of an *option.CombinationError
	}{
		{"unknown task", func(o *model.Options) { o.Task = "cola2" }, RunRequest{}, "", false, "task", nil},
		{"named task", func(o *model.Options) {}, RunRequest{FromOut: true}, "sst2", false, "", nil},
		{"the model's task", func(o *model.Options) { o.Task, o.Resume = "", true }, RunRequest{FromOut: true}, "sst2", false, "", nil},
		{"no model in out", func(o *model.Options) { o.Task, o.Out = "", t.TempDir() }, RunRequest{FromOut: true}, "", false, "out", nil},
		{"no task, not from out", func(o *model.Options) { o.Task = "" }, RunRequest{}, "", false, "task", nil},
		{"lid on cuda", func(o *model.Options) { o.Task = "lid" }, RunRequest{Device: cuda.DeviceCUDA}, "", false, "", []string{"device", "task", "device"}},
		{"lid on auto", func(o *model.Options) { o.Task = "lid" }, RunRequest{Device: cuda.DeviceAuto}, "lid", true, "", nil},
		{"lid on auto, host noise", func(o *model.Options) { o.Task = "lid" }, RunRequest{Device: cuda.DeviceAuto, HostNoise: true}, "", true, "", []string{"host_noise"}},
		{"resume conflict", func(o *model.Options) { o.Resume, o.Epochs = true, 9 }, RunRequest{Given: given("epochs")}, "", false, "", []string{"resume", "epochs", "out"}},
		{"resume, epochs not given", func(o *model.Options) { o.Resume, o.Epochs = true, 9 }, RunRequest{}, "sst2", false, "", nil},
		{"lid refuses a text option", func(o *model.Options) { o.Task = "lid" }, RunRequest{Given: given("max_seq_len")}, "", false, "max_seq_len", nil},
	} {
		o := saved
		tc.set(&o)
		tk, cpu, err := ForRun(&o, &Data{}, tc.r)
		var oe *option.Error
		var ce *option.CombinationError
		switch {
		case (cpu != nil) != tc.cpu:
			t.Errorf("%s: cpu %v, want %v", tc.name, cpu, tc.cpu)
		case tc.task != "" && (err != nil || tk.Info().Name != tc.task):
			t.Errorf("%s: %v, %v; want task %s", tc.name, tk, err, tc.task)
		case tc.errOpt != "" && (!errors.As(err, &oe) || oe.Option != tc.errOpt):
			t.Errorf("%s: %v, want the option error of %s", tc.name, err, tc.errOpt)
		case tc.combined != nil && (!errors.As(err, &ce) || !slices.Equal(ce.Options, tc.combined)):
			t.Errorf("%s: %v, want the combination of %v", tc.name, err, tc.combined)
		}
	}
	// Apply gives the speech task its defaults for the options not given.
	o := saved
	o.Task = "lid"
	if _, _, err := ForRun(&o, &Data{}, RunRequest{}); err != nil || o.Encoder == saved.Encoder {
		t.Errorf("lid: %v, encoder %q kept", err, o.Encoder)
	}
}

// TestOpenDevice: a task with a GPU twin opens its device with open (its
// error returned as is); one without opens none and runs on the CPU.
func TestOpenDevice(t *testing.T) {
	lid, _ := Lookup("lid")
	sst2, _ := Lookup("sst2")
	failed := errors.New("no GPU")
	for _, tc := range []struct {
		task   Task
		opened int
		err    error
	}{{sst2, 1, failed}, {lid, 0, nil}} {
		opened := 0
		d, err := tc.task.Info().OpenDevice(func() (*cuda.Device, error) { opened++; return nil, failed })
		if d != nil || opened != tc.opened || err != tc.err {
			t.Errorf("%s: device %v, opened %d times, %v; want none, %d, %v", tc.task.Info().Name, d, opened, err, tc.opened, tc.err)
		}
	}
}
