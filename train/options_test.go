package train

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/audit"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
)

// TestLoadOptionsValidates: a saved options file is checked as new options
// are (a resumed run must not divide by a batch size 0 or train at lr -1);
// model.SaveOptions refuses what model.LoadOptions would refuse. Errors name the file
// and the option.
func TestLoadOptionsValidates(t *testing.T) {
	good := model.DefaultOptions()
	good.Task, good.GlueDir, good.Encoder, good.Vocab, good.HandSetClipping = "sst2", "glue", "scratch:bert-tiny", "vocab.txt", true
	good.Resolve()
	for _, tc := range []struct {
		name string
		mod  func(m map[string]any)
		want string
	}{
		{"batch size 0", func(m map[string]any) { m["batch_size"] = 0 }, "batch_size 0: must be >= 1"},
		{"negative lr", func(m map[string]any) { m["lr"] = -1 }, "lr -1: must be > 0"},
		{"epochs 0", func(m map[string]any) { m["epochs"] = 0 }, "epochs 0"},
		{"newer version", func(m map[string]any) { m["options_version"] = 5 }, "options_version 5: this program reads versions 0, 2, 3 and 4"},
		{"version 0 with batch size 0", func(m map[string]any) { delete(m, "options_version"); m["batch_size"] = 0 }, "batch_size 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o := good
			o.Out = dir
			b, err := json.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			tc.mod(m)
			if b, err = json.Marshal(m); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, model.OptionsFile)
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := model.LoadOptions(dir); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("err = %v, want one naming %s and containing %q", err, path, tc.want)
			}
			// a resumed run reads them so (beside a checkpoint): no division by a batch size 0
			if err := os.WriteFile(filepath.Join(dir, CheckpointFile), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Run(context.Background(), model.Options{RunTime: model.RunTime{Out: dir, Resume: true}}, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("resume: err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	bad := good
	bad.BatchSize = 0
	dir := t.TempDir()
	if err := model.SaveOptions(dir, &bad); err == nil || !strings.Contains(err.Error(), "batch_size 0") {
		t.Errorf("SaveOptions of batch size 0: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, model.OptionsFile)); !os.IsNotExist(err) {
		t.Errorf("invalid options written (%v)", err)
	}
}

// TestResumeStopAfterNegative: a resumed run checks the run-time
// StopAfterSteps it takes from its caller: -1 is an *option.Error naming
// stop_after_steps, not the loop's "negative count".
func TestResumeStopAfterNegative(t *testing.T) {
	_, err := Run(context.Background(), model.Options{RunTime: model.RunTime{Out: t.TempDir(), Resume: true, StopAfterSteps: -1}}, nil)
	var oe *option.Error
	if !errors.As(err, &oe) || oe.Option != "stop_after_steps" || !strings.Contains(err.Error(), "stop_after_steps -1: must be >= 0") {
		t.Errorf("err = %v, want an *option.Error of stop_after_steps", err)
	}
}

// TestResolveAudit: an audit that names no mode takes the training's; a
// given one is kept; the audit options are validated.
func TestResolveAudit(t *testing.T) {
	for _, tc := range []struct {
		train, audit, want privacy.Mode
	}{
		{privacy.ModeReference, "", privacy.ModeReference},
		{privacy.ModePrincipled, "", privacy.ModePrincipled},
		{privacy.ModeReference, privacy.ModePrincipled, privacy.ModePrincipled},
	} {
		po := DefaultPipelineOptions()
		po.Train.Mode, po.Audit.Mode = tc.train, tc.audit
		if err := po.ResolveAudit(); err != nil || po.Audit.Mode != tc.want {
			t.Errorf("train %s audit %q: %s, %v; want %s", tc.train, tc.audit, po.Audit.Mode, err, tc.want)
		}
	}
	// the audit's options named in the pipeline: those the training has
	// too prefixed, the others as the audit names them
	for _, tc := range []struct {
		set  func(o *audit.Options)
		want string
	}{
		{func(o *audit.Options) { o.Pairs = -5 }, "pairs"},
		{func(o *audit.Options) { o.Mode = "other" }, "audit_mode"},
		{func(o *audit.Options) { o.Mode, o.BatchSize = privacy.ModeReference, 1 }, "audit_batch_size"},
		{func(o *audit.Options) { o.Delta = 2 }, "delta"},
	} {
		po := DefaultPipelineOptions()
		tc.set(&po.Audit)
		var oe *option.Error
		if err := po.ResolveAudit(); !errors.As(err, &oe) || oe.Option != tc.want {
			t.Errorf("%v, want an option error naming %s", err, tc.want)
		}
	}
}

// TestCheckSkipTrain: a pipeline that skips training refuses a privacy
// target (epsilon or RD), naming target and skip_train; without the target, or training, it is fine.
func TestCheckSkipTrain(t *testing.T) {
	for _, tc := range []struct {
		name    string
		skip    bool
		eps, rd float64
		refused bool
	}{
		{"skip, no target", true, model.NoTarget(), model.NoTarget(), false},
		{"skip, epsilon", true, 8, model.NoTarget(), true},
		{"skip, rd", true, model.NoTarget(), 2, true},
		{"train, epsilon", false, 8, model.NoTarget(), false},
	} {
		po := DefaultPipelineOptions()
		po.SkipTrain, po.Train.TargetEpsilon, po.Train.TargetRD, po.Train.Out = tc.skip, tc.eps, tc.rd, "runs/100%"
		err := po.CheckSkipTrain()
		var ce *option.CombinationError
		switch {
		case !tc.refused && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.refused && (!errors.As(err, &ce) || !slices.Equal(ce.Options, []string{"target", "skip_train"})):
			t.Errorf("%s: %v, want the combination of target and skip_train", tc.name, err)
		}
	}
}

// TestResolveTargets: with a target, the clipping constants given stay
// fixed and the target takes the audit's order (RD) or delta (epsilon);
// without one, nothing is fixed and the order and delta are kept.
func TestResolveTargets(t *testing.T) {
	given := option.Given(func(n string) bool { return n == "c_mu" || n == "c_alpha_min" })
	for _, tc := range []struct {
		name              string
		eps, rd           float64
		fixed             bool
		wantOrd, wantDelt float64
	}{
		{"no target", model.NoTarget(), model.NoTarget(), false, 5, 1e-3},
		{"epsilon", 8, model.NoTarget(), true, 5, 1e-7},
		{"rd", model.NoTarget(), 2, true, 3, 1e-3},
	} {
		po := DefaultPipelineOptions()
		po.Train.TargetEpsilon, po.Train.TargetRD, po.Train.TargetOrder, po.Train.TargetDelta = tc.eps, tc.rd, 5, 1e-3
		po.Audit.Order, po.Audit.Delta = 3, 1e-7
		po.ResolveTargets(given)
		o := po.Train
		if o.FixCMu != tc.fixed || o.FixCAlphaMin != tc.fixed || o.FixLogvarMargin || o.TargetOrder != tc.wantOrd || o.TargetDelta != tc.wantDelt {
			t.Errorf("%s: fixed c_mu %v c_alpha_min %v logvar_margin %v, order %v, delta %v; want fixed %v, %v, %v",
				tc.name, o.FixCMu, o.FixCAlphaMin, o.FixLogvarMargin, o.TargetOrder, o.TargetDelta, tc.fixed, tc.wantOrd, tc.wantDelt)
		}
	}
}
