package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/train"
	"github.com/spf13/cobra"
)

func runCmd(cmd *cobra.Command, args ...string) (string, error) {
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func runCertifyCmd(args ...string) (string, error) { return runCmd(newCertifyCmd(), args...) }

// certifyJSON runs `nvdp certify --json` and decodes the object.
func certifyJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	out, err := runCertifyCmd(append(args, "--json")...)
	if err != nil {
		t.Fatalf("certify %v: %v", args, err)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out)
	}
	return r
}

func relClose(got, want, tol float64) bool {
	return math.Abs(got-want) <= tol*math.Abs(want)
}

// The main job's constants and the fixed-noise design, as the pinned
// interface writes them.
var (
	mainJobArgs = []string{"--components", "129", "--dims", "128", "--order", "1.1", "--c-mu", "2", "--prior-var", "1",
		"--logvar-margin", "0.6931", "--c-alpha-min", "0.3", "--c-alpha-max", "1"}
	fixedNoiseArgs = []string{"--components", "129", "--dims", "128", "--order", "1.1", "--c-mu", "0.19", "--prior-var", "1",
		"--logvar-margin", "2.3978952727983707", "--c-alpha-min", "1", "--c-alpha-max", "1"}
)

func TestCertifyJSON(t *testing.T) {
	for _, c := range []struct {
		name                       string
		args                       []string
		rd, variance, mean, dirich float64
		maxOrder                   any // float64, or nil (every order finite)
	}{
		{"main job", mainJobArgs, 46450.3557, 35012.9871, 11265.0623, 172.306353, 1.22220942},
		{"fixed noise", fixedNoiseArgs, 10.1657597, 0, 10.1657597, 0, nil},
		// A list prior_var of P equal values certifies the same as the scalar.
		{"prior-var list", append(append([]string{}, fixedNoiseArgs...), "--prior-var", strings.TrimSuffix(strings.Repeat("1,", 128), ",")),
			10.1657597, 0, 10.1657597, 0, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := certifyJSON(t, c.args...)
			for _, k := range []string{"rd_certified", "parts", "order", "orders", "epsilon", "delta", "best_order", "finite",
				"max_order", "releases", "bdp_epsilon_certified", "gaussian_direction", "label", "scope",
				"components", "dims", "c_mu", "prior_var", "clip_order", "logvar_margin", "logvar_floor", "logvar_cap",
				"c_alpha_min", "c_alpha_max", "prior_alpha"} {
				if _, ok := r[k]; !ok {
					t.Errorf("JSON lacks %q", k)
				}
			}
			if r["label"] != "certified" || r["scope"] != privacy.CertifiedScope(1, 129, 128) || r["source"] != "constants given on the command line" {
				t.Errorf("label %v scope %v source %v", r["label"], r["scope"], r["source"])
			}
			if r["order"] != 1.1 || r["finite"] != true || r["releases"] != 1.0 || r["delta"] != privacy.DefaultDelta || r["gaussian_direction"] != "standard" {
				t.Errorf("order %v finite %v releases %v delta %v direction %v", r["order"], r["finite"], r["releases"], r["delta"], r["gaussian_direction"])
			}
			parts := r["parts"].(map[string]any)
			for name, want := range map[string]float64{"rd_certified": c.rd, "variance": c.variance, "mean": c.mean, "dirichlet": c.dirich} {
				got, ok := r[name].(float64)
				if name != "rd_certified" {
					got, ok = parts[name].(float64)
				}
				if !ok || !relClose(got, want, 1e-6) || (want == 0 && got != 0) {
					t.Errorf("%s = %v, want %v", name, got, want)
				}
			}
			if c.maxOrder == nil {
				if r["max_order"] != "Infinity" {
					t.Errorf("max_order %v, want \"Infinity\" (every order finite)", r["max_order"])
				}
			} else if !relClose(r["max_order"].(float64), c.maxOrder.(float64), 1e-6) {
				t.Errorf("max_order %v, want %v", r["max_order"], c.maxOrder)
			}
			// The curve: the default order grid; its point at 1.1 is rd_certified; epsilon is its best conversion.
			orders := r["orders"].([]any)
			if len(orders) != len(privacy.DefaultOrders) {
				t.Fatalf("%d orders, want %d", len(orders), len(privacy.DefaultOrders))
			}
			var curve []privacy.OrderRD
			for _, o := range orders {
				p := o.(map[string]any)
				rd := math.Inf(1)
				if v, ok := p["rd"].(float64); ok {
					rd = v
				}
				curve = append(curve, privacy.OrderRD{Order: p["order"].(float64), RD: jsonfloat.Float(rd)})
				if p["order"] == 1.1 && rd != r["rd_certified"] {
					t.Errorf("curve at 1.1: %v, rd_certified %v", rd, r["rd_certified"])
				}
			}
			// rdp_epsilon is the curve's best conversion; epsilon is it (accountant rdp), or for a
			// fixed-noise clip (no variance or Dirichlet part) the exact Gaussian mechanism's.
			eps, best, err := privacy.BestEpsilon(curve, privacy.DefaultDelta)
			if err != nil || eps != r["rdp_epsilon"] || best != r["best_order"] {
				t.Errorf("rdp_epsilon %v at %v, curve gives %v at %v (%v)", r["rdp_epsilon"], r["best_order"], eps, best, err)
			}
			want, acct := eps, privacy.AccountantRDP
			if c.variance == 0 && c.dirich == 0 {
				mu := math.Sqrt(2 * c.mean / 1.1) // the mean part at order 1.1 is 1.1 mu^2 / 2
				want, _ = privacy.GaussianMechanismEpsilon(mu, privacy.DefaultDelta)
				acct = privacy.AccountantGaussian
				if !relClose(r["gaussian_mu"].(float64), mu, 1e-6) {
					t.Errorf("gaussian_mu %v, want %v", r["gaussian_mu"], mu)
				}
			}
			if r["accountant"] != acct || !relClose(r["epsilon"].(float64), want, 1e-6) || r["epsilon"].(float64) > eps {
				t.Errorf("epsilon %v by %v, want %v by %s (RDP %v)", r["epsilon"], r["accountant"], want, acct, eps)
			}
		})
	}
	// k releases: k times one release at every order.
	one, three := certifyJSON(t, mainJobArgs...), certifyJSON(t, append(mainJobArgs, "--releases", "3")...)
	if !relClose(three["rd_certified"].(float64), 3*one["rd_certified"].(float64), 1e-12) || three["rd_per_release"] != one["rd_certified"] ||
		!strings.Contains(three["scope"].(string), "3 releases") {
		t.Errorf("3 releases: rd %v per release %v scope %q; one release %v", three["rd_certified"], three["rd_per_release"], three["scope"], one["rd_certified"])
	}
	// --orders replaces the grid; the human table names the parts.
	r := certifyJSON(t, append(mainJobArgs, "--orders", "1.05,1.1,1.2")...)
	if n := len(r["orders"].([]any)); n != 3 {
		t.Errorf("--orders: %d points", n)
	}
	out, err := runCertifyCmd(mainJobArgs...)
	if err != nil || !strings.Contains(out, "rd_certified (order 1.1)") || !strings.Contains(out, "46450.355726") ||
		!strings.Contains(out, "variance / mean / dirichlet") {
		t.Errorf("table: %v\n%s", err, out)
	}
	// An explicit sigma range equal to the derived one certifies the same.
	floor := math.Log(0.1/1.1) + 0.6931
	r = certifyJSON(t, "--components", "129", "--dims", "128", "--c-mu", "2", "--logvar-floor", fmt.Sprint(floor), "--logvar-cap", "0",
		"--c-alpha-min", "0.3", "--c-alpha-max", "1")
	if !relClose(r["rd_certified"].(float64), one["rd_certified"].(float64), 1e-9) || r["clip_order"] != nil {
		t.Errorf("explicit range: rd %v (want %v), clip_order %v", r["rd_certified"], one["rd_certified"], r["clip_order"])
	}
	// Past the largest finite order the bound is +Inf ("Infinity") with the reason.
	r = certifyJSON(t, append(append([]string{}, mainJobArgs...), "--order", "1.5", "--clip-order", "1.1")...)
	if r["finite"] != false || r["rd_certified"] != "Infinity" || !strings.Contains(fmt.Sprint(r["reason"]), "finite only below order") {
		t.Errorf("order 1.5: finite %v rd %v reason %v", r["finite"], r["rd_certified"], r["reason"])
	}
}

