package main

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/privacy"
)

// `nvdp run --latent-dim 32` end to end on a synthetic SST-2 with bert-tiny
// (hidden size 128) and a target epsilon: the calibration, the posterior
// file, report.json's certified block and `nvdp certify --model` all have
// P = 32, and certify --model reproduces certificate.json and the
// certificate of the same constants given as flags with --dims 32.
func TestRunLatentDim(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a tiny model")
	}
	glueDir, vocab := synthSST2(t, 48)
	out := filepath.Join(t.TempDir(), "run")
	if _, err := runCmd(newRunCmd(), "--task", "sst2", "--glue-dir", glueDir, "--vocab", vocab, "--encoder", "scratch:bert-tiny",
		"--max-seq-len", "8", "--epochs", "1", "--batch-size", "16", "--latent-dim", "32", "--target-epsilon", "16",
		"--no-progress", "--out", out); err != nil {
		t.Fatal(err)
	}
	cert, err := model.LoadCalibration(out)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Dims != 32 || cert.Components != 9 {
		t.Errorf("certificate.json: P %d, N %d", cert.Dims, cert.Components)
	}
	rep := readReport(t, out)
	if p := rep.Privacy; p == nil || p.Certified == nil {
		t.Fatal("report.json: no privacy or certified block")
	}
	if p := rep.Privacy; p.Certified.Dims != 32 || p.InvalidPairs != 0 {
		t.Fatalf("report.json: certified P %d, invalid pairs %d", p.Certified.Dims, p.InvalidPairs)
	}
	post, err := privacy.ReadPosteriors(rep.Privacy.Posteriors)
	if err != nil {
		t.Fatal(err)
	}
	if post.P != 32 || post.N != 9 {
		t.Errorf("posterior file [N %d, P %d]", post.N, post.P)
	}
	r := certifyJSON(t, "--model", out)
	if r["dims"] != 32.0 || r["components"] != 9.0 || r["epsilon"] != float64(cert.Guarantee.Epsilon) {
		t.Errorf("certify --model: P %v N %v epsilon %v; certificate.json epsilon %v", r["dims"], r["components"], r["epsilon"], cert.Guarantee.Epsilon)
	}
	o, err := model.LoadOptions(out)
	if err != nil {
		t.Fatal(err)
	}
	if o.LatentDim == nil || *o.LatentDim != 32 {
		t.Fatalf("train_options.json: latent_dim %v", o.LatentDim)
	}
	formatG := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	flags := certifyJSON(t, "--components", "9", "--dims", "32", "--order", "1.1", "--c-mu", formatG(o.CMu), "--prior-var", "1",
		"--logvar-margin", formatG(o.LogvarMargin), "--c-alpha-min", formatG(o.CAlphaMin), "--c-alpha-max", formatG(o.CAlphaMax))
	if r["rd_certified"] != flags["rd_certified"] {
		t.Errorf("certify --model RD %v, the same constants as flags %v", r["rd_certified"], flags["rd_certified"])
	}
}
