package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nvdp-project/nvdp/audit"
	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/internal/cudaemu"
	"github.com/nvdp-project/nvdp/internal/jsondiff"
	"github.com/nvdp-project/nvdp/internal/texttest"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/privacy"
)

func writeTestPosteriors(t *testing.T) string {
	t.Helper()
	p := privacy.NewPosteriors(5, 3, 4)
	for x := range p.M {
		for i := range p.N {
			p.Alpha[x*p.N+i] = float32(0.3 + 0.1*float64((x+i)%5))
			for j := range p.P {
				k := (x*p.N+i)*p.P + j
				if i > 0 {
					p.Mu[k] = float32(0.1 * float64((x*7+i*3+j)%5-2))
					p.Logvar[k] = float32(2 * math.Log(0.5+0.1*float64((x+j)%4)))
				}
			}
		}
	}
	path := filepath.Join(t.TempDir(), "post.safetensors")
	if err := privacy.WritePosteriors(path, p); err != nil {
		t.Fatal(err)
	}
	return path
}

func runAuditCmd(args ...string) (string, error) { return runCmd(newAuditCmd(), args...) }

func TestAuditCommandJSON(t *testing.T) {
	path := writeTestPosteriors(t)
	out, err := runAuditCmd("--posteriors", path, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out)
	}
	for _, k := range []string{"mode", "order", "delta", "examples", "pairs", "invalid_pairs", "rd_max", "rd_mean", "argmax", "bdp_epsilon", "bdp_epsilon_pooled", "bdp_order"} {
		if _, ok := r[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	if r["mode"] != "principled" || r["pairs"] != 20.0 || r["examples"] != 5.0 {
		t.Errorf("mode %v pairs %v examples %v", r["mode"], r["pairs"], r["examples"])
	}
	// The CLI reports what the library computes.
	p, _ := privacy.ReadPosteriors(path)
	want, _ := audit.Audit(context.Background(), p, audit.DefaultOptions())
	if r["rd_max"] != float64(want.RDMax) {
		t.Errorf("rd_max %v, library %v", r["rd_max"], want.RDMax)
	}

	out, err = runAuditCmd("--posteriors", path, "--mode", "reference", "--batch-size", "4", "--json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || r["mode"] != "reference" || r["rd_max_unfiltered"] == nil {
		t.Errorf("reference JSON: %v %s", err, out)
	}

	out, err = runAuditCmd("--posteriors", path, "--bdp-orders", "0.1,0.5")
	if err != nil || !strings.Contains(out, "RD max") || !strings.Contains(out, "BDP per moment order") {
		t.Errorf("table output: %v\n%s", err, out)
	}
}

// mainJobClip is the clip set of the main job (docs/training.md) for a
// posterior file of n components in p dimensions: C_mu 2, logvar margin
// 0.6931 at order 1.1, C_amin 0.3, C_amax 1, prior N(0, 1) with alpha 1.
func mainJobClip(n, p int) privacy.ClipSet {
	return privacy.ClipSet{Components: n, Dims: p, CMu: 2, PriorMu: []float64{0}, PriorVar: []float64{1},
		ClipOrder: 1.1, LogvarMargin: 0.6931, AlphaMin: 0.3, AlphaMax: 1, PriorAlpha: 1}
}

// writeClippedPosteriors writes 5 posteriors of 3 components in 4 dims that
// the main job's clipping can release (prior component = the prior, token
// components inside the clip box), with the clip constants in the metadata
// when withClip.
func writeClippedPosteriors(t *testing.T, withClip bool) string {
	t.Helper()
	p := privacy.NewPosteriors(5, 3, 4)
	for x := range p.M {
		p.Alpha[x*p.N] = 1 // prior component
		for i := 1; i < p.N; i++ {
			p.Alpha[x*p.N+i] = float32(0.3 + 0.1*float64((x+i)%8))
			for j := range p.P {
				k := (x*p.N+i)*p.P + j
				p.Mu[k] = float32(0.4 * float64((x*7+i*3+j)%5-2))
				p.Logvar[k] = float32(2 * math.Log(0.45+0.1*float64((x+j)%6)))
			}
		}
	}
	p.Metadata = map[string]string{"split": "dev", "task": "sst2"}
	if withClip {
		for k, v := range mainJobClip(p.N, p.P).Metadata() {
			p.Metadata[k] = v
		}
	}
	path := filepath.Join(t.TempDir(), "post.safetensors")
	if err := privacy.WritePosteriors(path, p); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAuditCertifiedBesideEmpirical: a file whose metadata carries the clip
// constants gets the certified guarantee beside the empirical audit, in the
// human output and in --json, with labels that keep them apart; the
// certificate bounds every audited pair. A file without clip constants has no
// certified block.
func TestAuditCertifiedBesideEmpirical(t *testing.T) {
	for _, tc := range []struct {
		name     string
		withClip bool
		mode     string
		want     []string // in the human output
		absent   []string
	}{
		{name: "clip metadata, principled", withClip: true, mode: "principled",
			want: []string{"RD max over 5(5-1) = 20 dev pairs (empirical, not a guarantee)", "RD mean (empirical)",
				"BDP ε_μ estimate, worst individual (delta 1e-05)", "BDP ε_μ estimate, pooled pairs",
				"Student-t, confidence 1-1e-16; pairs treated as independent",
				"certified RD (every pair of inputs), order 1.1", "certified ε (delta 1e-05)",
				"certified BDP ε_μ (delta 1e-05)", "eps_mu <= cert(1+l) + ln(1/delta_mu)/l minimised over l",
				"one release of the embedding of one input (a text, an utterance) vs any other input (every pair of inputs; N = "},
			absent: []string{"no certified guarantee"}},
		{name: "clip metadata, reference", withClip: true, mode: "reference",
			want:   []string{"RD max (z-filtered; empirical batch estimate, not a guarantee)", "BDP ε_μ estimate (released accountant", "certified RD (every pair of inputs), order 1.1"},
			absent: []string{"no certified guarantee"}},
		{name: "no clip metadata", withClip: false, mode: "principled",
			want:   []string{"RD max over 5(5-1) = 20 dev pairs (empirical, not a guarantee)", "no certified guarantee"},
			absent: []string{"certified RD", "certified ε", "certified BDP"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeClippedPosteriors(t, tc.withClip)
			out, err := runAuditCmd("--posteriors", path, "--mode", tc.mode, "--batch-size", "4")
			if err != nil {
				t.Fatal(err)
			}
			texttest.Contains(t, out, tc.want, tc.absent)

			out, err = runAuditCmd("--posteriors", path, "--mode", tc.mode, "--batch-size", "4", "--json")
			if err != nil {
				t.Fatal(err)
			}
			var r struct {
				RDMax     *float64 `json:"rd_max"`
				Empirical *struct {
					Label string `json:"label"`
					Scope string `json:"scope"`
					BDP   string `json:"bdp_epsilon"`
				} `json:"empirical"`
				Certified *struct {
					Label  string             `json:"label"`
					Scope  string             `json:"scope"`
					RD     *float64           `json:"rd_certified"`
					Finite bool               `json:"finite"`
					Eps    *float64           `json:"epsilon"`
					BDP    *float64           `json:"bdp_epsilon_certified"`
					Parts  map[string]float64 `json:"parts"`
					Curve  []map[string]any   `json:"orders"`
				} `json:"certified"`
			}
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("not one JSON object: %v\n%s", err, out)
			}
			if r.Empirical == nil || r.Empirical.Label != "empirical" || !strings.Contains(r.Empirical.Scope, "not a guarantee") || !strings.Contains(r.Empirical.BDP, "estimate") {
				t.Errorf("empirical label %+v", r.Empirical)
			}
			if !tc.withClip {
				if r.Certified != nil {
					t.Errorf("certified block %+v for a file without clip metadata", r.Certified)
				}
				return
			}
			c := r.Certified
			p, err := privacy.ReadPosteriors(path)
			if err != nil {
				t.Fatal(err)
			}
			if c == nil || c.Label != "certified" || c.Scope != privacy.CertifiedScope(1, p.N, p.P) || !c.Finite || c.RD == nil || c.Eps == nil || c.BDP == nil {
				t.Fatalf("certified block %+v", c)
			}
			want, err := privacy.Certify(mainJobClip(p.N, p.P), 1.1, privacy.DirectionStandard)
			if err != nil {
				t.Fatal(err)
			}
			if *c.RD != float64(want.RD) || c.Parts["variance"] != float64(want.Parts.Variance) || len(c.Curve) != len(privacy.DefaultOrders) {
				t.Errorf("rd_certified %v parts %v (%d orders), library %v %+v", *c.RD, c.Parts, len(c.Curve), want.RD, want.Parts)
			}
			// The certificate is an upper bound on every audited pair (principled audit: Eq. rdp itself).
			if tc.mode == "principled" && !(r.RDMax != nil && *r.RDMax <= *c.RD) {
				t.Errorf("empirical rd_max %v above rd_certified %v", r.RDMax, *c.RD)
			}
		})
	}
}

// TestAuditCertifiedBadMetadata: malformed clip metadata is an error naming
// the file and the key, not a silently missing guarantee.
func TestAuditCertifiedBadMetadata(t *testing.T) {
	path := writeClippedPosteriors(t, true)
	p, err := privacy.ReadPosteriors(path)
	if err != nil {
		t.Fatal(err)
	}
	p.Metadata["clip_mu"] = "two"
	bad := filepath.Join(t.TempDir(), "bad.safetensors")
	if err := privacy.WritePosteriors(bad, p); err != nil {
		t.Fatal(err)
	}
	if _, err := runAuditCmd("--posteriors", bad); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "clip_mu") {
		t.Errorf("error %v, want one naming %s and clip_mu", err, bad)
	}
}