// The witness is a posterior file that `nvdp audit` reads, and its audited
// rd_max is the certificate, in both Gaussian directions.
func TestCertifyWitnessAudit(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
	}{{"main job", mainJobArgs}, {"fixed noise", fixedNoiseArgs}} {
		for _, dir := range []string{"standard", "paper"} {
			t.Run(c.name+"/"+dir, func(t *testing.T) {
				w := filepath.Join(t.TempDir(), "witness.safetensors")
				r := certifyJSON(t, append(c.args, "--witness", w, "--gaussian-direction", dir)...)
				if r["witness"] != w {
					t.Errorf("witness field %v", r["witness"])
				}
				out, err := runAuditCmd("--posteriors", w, "--order", "1.1", "--gaussian-direction", dir, "--json")
				if err != nil {
					t.Fatal(err)
				}
				var a map[string]any
				if err := json.Unmarshal([]byte(out), &a); err != nil {
					t.Fatal(err)
				}
				if a["examples"] != 2.0 || a["components"] != 129.0 || a["invalid_pairs"] != 0.0 {
					t.Errorf("witness file: examples %v components %v invalid %v", a["examples"], a["components"], a["invalid_pairs"])
				}
				if got, want := a["rd_max"].(float64), r["rd_certified"].(float64); !relClose(got, want, 1e-9) {
					t.Errorf("audit rd_max %v, rd_certified %v", got, want)
				}
			})
		}
	}
}

