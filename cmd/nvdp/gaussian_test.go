package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
)

// TestCertifyGaussianModel: `nvdp certify --model DIR` on a gaussian model
// (C 0.3372, sigma 1, max-seq-len 128, hidden 128) certifies the Gaussian
// mechanism's closed form 2 order C^2 L / sigma^2 at the order asked, with
// N = L + 1 and the model's variant; the CLI help names the variant.
func TestCertifyGaussianModel(t *testing.T) {
	dir := t.TempDir()
	if err := model.SaveOptions(dir, modelOptions(dir, nvib.ModelGaussian, privacy.ModePrincipled, 128)); err != nil {
		t.Fatal(err)
	}
	cfg := nvib.DefaultConfig(nvib.ModelGaussian, privacy.ModePrincipled, 128, 2, 512, 2)
	cfg.Clip.CMu, cfg.ReleaseLen = 0.3372, 128
	if err := nvib.SaveConfig(dir, cfg); err != nil {
		t.Fatal(err)
	}
	for _, order := range []float64{1.1, 3} {
		r := certifyJSON(t, "--model", dir, "--order", strconv.FormatFloat(order, 'g', -1, 64))
		R := privacy.StoredRadius(0.3372)
		want := 2 * order * R * R * 128
		if rd, ok := r["rd_certified"].(float64); !ok || !relClose(rd, want, 1e-9) || r["components"] != 129.0 || r["dims"] != 128.0 ||
			r["variant"] != nvib.ModelGaussian || r["finite"] != true {
			t.Errorf("order %v: rd %v (closed form %v), N %v P %v variant %v finite %v", order, r["rd_certified"], want, r["components"], r["dims"], r["variant"], r["finite"])
		}
	}
	for _, cmd := range []string{"train", "run", "sweep", "eval"} {
		c, _, err := rootCmd.Find([]string{cmd})
		if err != nil {
			t.Fatal(err)
		}
		help := c.Long + c.Flags().FlagUsages()
		if !strings.Contains(help, "gaussian") {
			t.Errorf("nvdp %s --help does not mention the gaussian variant", cmd)
		}
	}
}
