package sweep

import (
	"errors"
	"testing"

	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/progress"
)

// TestSetRunner: Jobs < 1 is an *option.Error naming jobs; Jobs > 1 runs the
// cells as subprocesses (a Runner, no progress in this process); Jobs 1 runs
// them here, the progress given to the sweep and to its audits.
func TestSetRunner(t *testing.T) {
	calls := 0
	report := progress.Func(func(progress.Event) { calls++ })
	for _, tc := range []struct {
		jobs               int
		wantErr            string
		runner, inProgress bool
	}{
		{0, "jobs 0: must be >= 1", false, false},
		{-2, "jobs -2: must be >= 1", false, false},
		{1, "", false, true},
		{3, "", true, false},
	} {
		o := Options{Jobs: tc.jobs, Out: t.TempDir()}
		err := o.SetRunner([]string{"sweep-cell"}, report)
		var oe *option.Error
		if tc.wantErr != "" {
			if !errors.As(err, &oe) || oe.Option != "jobs" || err.Error() != tc.wantErr {
				t.Errorf("jobs %d: error %v, want %q naming jobs", tc.jobs, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("jobs %d: %v", tc.jobs, err)
		}
		if (o.Runner != nil) != tc.runner || (o.Progress != nil) != tc.inProgress || (o.Base.Audit.Progress != nil) != tc.inProgress {
			t.Errorf("jobs %d: runner %v, progress %v, audit progress %v", tc.jobs, o.Runner != nil, o.Progress != nil, o.Base.Audit.Progress != nil)
		}
	}
}

// TestStagesSummary: a plan's summary counts the cells of the grid stage,
// then of the main stage, and says whether the main cells are selected.
func TestStagesSummary(t *testing.T) {
	p := &StagePlan{Grid: make([]*Cell, 2), Main: make([]*Cell, 5), Selected: true}
	s := p.Summary("DIR")
	want := StagesSummary{Out: "DIR", Selected: true, Stages: []StageSummary{{StageGrid, 2}, {StageMain, 5}}}
	if s.Out != want.Out || s.Selected != want.Selected || len(s.Stages) != 2 || s.Stages[0] != want.Stages[0] || s.Stages[1] != want.Stages[1] {
		t.Errorf("summary %+v, want %+v", s, want)
	}
}
