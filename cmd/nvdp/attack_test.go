package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/attack"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/train"
)

// distinguishJSON runs `nvdp attack distinguish --json` and decodes its report.
func distinguishJSON(t *testing.T, args ...string) *attack.DistinguishReport {
	t.Helper()
	out, err := runCmd(newDistinguishCmd(), append(args, "--json", "--no-progress")...)
	if err != nil {
		t.Fatalf("attack distinguish %v: %v\n%s", args, err, out)
	}
	var r attack.DistinguishReport
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &r); err != nil {
		t.Fatalf("attack distinguish --json: %v\n%s", err, out)
	}
	return &r
}

// evaluatedModel trains a tiny model of variant and writes its dev
// posterior file (as `nvdp run` does).
func evaluatedModel(t *testing.T, glueDir, vocab, variant string) string {
	t.Helper()
	dir := tinyModel(t, glueDir, vocab, variant)
	b, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := train.Evaluate(b, train.DefaultEvalOptions(b)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// `nvdp attack distinguish` on trained tiny models, nvdp-clipped and
// gaussian, for every kind of pair: the invariant of issue 16 holds, every
// lower bound (both methods) is at most the pair's own RDP epsilon, itself
// at most the certified epsilon of `nvdp certify --model` at the same
// delta; the witness pair, which attains the certificate, is told apart:
// the tiny models' default clipping is weak (certified epsilon above 100:
// every release told apart, the threshold test at its ceiling) and the
// privacy-loss bound is above 60% of it. --out writes the report,
// --plot-dir the ROC figures; the witness file of `nvdp certify --witness`
// gives the same pair as --model's witness, and the argmax of `nvdp audit
// --json` of the evaluation's posterior file (--audit) the same pair as the
// audit of the split's posteriors computed in memory.
func TestAttackDistinguish(t *testing.T) {
	glueDir, vocab := synthSST2(t, 24)
	for _, variant := range []string{nvib.ModelNVDPClipped, nvib.ModelGaussian} {
		dir := evaluatedModel(t, glueDir, vocab, variant)
		cert := certifyJSON(t, "--model", dir, "--delta", "1e-6")
		certEps, rdpEps := cert["epsilon"].(float64), cert["rdp_epsilon"].(float64)
		common := []string{"--model", dir, "--releases", "2000", "--delta", "1e-6"}
		out := filepath.Join(t.TempDir(), attack.DistinguishFile)
		plots := t.TempDir()
		reps := []*attack.DistinguishReport{
			distinguishJSON(t, append(common, "--out", out, "--plot-dir", plots)...),
			distinguishJSON(t, append(common, "--texts", "the movie is good,the movie is awful")...),
			distinguishJSON(t, append(common, "--pair", "argmax")...),
			distinguishJSON(t, append(common, "--pair", "random", "--random-pairs", "2")...),
			distinguishJSON(t, append(common, "--pair-index", "0,3")...),
		}
		kinds := []string{attack.PairWitness, attack.PairTexts, attack.PairArgmax, attack.PairRandom, attack.PairIndex}
		for k, rep := range reps {
			if rep.Variant != variant || rep.Certified == nil || float64(rep.Certified.Epsilon) != certEps || rep.Certified.Delta != 1e-6 {
				t.Fatalf("%s %s: report of %s, certified %+v; nvdp certify: %v", variant, kinds[k], rep.Variant, rep.Certified, certEps)
			}
			if len(rep.Pairs) != map[bool]int{true: 2, false: 1}[kinds[k] == attack.PairRandom] {
				t.Errorf("%s %s: %d pairs", variant, kinds[k], len(rep.Pairs))
			}
			for _, pr := range rep.Pairs {
				r := pr.Result
				if pr.Kind != kinds[k] || r.Releases != 2000 || r.Delta != 1e-6 || r.Gaussian != (variant == nvib.ModelGaussian) {
					t.Errorf("%s: pair %s, %d releases, delta %v, gaussian %v", variant, pr.Kind, r.Releases, r.Delta, r.Gaussian)
				}
				pairEps := float64(r.PairEpsilon)
				for name, b := range map[string]float64{"headline": float64(r.EpsilonLowerBound), "threshold": float64(r.ThresholdTest.Epsilon), "privacy loss": float64(r.PrivacyLossTest.Epsilon)} {
					if !(b >= 0 && b <= pairEps && pairEps <= rdpEps*(1+1e-9) && b <= certEps*(1+1e-9)) {
						t.Errorf("%s %s: %s bound %v, pair epsilon %v, certified %v", variant, pr.Kind, name, b, pairEps, certEps)
					}
				}
				if r.Certified == nil || math.Abs(float64(r.Certified.Ratio)-float64(r.EpsilonLowerBound)/certEps) > 1e-12 {
					t.Errorf("%s %s: certified comparison %+v", variant, pr.Kind, r.Certified)
				}
			}
		}
		w := reps[0].Pairs[0].Result
		t.Logf("%s: certified %.4g; witness: pair %.4g, threshold %.4g, privacy loss %.4g, AUC %v", variant, certEps,
			float64(w.PairEpsilon), float64(w.ThresholdTest.Epsilon), float64(w.PrivacyLossTest.Epsilon), w.AUC)
		if !(float64(w.PrivacyLossTest.Epsilon) > 0.6*certEps && certEps > 100) || w.AUC != 1 || w.ThresholdTest.Epsilon != w.ThresholdTest.MaxDetectable {
			t.Errorf("%s witness: privacy-loss bound %v, AUC %v against certified %v: want the weak clipping's pair told apart", variant, w.PrivacyLossTest.Epsilon, w.AUC, certEps)
		}
		if variant == nvib.ModelGaussian && w.GaussianEpsilon == nil {
			t.Errorf("gaussian witness: no exact Gaussian-mechanism epsilon")
		}
		a := reps[2].Pairs[0]
		if a.AuditRD == nil || a.AuditOrder != 1.1 || len(a.Index) != 2 || reps[2].Split != "dev" {
			t.Errorf("%s argmax: %+v (split %q)", variant, a, reps[2].Split)
		}
		// the argmax of `nvdp audit --json` of the evaluation's posterior file is the same pair
		auditOut, err := runAuditCmd("--posteriors", filepath.Join(dir, train.PosteriorsFile("dev")), "--json")
		if err != nil {
			t.Fatal(err)
		}
		auditFile := filepath.Join(t.TempDir(), "audit.json")
		if err := os.WriteFile(auditFile, []byte(auditOut[strings.Index(auditOut, "{"):]), 0o644); err != nil {
			t.Fatal(err)
		}
		b := distinguishJSON(t, append(common, "--pair", "argmax", "--audit", auditFile)...).Pairs[0]
		if b.Index[0] != a.Index[0] || b.Index[1] != a.Index[1] || b.AuditOrder != 1.1 || b.Result.KL != a.Result.KL {
			t.Errorf("%s: argmax of the audit JSON %v, of the split %v", variant, b.Index, a.Index)
		}
		// the split's posteriors that cannot be computed: the error names the model and the flags
		wantSplit := fmt.Sprintf(`--model %s, --split frob: --split "frob": want`, dir)
		if _, err := runCmd(newDistinguishCmd(), append(common, "--pair", "argmax", "--split", "frob", "--no-progress")...); err == nil || !strings.Contains(err.Error(), wantSplit) {
			t.Errorf("%s --split frob: %v, want %q", variant, err, wantSplit)
		}
		saved, err := attack.ReadDistinguishReport(out)
		if err != nil || saved.Pairs[0].Result.EpsilonLowerBound != w.EpsilonLowerBound {
			t.Errorf("%s --out: %v, %+v", variant, err, saved)
		}
		for _, ext := range []string{"png", "svg"} {
			if st, err := os.Stat(filepath.Join(plots, "distinguish_roc."+ext)); err != nil || st.Size() == 0 {
				t.Errorf("%s --plot-dir: %s: %v", variant, ext, err)
			}
		}
		// the witness of nvdp certify at the guarantee's best order is --model's witness
		wfile := filepath.Join(t.TempDir(), "witness.safetensors")
		certifyJSON(t, "--model", dir, "--delta", "1e-6", "--order", jsonNumber(cert["best_order"]), "--witness", wfile)
		fromFile := distinguishJSON(t, "--posteriors", wfile, "--releases", "2000", "--delta", "1e-6")
		fw := fromFile.Pairs[0].Result
		if fromFile.Certified == nil || float64(fromFile.Certified.Epsilon) != certEps || fw.KL != w.KL || fw.PairEpsilon != w.PairEpsilon {
			t.Errorf("%s: witness file: certified %v KL %v pair epsilon %v; --model's witness KL %v pair epsilon %v",
				variant, fromFile.Certified, fw.KL, fw.PairEpsilon, w.KL, w.PairEpsilon)
		}
	}
}

func jsonNumber(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Bad flags are errors naming the flag, before the model is loaded.
func TestAttackDistinguishFlagErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--model DIR or --posteriors FILE is required"},
		{[]string{"--model", missing, "--releases", "1"}, "--releases 1"},
		{[]string{"--model", missing, "--delta", "0"}, "--delta 0"},
		{[]string{"--model", missing, "--confidence", "1"}, "--confidence 1"},
		{[]string{"--model", missing, "--workers", "-1"}, "--workers -1"},
		{[]string{"--model", missing, "--pair", "best"}, `--pair "best"`},
		{[]string{"--model", missing, "--texts", "a,b", "--pair-index", "0,1"}, "give one pair"},
		{[]string{"--model", missing, "--texts", "a,b", "--pair", "witness"}, "--texts and --pair"},
		{[]string{"--model", missing, "--texts", "a,b,c"}, "--texts: 3 texts"},
		{[]string{"--posteriors", missing, "--texts", "a,b"}, "--texts needs --model"},
		{[]string{"--model", missing, "--audit", "a.json"}, "--audit"},
		{[]string{"--model", missing, "--random-pairs", "3"}, "--random-pairs is for --pair random"},
		{[]string{"--model", missing, "--pair", "random", "--random-pairs", "0"}, "--random-pairs 0"},
		{[]string{"--posteriors", missing, "--split", "test"}, "--split"},
		{[]string{"--posteriors", missing, "--glue-dir", "g"}, "--glue-dir"},
		{[]string{"--posteriors", missing, "--pair-index", "0"}, "--pair-index"},
		{[]string{"--posteriors", missing, "--pair-index", "a,1"}, "--pair-index"},
		{[]string{"--model", missing}, "--model"},
		{[]string{"--posteriors", missing}, "--posteriors"},
	} {
		out, err := runCmd(newDistinguishCmd(), append(tc.args, "--no-progress")...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q\n%s", tc.args, err, tc.want, out)
		}
	}
}
