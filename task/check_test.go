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

// TestResumeConflicts: the options given to a resume with other values
// than the saved ones are refused, each with both values (as show writes
// them), naming resume and out; a given option with the saved value, a
// difference not given and a directory without a run are fine.
func TestResumeConflicts(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	saved := textFixture(t, out)
	saved.Resolve()
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := model.SaveOptions(out, &saved); err != nil {
		t.Fatal(err)
	}
	o := saved
	o.Epochs, o.LR, o.Resume = saved.Epochs+1, saved.LR*2, true
	given := func(names ...string) option.Given { return func(n string) bool { return slices.Contains(names, n) } }
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
	if want := "resume continues the run in " + out + " with the options saved in its " + model.OptionsFile + "; these flags ask for others: epochs 2 (saved 1); " +
		"leave them out (or give the saved values) to resume it, or start a new run in another out"; err == nil || err.Error() != want {
		t.Errorf("message %v, want %q", err, want)
	}
	o.Out = t.TempDir()
	if err := ResumeConflicts(&o, nil, given("epochs"), nil); err != nil {
		t.Errorf("no run: %v", err)
	}
}