func TestAuditCommandErrors(t *testing.T) {
	path := writeTestPosteriors(t)
	bad := filepath.Join(t.TempDir(), "bad.safetensors")
	raw, _ := os.ReadFile(path)
	os.WriteFile(bad, raw[:len(raw)-10], 0o644)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--posteriors", path, "--order", "1"}, "--order 1: the Renyi order lambda must be finite and > 1"},
		{[]string{"--posteriors", path, "--order", "0.5"}, "--order 0.5: the Renyi order lambda must be finite and > 1"},
		// An explicit 0 is never replaced by the default.
		{[]string{"--posteriors", path, "--delta", "0"}, "--delta 0: must be in (0, 1)"},
		{[]string{"--posteriors", path, "--confidence", "0"}, "--confidence 0: must be in (0.5, 1)"},
		{[]string{"--posteriors", path, "--mode", "reference", "--batch-size", "0"}, "--batch-size 0: reference mode: must be >= 2"},
		{[]string{"--posteriors", path, "--mode", "reference", "--batch-size", "4", "--q", "0"}, "--q 0: the sampling ratio must be in (0, 1]"},
		// q not given: 5 examples, batch size 16.
		{[]string{"--posteriors", path, "--mode", "reference"}, "q = batch size / M = 16/5 > 1: the file has fewer examples than one batch"},
		{[]string{"--posteriors", path, "--pairs", "-5"}, "--pairs -5: must be >= 0"},
		{[]string{"--posteriors", bad}, bad},
		{[]string{"--posteriors", filepath.Join(t.TempDir(), "missing")}, "no such file"},
		{[]string{"--posteriors", path, "--mode", "fast"}, `--mode "fast": want principled or reference`},
		{[]string{"--posteriors", path, "--bdp-orders", "0.1,x"}, "not a number"},
		{[]string{"--posteriors", path, "--mode", "reference", "--mask"}, "--mask: applies to principled mode only"},
		{[]string{}, "posteriors"},
	}
	for _, c := range cases {
		_, err := runAuditCmd(c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
	}
}