func TestCertifyFlagErrors(t *testing.T) {
	with := func(extra ...string) []string {
		// mainJobArgs with flags overridden (pflag keeps the last value)
		return append(append([]string{}, mainJobArgs...), extra...)
	}
	dir := t.TempDir()
	cases := []struct {
		args []string
		want string
	}{
		{with("--order", "1"), "--order 1: the Renyi order must be finite and > 1"},
		{with("--order", "0.5"), "--order 0.5"},
		{with("--order", "NaN"), "--order NaN: the Renyi order must be finite and > 1"},
		{with("--orders", "1.5,1"), "--orders 1: every Renyi order must be finite and > 1"},
		{with("--orders", "1.5,x"), `--orders: "x" is not a number`},
		{with("--c-mu", "-1"), "--c-mu -1: clip set: C_mu must be >= 0"},
		{with("--c-mu", "NaN"), "--c-mu NaN"},
		{with("--c-alpha-min", "-0.1"), "--c-alpha-min -0.1"},
		{with("--c-alpha-min", "2"), "--c-alpha-min 2: clip set: C_amin must be <= --c-alpha-max 1"},
		{with("--c-alpha-max", "0", "--c-alpha-min", "0"), "--c-alpha-max 0: clip set: C_amax must be > 0"},
		{with("--c-alpha-max", "NaN"), "--c-alpha-max NaN: clip set: C_amax must be > 0"},
		{with("--prior-alpha", "0"), "--prior-alpha 0: clip set: the prior's pseudo-count must be finite and > 0"},
		{with("--logvar-margin", "-1"), "--logvar-margin -1: clip set: must be finite and >= 0"},
		{with("--prior-var", "1,1,1"), "--prior-var: clip set: 3 values, want 1 or P = 128"},
		{with("--prior-var", "0"), "--prior-var: clip set: [0] = 0, want a finite value > 0"},
		{with("--prior-var", "NaN"), "--prior-var: clip set: [0] = NaN"},
		{with("--prior-mu", "1,2"), "--prior-mu: clip set: 2 values"},
		{with("--logvar-floor", "-1", "--logvar-cap", "0"), "give the margin (the range is derived) or the range, not both"},
		{[]string{"--components", "129", "--dims", "128", "--c-mu", "2", "--c-alpha-min", "0.3", "--c-alpha-max", "1", "--logvar-floor", "-1"}, "give both"},
		{[]string{"--components", "129", "--dims", "128", "--c-mu", "2", "--c-alpha-min", "0.3", "--c-alpha-max", "1", "--logvar-floor", "1", "--logvar-cap", "0"}, "--logvar-floor 1: clip set: above --logvar-cap 0 in dim 0"},
		{[]string{"--components", "129", "--dims", "128", "--c-mu", "2", "--c-alpha-min", "0.3", "--c-alpha-max", "1", "--logvar-floor", "-1", "--logvar-cap", "0", "--clip-order", "1.1"}, "--clip-order derives the floor"},
		{with("--clip-order", "1"), "--clip-order 1: clip set: the Renyi order of the sigma clip must be finite and > 1"},
		{with("--delta", "0"), "--delta 0: must be in (0, 1)"},
		{with("--delta", "1"), "--delta 1"},
		{with("--releases", "0"), "--releases 0: must be >= 1"},
		{with("--gaussian-direction", "forward"), `--gaussian-direction "forward": want standard or paper`},
		{with("--components", "0"), "--components 0: clip set: N must be >= 1"},
		{with("--dims", "-3"), "--dims -3: clip set: P must be >= 1"},
		{[]string{"--components", "129", "--dims", "128", "--c-mu", "2", "--c-alpha-max", "1"}, "--c-alpha-min is required (or --model DIR)"},
		{[]string{}, "--components is required"},
		{[]string{"--model", dir, "--c-mu", "2"}, "--c-mu and --model"},
		{[]string{"--model", dir}, "train_options.json"},
		// issue 32: the missing directory is named (not the temporary file), before any work
		{with("--witness", "/no/such/dir/w.safetensors"), "--witness /no/such/dir/w.safetensors: the directory /no/such/dir does not exist"},
		// issue 32: a witness pair that cannot fit is refused before anything is allocated (10^7 x 128: about 19.2 GiB)
		{with("--components", "10000000", "--witness", filepath.Join(dir, "w.safetensors")), "--witness: witness: 10000000 components x 128 dims take about 19.2 GiB"},
	}
	for _, c := range cases {
		_, err := runCertifyCmd(c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
	}
}

// TestCertifyLarge (issue 32): a certificate of 10^7 components x 128 dims
// (or 1000 x 10^7) without a witness allocates no N x P pair: it is computed
// in well under the time the pair took to build (12 GB and a minute before),
// and its epsilon is the fixed-noise Gaussian mechanism's (sigma = 1).
func TestCertifyLarge(t *testing.T) {
	for _, shape := range [][2]string{{"10000000", "128"}, {"1000", "10000000"}} {
		start := time.Now()
		out, err := runCertifyCmd("--components", shape[0], "--dims", shape[1], "--c-mu", "0.001", "--c-alpha-min", "1", "--c-alpha-max", "1", "--logvar-floor", "0", "--logvar-cap", "0", "--json")
		if err != nil {
			t.Fatalf("%v: %v", shape, err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%v: %v, want well under the minute the witness took", shape, d)
		}
		var r struct {
			Accountant string  `json:"accountant"`
			GaussianMu float64 `json:"gaussian_mu"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.ParseFloat(shape[0], 64)
		if want := 2 * privacy.StoredRadius(0.001) * math.Sqrt(n-1); r.Accountant != privacy.AccountantGaussian || math.Abs(r.GaussianMu-want) > 1e-9*want {
			t.Errorf("%v: accountant %q mu %v, want %q %v", shape, r.Accountant, r.GaussianMu, privacy.AccountantGaussian, want)
		}
	}
}

// modelOptions are valid training options of a model directory dir, as
// `nvdp train` saves them.
func modelOptions(dir, variant string, mode privacy.Mode, maxSeqLen int) *model.Options {
	o := model.DefaultOptions()
	o.Task, o.GlueDir, o.Encoder, o.Vocab, o.Out = "sst2", "glue", "scratch:bert-tiny", "vocab.txt", dir
	o.Variant, o.Mode, o.MaxSeqLen = variant, mode, maxSeqLen
	o.HandSetClipping = nvib.Calibratable(variant) && !mode.IsReference() // no privacy target
	o.Resolve()
	return &o
}

// writeModelDir writes the two files `nvdp certify --model` reads.
func writeModelDir(t *testing.T, variant string, mode privacy.Mode, maxSeqLen, hidden int, clip func(*nvib.ClipConfig)) string {
	t.Helper()
	dir := t.TempDir()
	if err := model.SaveOptions(dir, modelOptions(dir, variant, mode, maxSeqLen)); err != nil {
		t.Fatal(err)
	}
	cfg := nvib.DefaultConfig(variant, mode, hidden, 2, 4*hidden, 2)
	if clip != nil {
		clip(&cfg.Clip)
	}
	if err := nvib.SaveConfig(dir, cfg); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCertifyModel(t *testing.T) {
	clipped := writeModelDir(t, nvib.ModelNVDPClipped, privacy.ModePrincipled, 128, 128, func(c *nvib.ClipConfig) {
		c.CMu, c.LogvarMargin, c.CAlphaMin, c.CAlphaMax = 2, 0.6931, 0.3, 1
	})
	r := certifyJSON(t, "--model", clipped)
	want := certifyJSON(t, mainJobArgs...)
	if r["rd_certified"] != want["rd_certified"] || r["epsilon"] != want["epsilon"] || r["components"] != 129.0 || r["dims"] != 128.0 ||
		r["model"] != clipped || r["variant"] != nvib.ModelNVDPClipped || r["source"] != train.ModelSource(clipped) {
		t.Errorf("--model: rd %v eps %v N %v P %v model %v variant %v source %v; flags give rd %v eps %v",
			r["rd_certified"], r["epsilon"], r["components"], r["dims"], r["model"], r["variant"], r["source"], want["rd_certified"], want["epsilon"])
	}
	// Unclipped NVDP and the reference clipping (no sigma cap, C_amin 0) have no finite certificate.
	for _, c := range []struct {
		name, variant string
		mode          privacy.Mode
		reason        string
	}{
		{"nvdp", nvib.ModelNVDP, privacy.ModePrincipled, "unbounded"},
		{"reference", nvib.ModelNVDPClipped, privacy.ModeReference, "not capped"},
	} {
		dir := writeModelDir(t, c.variant, c.mode, 16, 8, nil)
		w := filepath.Join(t.TempDir(), "w.safetensors")
		r := certifyJSON(t, "--model", dir, "--witness", w)
		if r["finite"] != false || r["rd_certified"] != "Infinity" || r["epsilon"] != "Infinity" || !strings.Contains(fmt.Sprint(r["reason"]), c.reason) {
			t.Errorf("%s: finite %v rd %v epsilon %v reason %v", c.name, r["finite"], r["rd_certified"], r["epsilon"], r["reason"])
		}
	}
	base := writeModelDir(t, nvib.ModelBaseline, privacy.ModePrincipled, 16, 8, nil)
	if _, err := runCertifyCmd("--model", base); err == nil || !strings.Contains(err.Error(), "baseline") {
		t.Errorf("baseline: %v", err)
	}
}

func TestCertifyRegistered(t *testing.T) {
	for _, c := range rootCmd.Commands() {
		if c.Name() == "certify" {
			return
		}
	}
	t.Fatal("certify not registered on rootCmd")
}

// synthSST2 writes a small synthetic SST-2 (train, dev) and a WordPiece vocab.
func synthSST2(t *testing.T, n int) (glueDir, vocab string) {
	t.Helper()
	dir := t.TempDir()
	words := []string{"good", "great", "bad", "awful", "the", "movie", "is", "very"}
	vocab = filepath.Join(dir, "vocab.txt")
	if err := os.WriteFile(vocab, []byte(strings.Join(append([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}, words...), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	glueDir = filepath.Join(dir, "glue")
	if err := os.MkdirAll(filepath.Join(glueDir, "SST-2"), 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, split := range []string{"train", "dev"} {
		var b strings.Builder
		b.WriteString("sentence\tlabel\n")
		for range n {
			l := rng.IntN(2)
			fmt.Fprintf(&b, "the movie is %s\t%d\n", words[2*(1-l)+rng.IntN(2)], l)
		}
		if err := os.WriteFile(filepath.Join(glueDir, "SST-2", split+".tsv"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return glueDir, vocab
}

// Calibration flags are validated before any work, and a target that the
// fixed constants cannot meet fails before any file is written.
func TestTrainTargetErrors(t *testing.T) {
	glueDir, vocab := synthSST2(t, 16)
	common := []string{"--task", "sst2", "--glue-dir", glueDir, "--vocab", vocab, "--max-seq-len", "8", "--epochs", "1", "--batch-size", "4"}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--target-epsilon", "8", "--variant", "nvdp"}, "only the nvdp-clipped and gaussian variants can be calibrated"},
		{[]string{"--target-epsilon", "8", "--mode", "reference"}, "calibrate in principled mode"},
		{[]string{"--target-epsilon", "8", "--target-rd", "3"}, "give one"},
		{[]string{"--target-epsilon", "NaN"}, `invalid argument "NaN" for "--target-epsilon" flag`},
		{[]string{"--target-epsilon", "0"}, "--target-epsilon 0: must be > 0 (leave it out for no target)"},
		{[]string{"--target-rd", "0"}, "--target-rd 0: must be > 0 (leave it out for no target)"},
		{[]string{"--target-rd", "-1"}, "--target-rd -1: must be > 0"},
		{[]string{"--target-rd", "3", "--order", "1"}, "--order 1: the target RD's Renyi order"},
		{[]string{"--target-epsilon", "8", "--delta", "2"}, "--delta 2"},
		{[]string{"--target-epsilon", "8", "--releases", "-1"}, "--releases -1"},
		{[]string{"--target-epsilon", "8", "--variance-share", "0.6", "--dirichlet-share", "0.4"}, "must sum to < 1"},
		{[]string{"--releases", "2", "--hand-set-clipping"}, "--releases 2: needs a target"},
		{[]string{"--variance-share", "0.2", "--hand-set-clipping"}, "need a target"},
		{[]string{"--order", "2"}, "--order is the Renyi order of --target-rd"},
		{[]string{"--target-rd", "3", "--delta", "1e-6"}, "--delta is the delta of --target-epsilon"},
		{[]string{"--clip-order", "1"}, "--clip-order 1"},
		{[]string{"--target-epsilon", "8", "--c-mu", "1", "--logvar-margin", "0.1", "--c-alpha-min", "0.5"}, "nothing left to calibrate"},
		// C_mu 2 and a ln 2 margin alone certify far more than epsilon 1.
		{[]string{"--target-epsilon", "1", "--c-mu", "2", "--logvar-margin", "0.6931"}, "no order of the grid meets epsilon 1"},
		{[]string{"--target-rd", "10", "--c-mu", "2"}, "above the target"},
	}
	for _, c := range cases {
		out := filepath.Join(t.TempDir(), "run")
		_, err := runCmd(newTrainCmd(), append(append(append([]string{}, common...), c.args...), "--out", out)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
		if _, serr := os.Stat(out); !os.IsNotExist(serr) {
			t.Errorf("%v: %s was created (%v)", c.args, out, serr)
		}
	}
}

// readReport reads DIR/report.json of `nvdp run`.
func readReport(t *testing.T, dir string) train.Report {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, train.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	var r train.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func sharedFile(t *testing.T, env, rel string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		p = filepath.Join("..", "..", "..", "shared", rel)
	}
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s not available (%v); set %s", p, err, env)
	}
	return p
}

// `nvdp run --target-epsilon 8` end to end on a tiny SST-2 subset: the
// calibrated model's certificate is the target, the audit of its real
// posteriors stays below the certified bound, and `nvdp certify --model`
// reproduces certificate.json.
func TestRunTargetEpsilonEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a tiny model")
	}
	glueDir := sharedFile(t, "NVDP_GLUE_DIR", "data/glue")
	vocab := sharedFile(t, "NVDP_VOCAB", "models/bert-base-uncased-vocab/vocab.txt")
	out := filepath.Join(t.TempDir(), "run")
	stdout, err := runCmd(newRunCmd(), "--task", "sst2", "--glue-dir", glueDir, "--vocab", vocab, "--encoder", "scratch:bert-tiny",
		"--train-limit", "64", "--dev-limit", "24", "--max-seq-len", "16", "--epochs", "1", "--batch-size", "16",
		"--target-epsilon", "8", "--no-progress", "--out", out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runCmd(newRunCmd(), "--skip-train", "--target-epsilon", "8", "--out", out); err == nil || !strings.Contains(err.Error(), "--skip-train") {
		t.Errorf("--skip-train with a target: %v", err)
	}
	if !strings.Contains(stdout, "privacy target") || !strings.Contains(stdout, "epsilon 8 at delta 1e-05") {
		t.Errorf("summary lacks the privacy target:\n%s", stdout)
	}
	// certificate.json: the target, the split, the constants, the guarantee.
	var cert map[string]any
	b, err := os.ReadFile(filepath.Join(out, model.CertificateFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cert); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"label", "scope", "target", "split", "guarantee", "achieved", "c_mu", "logvar_margin", "c_alpha_min",
		"c_alpha_max", "clip_order", "components", "dims"} {
		if _, ok := cert[k]; !ok {
			t.Errorf("certificate.json lacks %q", k)
		}
	}
	g := cert["guarantee"].(map[string]any)
	if !relClose(g["epsilon"].(float64), 8, 1e-6) || g["epsilon"].(float64) > 8 || cert["components"] != 17.0 || cert["dims"] != 128.0 {
		t.Errorf("certificate: epsilon %v, N %v, P %v", g["epsilon"], cert["components"], cert["dims"])
	}
	// The default split is the fixed-noise design: sigma and alpha fixed, C_mu carries the budget.
	if cert["c_alpha_min"] != cert["c_alpha_max"] || cert["logvar_floor"] != cert["logvar_cap"] {
		t.Errorf("default split: C_amin %v C_amax %v floor %v cap %v", cert["c_alpha_min"], cert["c_alpha_max"], cert["logvar_floor"], cert["logvar_cap"])
	}
	o, err := model.LoadOptions(out)
	if err != nil {
		t.Fatal(err)
	}
	if !o.Calibrated || o.TargetEpsilon != 8 || o.TargetDelta != privacy.DefaultDelta || o.CMu != cert["c_mu"] {
		t.Errorf("train_options.json: calibrated %v target %v delta %v C_mu %v", o.Calibrated, o.TargetEpsilon, o.TargetDelta, o.CMu)
	}
	r := certifyJSON(t, "--model", out)
	if r["epsilon"] != g["epsilon"] || r["c_mu"] != cert["c_mu"] {
		t.Errorf("certify --model: epsilon %v C_mu %v; certificate.json %v %v", r["epsilon"], r["c_mu"], g["epsilon"], cert["c_mu"])
	}
	// The audit of real posteriors (order 1.1) never exceeds the certificate at that order.
	report := readReport(t, out)
	if p := report.Privacy; p == nil || p.InvalidPairs != 0 || !(float64(p.RDMax) <= r["rd_certified"].(float64)*(1+1e-9)) {
		t.Errorf("audit %+v exceeds the certificate %v", report.Privacy, r["rd_certified"])
	}
}

// TestCertifyUnbounded: an infinite C_mu or C_amax is a clip set the
// library accepts (privacy.ClipSet: C_amax may be +Inf), and its
// certificate is +Inf with the reason, not an error of the CLI's own
// (issue 32: the CLI does not re-check what the library validates).
func TestCertifyUnbounded(t *testing.T) {
	for _, c := range []struct{ flag, reason string }{
		{"--c-mu", "the mean radius C_mu is unbounded"},
		{"--c-alpha-max", "C_amax is unbounded"},
	} {
		r := certifyJSON(t, append(append([]string{}, mainJobArgs...), c.flag, "inf")...)
		if r["epsilon"] != "Infinity" || r["finite"] != false || !strings.Contains(fmt.Sprint(r["reason"]), c.reason) {
			t.Errorf("%s inf: epsilon %v, finite %v, reason %v", c.flag, r["epsilon"], r["finite"], r["reason"])
		}
	}
}
