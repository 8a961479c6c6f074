package train

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nvib"
)

// A calibrated run writes certificate.json; an impossible target fails before
// any file is written; a resumed run keeps the saved constants.
func TestCalibratedRunAndResume(t *testing.T) {
	glueDir, vocab := synthGlue(t, 48, 16)
	out := filepath.Join(t.TempDir(), "bad")
	o := synthOptions(t, glueDir, vocab, out)
	o.TargetEpsilon, o.CMu, o.FixCMu, o.HandSetClipping = 1, 2, true, false
	if _, err := Run(context.Background(), o, nil); err == nil || !strings.Contains(err.Error(), "calibrate") {
		t.Fatalf("impossible target: err = %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("impossible target created %s (%v)", out, err)
	}

	out = filepath.Join(t.TempDir(), "run")
	o = synthOptions(t, glueDir, vocab, out)
	o.TargetRD, o.TargetOrder, o.VarianceShare, o.DirichletShare, o.HandSetClipping = 4, 2, 0.3, 0.2, false
	o.Epochs, o.StopAfterSteps = 1, 2
	res, err := Run(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Interrupted {
		t.Fatalf("run was not stopped: %+v", res)
	}
	certPath := filepath.Join(out, model.CertificateFile)
	cert1, err := os.ReadFile(certPath)
	if err != nil {
		t.Fatal(err)
	}
	var rec model.Calibration
	if err := json.Unmarshal(cert1, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Calibration == nil || rec.Target.RD != 4 || rec.Target.Order != 2 || rec.Split.VarianceShare != 0.3 ||
		!(math.Abs(rec.Achieved-4) <= 4e-6) || rec.Components != 17 || rec.Dims != 16 {
		t.Errorf("certificate.json: %s", cert1)
	}
	saved, err := model.LoadOptions(out)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := nvib.LoadConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	if !saved.Calibrated || saved.CMu != rec.CMu || cfg.Clip.CMu != rec.CMu || cfg.Clip.LogvarMargin != rec.LogvarMargin || cfg.Clip.CAlphaMin != rec.CAlphaMin {
		t.Errorf("saved constants: options %+v, clip %+v, certificate C_mu %v margin %v C_amin %v", saved, cfg.Clip, rec.CMu, rec.LogvarMargin, rec.CAlphaMin)
	}
	// Resume: the saved constants, not a new calibration (the certificate is not
	// rewritten), even when the saved target no longer matches them.
	saved.TargetRD = 8
	if err := model.SaveOptions(out, saved); err != nil {
		t.Fatal(err)
	}
	r := model.Options{RunTime: model.RunTime{Out: out, Resume: true}}
	if _, err := Run(context.Background(), r, nil); err != nil {
		t.Fatal(err)
	}
	cert2, _ := os.ReadFile(certPath)
	cfg2, err := nvib.LoadConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	b, err := model.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(cert1, cert2) || cfg2.Clip != cfg.Clip || b.Model.Cfg.Clip != cfg.Clip {
		t.Errorf("resume changed the clipping: %+v -> %+v (model %+v)", cfg.Clip, cfg2.Clip, b.Model.Cfg.Clip)
	}
}