func TestAuditRegistered(t *testing.T) {
	for _, c := range rootCmd.Commands() {
		if c.Name() == "audit" {
			return
		}
	}
	t.Fatal("audit not registered on rootCmd")
}

// TestAuditCommandHardening: `nvdp audit --json` of a file with a finite
// mu of 1e20 succeeds with a finite histogram (before: it failed on NaN, the
// histogram was [NaN, +Inf)); a --pairs sample larger than the file's
// ordered pairs is not drawn: every pair is audited and the output says so
// (issue 32).
func TestAuditCommandHardening(t *testing.T) {
	p := privacy.NewPosteriors(6, 2, 3)
	for i := range p.Alpha {
		p.Alpha[i] = 1
	}
	p.Mu[0] = 1e20
	path := filepath.Join(t.TempDir(), "huge.safetensors")
	if err := privacy.WritePosteriors(path, p); err != nil {
		t.Fatal(err)
	}
	out, err := runAuditCmd("--posteriors", path, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		RDMax     float64 `json:"rd_max"`
		Histogram struct {
			Edges []float64 `json:"edges"`
		} `json:"histogram"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || !(r.RDMax > 1e39) || len(r.Histogram.Edges) != 21 || r.Histogram.Edges[20] != r.RDMax {
		t.Errorf("mu 1e20: %v %+v\n%s", err, r, out)
	}
	out, err = runAuditCmd("--posteriors", path, "--pairs", "100", "--workers", "2")
	if err != nil {
		t.Fatal(err)
	}
	texttest.Contains(t, out, []string{"RD max over 6(6-1) = 30 pairs",
		"note: a sample of 100 ordered pairs was asked for, not fewer than the file's 6(6-1) = 30: every ordered pair audited exactly instead"},
		[]string{"sampled", "a sample of 100 of the"})
}

// TestAuditPairsCoverAll (issue 32): `nvdp audit --pairs K` with K at or
// above the file's M(M-1) ordered pairs prints the report of no --pairs
// (every pair, exact; the same JSON but for the time and a note); below, a
// sample. Before, K = 20 of the 20 pairs of writeTestPosteriors sampled with
// replacement (rd_mean 1.6803 against the exact 1.7120, a seed, other
// quantiles and histogram) and K = 10^9 ran for over an hour (here: past the
// deadline).
func TestAuditPairsCoverAll(t *testing.T) {
	path := writeTestPosteriors(t)
	decode := func(out string) (map[string]any, []any) {
		t.Helper()
		var r map[string]any
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		notes, _ := r["notes"].([]any)
		delete(r, "seconds")
		delete(r, "notes")
		return r, notes
	}
	base := []string{"--posteriors", path, "--json", "--workers", "2", "--no-progress"}
	out, err := runAuditCmd(base...)
	if err != nil {
		t.Fatal(err)
	}
	exact, exactNotes := decode(out)
	if got := fmt.Sprintf("%.4f %v", exact["rd_max"], exact["argmax"]); got != "2.1118 [4 2]" {
		t.Errorf("exact rd_max %v at %v, want 2.1118 at [4 2]", exact["rd_max"], exact["argmax"])
	}
	for _, c := range []struct {
		pairs   string
		sampled bool
	}{
		{"19", true},
		{"20", false},
		{"1000000000", false},
	} {
		// bounded: before, 10^9 draws took over an hour on 2 cores
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := newAuditCmd()
		var buf bytes.Buffer
		cmd.SetOut(&buf)
		cmd.SetArgs(append(base, "--pairs", c.pairs))
		err := cmd.ExecuteContext(ctx)
		cancel()
		out := buf.String()
		if err != nil {
			t.Errorf("--pairs %s: %v", c.pairs, err)
			continue
		}
		r, notes := decode(out)
		if c.sampled {
			if r["sampled"] != true || r["pairs"] != 19.0 {
				t.Errorf("--pairs 19: sampled %v, pairs %v; want a sample of 19", r["sampled"], r["pairs"])
			}
			continue
		}
		if d := jsondiff.Diff("", r, exact, 0); len(d) > 0 {
			t.Errorf("--pairs %s: the report differs from the one of every pair: %v", c.pairs, d)
		}
		want := fmt.Sprintf("a sample of %s ordered pairs was asked for, not fewer than the file's 5(5-1) = 20: every ordered pair audited exactly instead (no sample; rd_max is the maximum over all pairs)", c.pairs)
		if len(notes) != len(exactNotes)+1 || !slices.Contains(notes, any(want)) {
			t.Errorf("--pairs %s: notes %q, want those of every pair and %q", c.pairs, notes, want)
		}
	}
}

// TestAuditSkipsCertifiedInfinite: with clip constants in the metadata the
// BDP orders the clip set certifies +Inf are skipped (reported +Inf with
// the reason), --all-orders evaluates them; the other orders agree.
func TestAuditSkipsCertifiedInfinite(t *testing.T) {
	path := writeClippedPosteriors(t, true)
	var reps [2]audit.Report
	for i, args := range [][]string{{}, {"--all-orders"}} {
		out, err := runAuditCmd(append([]string{"--posteriors", path, "--json", "--workers", "1"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(out), &reps[i]); err != nil {
			t.Fatal(err)
		}
	}
	maxOrder := mainJobClip(3, 4).MaxOrder()
	skipped := 0
	for k, bo := range reps[0].BDPOrders {
		all := reps[1].BDPOrders[k]
		if all.Skipped != "" {
			t.Errorf("--all-orders skipped order %v", all.Order)
		}
		if want := bo.RenyiOrder >= maxOrder; (bo.Skipped != "") != want {
			t.Errorf("order %v (Renyi %v, certified finite below %v): skipped %q", bo.Order, bo.RenyiOrder, maxOrder, bo.Skipped)
		}
		if bo.Skipped != "" {
			skipped++
			if bo.Epsilon == nil || !math.IsInf(float64(*bo.Epsilon), 1) {
				t.Errorf("skipped order %v: epsilon %v, want +Inf", bo.Order, bo.Epsilon)
			}
			continue
		}
		if *bo.Epsilon != *all.Epsilon || bo.InfPairs != all.InfPairs {
			t.Errorf("order %v: epsilon %v (%d inf pairs), with --all-orders %v (%d)", bo.Order, *bo.Epsilon, bo.InfPairs, *all.Epsilon, all.InfPairs)
		}
	}
	if skipped == 0 || skipped == len(reps[0].BDPOrders) {
		t.Fatalf("%d of %d orders skipped (certified finite below %v): the test needs both kinds", skipped, len(reps[0].BDPOrders), maxOrder)
	}
	if reps[0].RDMax != reps[1].RDMax {
		t.Errorf("rd_max %v, with --all-orders %v", reps[0].RDMax, reps[1].RDMax)
	}
}

// TestAuditShardsMerge runs `nvdp audit --shard i/3 --out` for every shard
// and `nvdp audit merge --json` on the parts, and compares with the
// one-process `nvdp audit --json`: counts, rd_max, argmax exactly, rd_mean
// and bdp_epsilon to 1e-12, the sketch's accuracy stated; flag errors name
// the flags and write nothing.
func TestAuditShardsMerge(t *testing.T) {
	path := writeClippedPosteriors(t, true)
	out, err := runAuditCmd("--posteriors", path, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var want, got audit.Report
	if err := json.Unmarshal([]byte(out), &want); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var parts []string
	for i := range 3 {
		part := filepath.Join(dir, fmt.Sprintf("part%d.json", i))
		if _, err := runAuditCmd("--posteriors", path, "--shard", fmt.Sprintf("%d/3", i), "--out", part); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, part)
	}
	out, err = runCmd(newAuditMergeCmd(), append(parts, "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.Pairs != want.Pairs || got.InvalidPairs != want.InvalidPairs || got.RDMax != want.RDMax || !slices.Equal(got.Argmax, want.Argmax) || got.Shards != 3 {
		t.Errorf("merged pairs %d invalid %d rd_max %v at %v (%d shards), one process %d %d %v at %v",
			got.Pairs, got.InvalidPairs, got.RDMax, got.Argmax, got.Shards, want.Pairs, want.InvalidPairs, want.RDMax, want.Argmax)
	}
	for _, f := range [][2]*jsonfloat.Float{{got.RDMean, want.RDMean}, {got.BDPEpsilon, want.BDPEpsilon}} {
		if f[0] == nil || f[1] == nil || math.Abs(float64(*f[0]-*f[1])) > 1e-12*math.Abs(float64(*f[1])) {
			t.Errorf("merged %v, one process %v", f[0], f[1])
		}
	}
	if got.QuantileAccuracy == nil || *got.QuantileAccuracy != audit.SketchRelativeAccuracy {
		t.Errorf("quantile accuracy %v", got.QuantileAccuracy)
	}
	text, err := runCmd(newAuditMergeCmd(), parts...)
	if err != nil || !strings.Contains(text, "sketch within 0.005 relative") || !strings.Contains(text, "certified RD") {
		t.Errorf("merge table: %v\n%s", err, text)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--shard", "0/2"}, "--shard and --out go together"},
		{[]string{"--shard", "2/2", "--out", filepath.Join(dir, "x.json")}, `--shard "2/2": want 0 <= i < n`},
		{[]string{"--shard", "a", "--out", filepath.Join(dir, "x.json")}, "want i/n"},
		{[]string{"--shard", "0/2", "--out", filepath.Join(dir, "x.json"), "--pairs", "5"}, "no --pairs"},
	} {
		if _, err := runAuditCmd(append([]string{"--posteriors", path}, c.args...)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.json")); !os.IsNotExist(err) {
		t.Errorf("a refused shard wrote its part: %v", err)
	}
	if _, err := runCmd(newAuditMergeCmd(), parts[0], parts[2]); err == nil || !strings.Contains(err.Error(), "2 parts of an audit in 3 shards") {
		t.Errorf("merge of 2 of 3 parts: %v", err)
	}
}

// TestAuditLowMemoryFlag: `nvdp audit --low-memory` prints the report of
// the default audit (one worker: the same sums in the same order).
func TestAuditLowMemoryFlag(t *testing.T) {
	path := writeTestPosteriors(t)
	var outs [2]map[string]any
	for i, extra := range [][]string{nil, {"--low-memory"}} {
		out, err := runAuditCmd(append([]string{"--posteriors", path, "--json", "--workers", "1"}, extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(out), &outs[i]); err != nil {
			t.Fatal(err)
		}
		delete(outs[i], "seconds")
	}
	a, _ := json.Marshal(outs[0])
	b, _ := json.Marshal(outs[1])
	if string(a) != string(b) || !strings.Contains(string(a), `"rd_max"`) {
		t.Errorf("--low-memory report differs:\n%s\n%s", b, a)
	}
}

// useStandIn points package cuda at the CUDA stand-in (internal/cudaemu)
// for the test; with NVDP_CUDA_REAL=1 the real GPU is used. It skips the
// test without a C compiler.
func useStandIn(t *testing.T) {
	t.Helper()
	if os.Getenv(cudaemu.RealEnv) == "1" {
		return
	}
	dir := cudaemu.BuildFor(t) // skipped without a C compiler, failed where CI=true
	t.Setenv(cuda.LibDirEnv, dir)
	t.Setenv("NVDP_EMU_INCLUDE", dir)
}

// writeMaskedPosteriors writes 12 random posteriors of 4 components (the
// last 0 to 2 of each padding) in 6 dimensions, split "dev".
func writeMaskedPosteriors(t *testing.T) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(29, 3))
	p := privacy.NewPosteriors(12, 4, 6)
	p.AttentionMask = make([]uint8, p.M*p.N)
	for x := range p.M {
		real := p.N - rng.IntN(3)
		for i := range p.N {
			k := x*p.N + i
			p.Alpha[k] = float32(0.3 + 0.7*rng.Float64())
			if i < real {
				p.AttentionMask[k] = 1
			}
			for j := range p.P {
				if i > 0 {
					p.Mu[k*p.P+j] = float32(0.4 * rng.NormFloat64())
					p.Logvar[k*p.P+j] = float32(-0.6 + 0.3*rng.NormFloat64())
				}
			}
		}
		p.Alpha[x*p.N] = 1
	}
	p.Metadata["split"] = "dev"
	path := filepath.Join(t.TempDir(), "masked.safetensors")
	if err := privacy.WritePosteriors(path, p); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAuditDevice: `nvdp audit --device cuda` on the CUDA stand-in (the
// GPU with NVDP_CUDA_REAL=1) prints the report of --device cpu: the same
// JSON fields, counts, argmax, undefined pairs, skipped BDP orders, notes
// and certified block, the numbers within 1e-6 relative (the values
// differ by rounding only, about 1e-13: dnn's TestAuditAllPairsMatchesCPU),
// on a masked file (with and without --mask, both Gaussian directions) and
// a clipped one whose metadata certifies some BDP orders +Inf. The options
// the device does not run are refused naming their flag; auto runs them on
// the CPU.
func TestAuditDevice(t *testing.T) {
	useStandIn(t)
	t.Setenv(cuda.CacheEnv, t.TempDir()) // a kernel cache of its own
	files := []string{writeMaskedPosteriors(t), writeClippedPosteriors(t, true)}
	for _, path := range files {
		for _, extra := range [][]string{nil, {"--mask", "--gaussian-direction", "paper", "--order", "1.5"}} {
			var outs [2]map[string]any
			for i, device := range []string{"cpu", "cuda"} {
				out, err := runAuditCmd(append([]string{"--posteriors", path, "--json", "--device", device}, extra...)...)
				if err != nil {
					t.Fatalf("%s %v --device %s: %v", filepath.Base(path), extra, device, err)
				}
				if err := json.Unmarshal([]byte(out), &outs[i]); err != nil {
					t.Fatalf("not one JSON object: %v\n%s", err, out)
				}
				delete(outs[i], "seconds")
			}
			for _, d := range jsondiff.Diff("report", outs[1], outs[0], 1e-6) {
				t.Errorf("%s %v: %s", filepath.Base(path), extra, d)
			}
			if outs[0]["rd_max"] == nil || outs[0]["bdp_orders"] == nil {
				t.Errorf("%s %v: the CPU's report lacks rd_max or bdp_orders: %v", filepath.Base(path), extra, outs[0])
			}
		}
	}
	out, err := runAuditCmd("--posteriors", files[0], "--device", "cuda")
	texttest.Contains(t, out, []string{"RD max over 12(12-1) = 132 dev pairs", "BDP per moment order"}, nil)
	if err != nil {
		t.Error(err)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--pairs", "10"}, "--device cuda: --pairs runs on the CPU only"},
		{[]string{"--low-memory"}, "--device cuda: --low-memory runs on the CPU only"},
		{[]string{"--shard", "0/2", "--out", filepath.Join(t.TempDir(), "part.json")}, "--device cuda: --shard runs on the CPU only"},
		{[]string{"--mode", "reference", "--batch-size", "4"}, "--device cuda: --mode reference runs on the CPU only"},
		{[]string{"--precision", "tf32"}, "--precision tf32: the audit computes in FP64"},
	} {
		_, err := runAuditCmd(append([]string{"--posteriors", files[0], "--device", "cuda"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
	}
	out, err = runAuditCmd("--posteriors", files[0], "--device", "auto", "--pairs", "7", "--json")
	if err != nil || !strings.Contains(out, `"sampled":true`) {
		t.Errorf("--device auto --pairs 7: %v\n%s", err, out)
	}
}

// TestAuditShardOutIsInput (issue 32): `nvdp audit --shard i/n --out F`
// where F is the --posteriors file by any name (the same path, another
// spelling of it, a symbolic link, a hard link) is refused before any work,
// naming both flags and the file; the posteriors are left as they were.
// Before, the part replaced the posteriors it audited.
func TestAuditShardOutIsInput(t *testing.T) {
	path := writeTestPosteriors(t)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(path)
	link := filepath.Join(t.TempDir(), "link.json")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(dir, "hard.json")
	if err := os.Link(path, hard); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, c := range []struct {
		name, out string
	}{
		{"the same path", path},
		{"relative", "post.safetensors"},
		{"through ..", filepath.Join(dir, "sub", "..", "post.safetensors")},
		{"symbolic link", link},
		{"hard link", hard},
	} {
		_, err := runAuditCmd("--posteriors", path, "--shard", "0/2", "--out", c.out)
		want := fmt.Sprintf("--out %s is the --posteriors file %s: the part would replace the posteriors it audits", c.out, path)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", c.name, err, want)
		}
		if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, orig) {
			t.Fatalf("%s: the posteriors changed (%v): %d bytes, was %d", c.name, err, len(b), len(orig))
		}
	}
	part := filepath.Join(dir, "part0.json") // another file: written
	if _, err := runAuditCmd("--posteriors", path, "--shard", "0/2", "--out", part); err != nil {
		t.Fatal(err)
	}
	if _, err := audit.ReadPart(part); err != nil {
		t.Error(err)
	}
}

// TestAuditShardRemovesStaleTemp (issue 32): a shard's part removes the
// temporary files of its --out that a killed write left (logged), and only
// those.
func TestAuditShardRemovesStaleTemp(t *testing.T) {
	path := writeTestPosteriors(t)
	dir := t.TempDir()
	part := filepath.Join(dir, "part0.json")
	for _, c := range []struct {
		name   string
		remove bool
	}{
		{".part0.json.tmp123456", true},
		{".part0.json.tmp9", true},
		{".part1.json.tmp123456", false}, // another shard's, maybe being written
		{".part0.json.tmpx", false},
	} {
		if err := os.WriteFile(filepath.Join(dir, c.name), []byte("{"), 0o644); err != nil {
			t.Fatal(err)
		}
		defer func() {
			_, err := os.Stat(filepath.Join(dir, c.name))
			if gone := errors.Is(err, os.ErrNotExist); gone != c.remove {
				t.Errorf("%s: removed %v, want %v (%v)", c.name, gone, c.remove, err)
			}
		}()
	}
	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	_, err := runAuditCmd("--posteriors", path, "--shard", "0/2", "--out", part)
	slog.SetDefault(prev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := audit.ReadPart(part); err != nil {
		t.Error(err)
	}
	if l := logs.String(); !strings.Contains(l, "removed the temporary files of an interrupted write") || !strings.Contains(l, ".part0.json.tmp123456") || strings.Contains(l, ".part1.json") {
		t.Errorf("log %q", l)
	}
}

// TestRunAuditFlagErrors: the audit options of `nvdp run` are checked
// before any work by the library (audit.Options.Validate) and named as run's
// flags, --audit-mode and --audit-batch-size where --mode and --batch-size
// are the training's.
func TestRunAuditFlagErrors(t *testing.T) {
	out := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--audit-mode", "reference", "--audit-batch-size", "1"}, "--audit-batch-size 1: reference mode: must be >= 2"},
		{[]string{"--audit-mode", "fast"}, `--audit-mode "fast": want principled or reference`},
		{[]string{"--confidence", "0"}, "--confidence 0: must be in (0.5, 1)"},
		{[]string{"--pairs", "-2"}, "--pairs -2: must be >= 0"},
	} {
		_, err := runCmd(newRunCmd(), append(c.args, "--task", "sst2", "--out", out)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}
